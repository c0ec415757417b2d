// The thread-local last-error message behind fv_last_error().
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "common.h"

namespace fv {
namespace {
// A fixed buffer, not a std::string: fv_last_error()'s pointer must stay valid when a later failing call on the
// thread stores a longer message (a string would reallocate and leave the caller's pointer dangling, e.g. in
// printf("%s: %s", fv_status_string(fv_run(...)), fv_last_error()), whose arguments may be evaluated in any order)
thread_local char g_last_error[1024];
}

fv_status fail(fv_status status, const char* fmt, ...) {
  char buf[sizeof g_last_error];  // (formatted apart: an argument may point into g_last_error)
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::memcpy(g_last_error, buf, sizeof buf);
  return status;
}

const char* last_error() { return g_last_error; }

}  // namespace fv
