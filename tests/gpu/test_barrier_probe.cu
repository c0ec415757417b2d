// A probe for compute-sanitizer racecheck, not for flashverify's kernels: the fp8 MLA producer kernel's Q-factor
// handoff (verify_wg.cuh, q_to_f16 -> run_segment) reduced to its synchronization. 512 threads; the first 256
// ("compute") write one float a row of a shared array, then bar.sync on a named barrier counted for 512 threads;
// the other 256 ("producers") only bar.arrive on it, after a delay (they wait on global memory in the kernel).
// After the barrier each compute thread reads rows written by threads of other warps. Segments are separated by
// __syncthreads as in the kernel. By the PTX memory model the barrier orders the writes before the reads (every
// compute thread takes part in it); the test checks the values read, and scripts/device-check runs it under
// racecheck to see whether the tool credits that ordering:
//   Mixed            the kernel's pattern;
//   MixedMaxnreg     the same with the kernel's setmaxnreg split (producers 32 registers, compute 224; sm_90a);
//   ComputeBarrier   a barrier of the 256 compute threads alone between the writes and the reads (no arrivals);
//   Pipeline         the kernel's whole stage protocol for four key steps: the producers arrive on FULL + (it & 1)
//                    (barrier ids from registers, as in the kernel) and, before refilling a stage from step 2 on,
//                    bar.sync on EMPTY + ((it + 1) & 1) (384 threads), on which compute warpgroup 0 arrives once past
//                    the step's FULL; the reads follow the first FULL. The first FULL + 0 generation holds exactly the
//                    256 compute threads and the producers' step-0 arrivals (their step-2 arrival needs EMPTY + 0,
//                    which needs warpgroup 0 past that generation), so every write is ordered before every read;
//   MixedEarly, PipelineEarly   the same with the producers' arrival first: compute warp w spends 1000 + 500 w
//                    cycles before its writes (some warps wait at FULL while others still write) and the producers none
//                    before their first arrival (v44's trace of the kernel: step 0's rows land before Q's conversion
//                    ends, so the producers arrive on FULL first). (Not yet run: v46's device time ran out.)
// Built for sm_90a only (fv_barrier_probe); skipped on other GPUs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_common.h"

namespace {

constexpr int kCompute = 256, kThreads = 512, kRows = 64, kSegments = 3;
enum Mode { kMixed = 0, kMixedMaxnreg = 1, kComputeBarrier = 2, kPipeline = 3, kMixedEarly = 4, kPipelineEarly = 5 };
constexpr int kFull = 2, kEmpty = 4, kEmptyThreads = 384, kSteps = 4;

template <int N>  // (id: a register operand unless the compiler folds it)
__device__ __forceinline__ void bar_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bar_arrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(N) : "memory");
}

__device__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// out[seg][t]: what compute thread t read for its two rows (sum), per segment
__global__ void __launch_bounds__(kThreads, 1) probe_kernel(int mode, float* out) {
  __shared__ float fac[kRows];
  const int t = threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (mode == kMixedMaxnreg) {
    if (t >= kCompute) asm volatile("setmaxnreg.dec.sync.aligned.u32 32;\n" ::: "memory");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
  }
#endif
  for (int seg = 0; seg < kSegments; ++seg) {
    __syncthreads();  // the previous segment is done with fac
    const bool early = mode == kMixedEarly || mode == kPipelineEarly;
    if (mode == kPipeline || mode == kPipelineEarly) {
      if (t < kCompute) {
        if (early) spin(1000 + 500 * (t / 32));  // Q's conversion, warps finishing at different times
        if (t % 4 == 0) fac[t / 4] = float(1000 * seg + t / 4);
#pragma unroll 1
        for (int it = 0; it < kSteps; ++it) {
          bar_sync<kThreads>(kFull + (it & 1));
          if (it == 0) {
            const int warp = t / 32, lane = t % 32, r0 = 16 * (warp % 4) + lane / 4;
            out[seg * kCompute + t] = fac[r0] + fac[r0 + 8];
          }
          spin(500);  // the step's work
          if (t < kCompute / 2 && it + 2 < kSteps) bar_arrive<kEmptyThreads>(kEmpty + (it & 1));
        }
      } else {
#pragma unroll 1
        for (int it = 0; it < kSteps; ++it) {
          spin(it == 0 ? (early ? 0 : 4000) : 1000);  // the step's rows
          bar_arrive<kThreads>(kFull + (it & 1));
          if (it + 1 < kSteps && it >= 1) bar_sync<kEmptyThreads>(kEmpty + ((it + 1) & 1));
        }
      }
    } else if (t < kCompute) {
      if (early) spin(1000 + 500 * (t / 32));  // Q's conversion, warps finishing at different times
      const int row = t / 4;
      if (t % 4 == 0) fac[row] = float(1000 * seg + row);
      if (mode == kComputeBarrier) bar_sync<kCompute>(3);
      else bar_sync<kThreads>(2);
      const int warp = t / 32, lane = t % 32, r0 = 16 * (warp % 4) + lane / 4;
      out[seg * kCompute + t] = fac[r0] + fac[r0 + 8];
    } else {
      if (!early) spin(4000);  // the producers' global round trip
      if (mode != kComputeBarrier) bar_arrive<kThreads>(2);
    }
    __syncthreads();
  }
}

class BarrierProbe : public ::testing::TestWithParam<int> {};

TEST_P(BarrierProbe, ReadsTheRowsWritten) {
  REQUIRE_GPU();
  if (!fvg::on_sm90()) GTEST_SKIP() << "built for sm_90a only";
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, sizeof(float) * kSegments * kCompute), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0xff, sizeof(float) * kSegments * kCompute), cudaSuccess);  // NaN poison
  probe_kernel<<<1, kThreads>>>(GetParam(), d);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> h(kSegments * kCompute);
  ASSERT_EQ(cudaMemcpy(h.data(), d, sizeof(float) * h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  int wrong = 0;
  for (int seg = 0; seg < kSegments; ++seg)
    for (int t = 0; t < kCompute; ++t) {
      const int r0 = 16 * ((t / 32) % 4) + (t % 32) / 4;
      const float want = float(2000 * seg + 2 * r0 + 8);
      wrong += !(h[seg * kCompute + t] == want);
    }
  EXPECT_EQ(wrong, 0) << "reads that missed the row written before the barrier";
}

std::string mode_name(const ::testing::TestParamInfo<int>& i) {
  static const char* const names[] = {"Mixed", "MixedMaxnreg", "ComputeBarrier", "Pipeline", "MixedEarly", "PipelineEarly"};
  return names[i.param];
}

INSTANTIATE_TEST_SUITE_P(Modes, BarrierProbe,
                         ::testing::Values(int(kMixed), int(kMixedMaxnreg), int(kComputeBarrier), int(kPipeline),
                                           int(kMixedEarly), int(kPipelineEarly)),
                         mode_name);

}  // namespace
