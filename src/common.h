// Internal helpers shared by the host-side sources: the thread-local error message and index reads.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "flashverify/flashverify.h"

namespace fv {

// Records a formatted message for fv_last_error() and returns `status`, so that validation reads
//   if (x < 0) return fail(FV_ERR_BAD_LENGTH, "batch_size (%d) is negative", x);
fv_status fail(fv_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* last_error();

inline int64_t index_at(const fv_index& ix, int64_t i) {
  return ix.dtype == FV_INDEX_INT64 ? static_cast<const int64_t*>(ix.data)[i]
                                    : static_cast<const int32_t*>(ix.data)[i];
}

// Tuning switches (environment variables): on unless "0", off unless "1". Each caller decides when it reads: the
// planner's A/B switches are read every call (a few getenv a call; README lists which), the rest once (a static)
inline bool env_on_unless_0(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}
inline bool env_is_1(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// A numeric tuning knob (environment variable): its value when it is a whole decimal number in [lo, hi], else `fallback`
inline int env_int_in(const char* name, int lo, int hi, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return *end == '\0' && x >= lo && x <= hi ? static_cast<int>(x) : fallback;
}

// k_scale / v_scale: 0 (a zero-initialised fv_args) means 1
inline float kv_scale_of(float s) { return s == 0.f ? 1.f : s; }

// The largest valid sink: the kernels scale sinks by log2(e) in float, so one above FLT_MAX / log2(e) (~2.36e38)
// becomes +inf there and the row's output NaN (the float64 oracle would give 0)
constexpr float kMaxSink = 2.35e38f;
#if defined(__CUDACC__)
__host__ __device__
#endif
inline bool sink_valid(float s) { return s <= kMaxSink; }  // (false for NaN and +inf; validate.cpp and check.cu)

inline bool is_mla_dims(int dqk, int dv) { return dqk == 576 && dv == 512; }

// The sliding window the kernels apply: args.sliding_window when > 0 and below kWindowNoOp, else 0 (off). A window
// of 2^30 or more hides no key of a call within the documented lengths (P_b + N_b < 2^30), and the kernels' int32
// position arithmetic (position + W) stays in range below it.
constexpr int32_t kWindowNoOp = int32_t(1) << 30;
inline int32_t effective_window(const fv_args& a) {
  return a.sliding_window > 0 && a.sliding_window < kWindowNoOp ? a.sliding_window : 0;
}
// window_kv_offsets as SGLang reads them: with the byte mask and a sliding window (> 0) only, else none
inline const int32_t* effective_window_offsets(const fv_args& a) {
  return a.problem.mask_kind == FV_MASK_BYTES && a.sliding_window > 0 ? a.window_kv_offsets : nullptr;
}
// request b's offset (off_b: the byte mask's rows are off_b + P_b + N_b wide), 0 where the offsets are not read
inline int64_t window_offset(const fv_args& a, int b) {
  const int32_t* woff = effective_window_offsets(a);
  return woff ? woff[b] : 0;
}

inline fv_dtype kv_dtype_of(const fv_problem& p) {
  return static_cast<fv_dtype>(p.kv_dtype == 0 ? p.dtype : p.kv_dtype);
}

inline fv_dtype out_dtype_of(const fv_problem& p) {
  return static_cast<fv_dtype>(p.out_dtype == 0 ? p.dtype : p.out_dtype);
}

inline int dtype_bytes(int dt) {
  switch (dt) {
    case FV_DTYPE_BF16:
    case FV_DTYPE_FP16: return 2;
    case FV_DTYPE_FP32: return 4;
    case FV_DTYPE_FP64: return 8;
    case FV_DTYPE_FP8_E4M3: return 1;
    default: return 0;
  }
}

const char* dtype_name(int dt);

// Host-side validation. validate_problem checks the fields the workspace size depends on;
// validate_args also the pointers and strides; validate_device_data (CPU only: it reads every length,
// index and mask entry) everything a kernel would otherwise trust. walk_tokens false: everything but the prefix
// tokens' slots (O(B + sum N) instead of O(sum P): the check mode's host path for a call over kMaxBatchTokens,
// whose kv_indices / page_table it does not copy).
fv_status validate_problem(const fv_problem& p, const char* fn);
fv_status validate_args(const fv_args& a, const char* fn);
fv_status validate_device_data(const fv_args& a, const char* fn, bool walk_tokens = true);

// FLASHVERIFY_CHECK=1 in the environment (read once).
bool check_mode_from_env();

// The float64 oracle (src/reference.cpp). Arguments were validated by the caller.
fv_status run_reference(const fv_args& a);

}  // namespace fv
