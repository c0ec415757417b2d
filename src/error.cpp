// The thread-local last-error message behind fv_last_error().
#include <cstdio>
#include <string>

#include "common.h"

namespace fv {
namespace {
thread_local std::string g_last_error;
}

fv_status fail(fv_status status, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_last_error = buf;
  return status;
}

const char* last_error() { return g_last_error.c_str(); }

}  // namespace fv
