// Shared by the GPU test files: the GPU-availability skip and the comparison against the float64 oracle.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "testkit.h"

// No usable GPU: the test is skipped, and says why. Where one must be there (FV_REQUIRE_GPU=1: scripts/device-check
// on the GPU machine, where a driver / runtime mismatch would otherwise turn every test into a skip and the run
// into a pass), it fails instead.
#define REQUIRE_GPU()                                                                     \
  do {                                                                                    \
    const std::string why_ = fvt::gpu_unavailable_reason();                               \
    if (!why_.empty()) {                                                                  \
      const char* req_ = std::getenv("FV_REQUIRE_GPU");                                   \
      if (req_ != nullptr && std::string(req_) == "1") FAIL() << "no GPU (FV_REQUIRE_GPU=1): " << why_; \
      GTEST_SKIP() << "no GPU: " << why_;                                                 \
    }                                                                                     \
  } while (0)

namespace fvg {

// device memory freed with its scope (null when the allocation failed)
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

constexpr double kMaxRelL2 = 1e-2;   // bf16 / fp16 outputs against the float64 oracle
constexpr double kFloorVsNaive = 1e-3;

// The fast kernel's bound against the naive kernel's error on the same inputs. The fast kernel rounds P to 16
// bits and accumulates on tensor cores (whose fp32 sums truncate) where the naive kernel keeps fp32 with
// round-to-nearest: it is allowed twice the naive error. The 1e-3 floor matters only for fp16, whose naive
// error (output rounding, ~2e-4) is so small that P's own fp16 rounding (~2^-12 relative) plus the truncation
// over a 262K-key single partition reach 2x by themselves; every bf16 case has 2 x naive > 3e-3 and is held
// to 2x. With an fp32 output the naive kernel's error is fp32 rounding alone (~3e-7), while the fast kernel
// still rounds P to the model's 16-bit type (bf16: up to 2^-8 relative a weight, 1.45e-3 rel L2 on the H200
// for the HopperMla inputs; fp16: up to 2^-11): such outputs get P's own rounding unit as the floor.
inline double fast_vs_naive_bound(const fvt::HostProblem& hp, double naive_rel_l2) {
  const double floor = hp.spec.out_dtype != FV_DTYPE_FP32 ? kFloorVsNaive
                       : hp.spec.dtype == FV_DTYPE_BF16 ? 1.0 / 256
                                                        : 1.0 / 2048;
  return std::max(2 * naive_rel_l2, floor);
}

// Reports every violated bound through EXPECT_*; returns whether all held.
inline bool check_against_oracle(const fvt::HostProblem& hp, const fvt::Reference& ref, const fvt::GpuRun& run,
                                 const char* impl, fvt::Comparison* out_cmp) {
  EXPECT_EQ(run.status, FV_OK) << impl << ": " << fv_status_string(run.status) << ": " << run.error;
  if (run.status != FV_OK) return false;
  EXPECT_EQ(run.pad_written, 0) << impl << ": " << run.pad_written << " bytes of the output rows' padding written";
  const fvt::Comparison c = fvt::compare(hp, run.out, run.lse, ref);
  *out_cmp = c;
  EXPECT_EQ(c.nan_count, 0) << impl << ": " << c.nan_count << " NaN outputs, first at " << c.where(hp);
  EXPECT_LE(c.rel_l2, kMaxRelL2) << impl << ": rel L2 " << c.rel_l2 << ", worst at " << c.where(hp) << " got "
                                 << c.worst_got << " want " << c.worst_ref;
  EXPECT_LE(c.req_rel_l2, kMaxRelL2) << impl << ": request " << c.worst_req << " alone has rel L2 " << c.req_rel_l2
                                     << " (the batch: " << c.rel_l2 << ")";
  EXPECT_EQ(c.lse_bad, 0) << impl << ": LSE NaN or -inf mismatch in " << c.lse_bad << " rows";
  EXPECT_LE(c.lse_worst_ratio, 1.0) << impl << ": LSE off by " << c.lse_max_abs << ", " << c.lse_worst_ratio
                                    << "x its bound (fvt::lse_allowed)";
  return run.pad_written == 0 && c.nan_count == 0 && c.rel_l2 <= kMaxRelL2 && c.req_rel_l2 <= kMaxRelL2 &&
         c.lse_bad == 0 && c.lse_worst_ratio <= 1.0;
}

// Downloads the outputs `dp` holds for problem `hp` (the one it was built with or last uploaded) and checks
// them against `hp`'s float64 oracle. Callers wrap it in ASSERT_NO_FATAL_FAILURE.
inline void check_device_outputs(const fvt::HostProblem& hp, const fvt::DeviceProblem& dp, const std::string& label,
                                 fvt::Comparison* out_cmp) {
  fvt::Reference ref;
  ASSERT_EQ(fvt::run_oracle(hp, &ref), FV_OK);
  fvt::GpuRun r;
  ASSERT_TRUE(dp.download(&r.out, &r.lse, nullptr, &hp)) << dp.error();
  check_against_oracle(hp, ref, r, label.c_str(), out_cmp);
}

// Relative L2 error of `got` (rows x cols, row-major) against ref(i, j) in float64; a non-finite element counts 1e30.
// `worst` (if given) receives the largest absolute error. (The wgmma building-block tests' products.)
template <class Ref>
double matrix_rel_l2(int rows, int cols, const std::vector<float>& got, Ref ref, double* worst = nullptr) {
  double num = 0, den = 0, w = 0;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      const double r = ref(i, j), g = got[size_t(i) * cols + j];
      const double d = std::isfinite(g) ? std::fabs(g - r) : 1e30;
      num += d * d;
      den += r * r;
      w = std::max(w, d);
    }
  if (worst) *worst = w;
  return std::sqrt(num / den);
}

// Whether the current GPU is an sm_90 one (the tests built for sm_90a only: wgmma, setmaxnreg)
inline bool on_sm90() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major == 9 && minor == 0;
}

}  // namespace fvg
