// Shared by the GPU test files: the GPU-availability skip and the comparison against the float64 oracle.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "testkit.h"

#define REQUIRE_GPU()                                                   \
  do {                                                                  \
    const std::string why_ = fvt::gpu_unavailable_reason();             \
    if (!why_.empty()) GTEST_SKIP() << "no GPU: " << why_;             \
  } while (0)

namespace fvg {

constexpr double kMaxRelL2 = 1e-2;   // bf16 / fp16 outputs against the float64 oracle
constexpr double kMaxLseAbs = 5e-3;  // natural log units
constexpr double kFloorVsNaive = 1e-3;

// Reports every violated bound through EXPECT_*; returns whether all held.
inline bool check_against_oracle(const fvt::HostProblem& hp, const fvt::Reference& ref, const fvt::GpuRun& run,
                                 const char* impl, fvt::Comparison* out_cmp) {
  EXPECT_EQ(run.status, FV_OK) << impl << ": " << fv_status_string(run.status) << ": " << run.error;
  if (run.status != FV_OK) return false;
  const fvt::Comparison c = fvt::compare(hp, run.out, run.lse, ref);
  *out_cmp = c;
  EXPECT_EQ(c.nan_count, 0) << impl << ": " << c.nan_count << " NaN outputs, first at " << c.where(hp);
  EXPECT_LE(c.rel_l2, kMaxRelL2) << impl << ": rel L2 " << c.rel_l2 << ", worst at " << c.where(hp) << " got "
                                 << c.worst_got << " want " << c.worst_ref;
  EXPECT_EQ(c.lse_bad, 0) << impl << ": LSE NaN or -inf mismatch in " << c.lse_bad << " rows";
  EXPECT_LE(c.lse_max_abs, kMaxLseAbs) << impl << ": LSE off by " << c.lse_max_abs;
  return c.nan_count == 0 && c.rel_l2 <= kMaxRelL2 && c.lse_bad == 0 && c.lse_max_abs <= kMaxLseAbs;
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

}  // namespace fvg
