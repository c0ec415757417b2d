// Why does the fp8 MLA producer kernel move as many L2 sectors as the bf16 kernel, for half the bytes? (ncu, H100,
// v55, "mla h16 n64 p32k b16": fp8 9.51 M LDGSTS instructions, 305 M L1 sectors, 302 M L2 read requests for 304 M
// sectors, L2 throughput 76%; bf16 18.9 M instructions, 305 M sectors in 66 M requests, 48%: one sector per 16-byte
// copy in the fp8 kernel, two copies a sector in the bf16 one.) This probe times cp.async (LDGSTS) copy patterns of
// the same useful bytes from an L2-resident pool into shared memory, 36 KB a step (64 fp8 rows of 576 bytes or 32
// bf16 rows of 1152), 256 threads a CTA, 9 copies of 16 bytes a thread a step, two stages in flight:
//   b16        the 16-bit kernel's copy: 8 threads a 1152-byte row, chunk c0 + 8 i of tile i, SW128 slot c0
//   fp8-odd    the fp8 producer's copy until v54: 4 threads a 576-byte row, bytes 16 c0 + 64 i into SW128 slot 2 c0 + 1
//              of tile i (the second of the two slots a chunk widens to)
//   fp8-half   the same global bytes into SW128 slots 4 + c0 of tile i (a contiguous, aligned half row: the producer's
//              copy since v55, RAWH in src/cuda/verify_wg.cuh)
//   fp8-odd-ca fp8-odd through L1 (cp.async.ca)
//   fp8-lin    the same global bytes into a linear staging copy of the rows (576 bytes a row)
//   fp8-8b-ca  the mma.sync tiles' and the Hopper GQA kernels' fp8 copy (verify.cuh issue_rows, verify_wg.cuh
//              issue_rows_of): 8 threads a row, 8 bytes of chunk c0 + 8 c (cp.async.ca) into the upper half of SW128
//              slot c0 of tile c, two passes of 32 rows (18 copies a thread)
//   fp8-8b-lin the same 8-byte copies into a linear staging row
//   fp8-8b-alt fp8-8b-ca with odd rows' bytes in the lower half of the slot (fp8_half in src/cuda/verify.cuh, v56)
//   fp8-alt    fp8-half with odd rows in the lower half row (slots c0: RAW_ALT, v56)
//   fp8-half+w, fp8-alt+w  each with the producer's widening round trip after a step lands (every thread reads its
//              raw chunk of each tile, the quad syncs, two 16-byte stores to slots 2 c0 and 2 c0 + 1): v56's question
//              is the raw reads' bank conflicts, two-way in fp8-half (rows r and r + 1 share a phase and a half row)
// H100 80GB HBM3 (v55, bench/results/h100-v55.txt call 6), GB/s of pool bytes: b16 8082, fp8-odd 2141, fp8-half 7600,
// fp8-odd-ca 7706, fp8-lin 7603; ncu: fp8-odd one 32-byte sector an L2 request and a 16-byte copy (1214 M for 38 M
// instructions), fp8-half and fp8-lin two sectors a request, b16 four.
// Standalone: nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/ldgsts bench/probes/ldgsts_pattern_probe.cu && /tmp/ldgsts
// (/tmp/ldgsts 1: one launch a pattern, for ncu)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.h"

constexpr int kThreads = 256, kStageBytes = 9 * 64 * 128, kStages = 2, kStepBytes = 36864;

__device__ __forceinline__ uint32_t sw128(uint32_t r, uint32_t c) { return r * 128u + ((c ^ (r & 7u)) << 4); }
__device__ __forceinline__ void cg16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void ca8(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, 8;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void ca16(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, 16;\n" ::"r"(dst), "l"(src));
}

// RAW_ALT (v56): odd rows' raw chunks in the lower half row, so that rows r and r + 1 (one 8-lane phase of a 16-byte
// shared access) use disjoint bank groups
__device__ __forceinline__ uint32_t alt_slot(uint32_t r, uint32_t c0) { return (r & 1) ? c0 : 4 + c0; }
__device__ __forceinline__ uint4 lds128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ void sts128(uint32_t a, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

template <int MODE>
__global__ void __launch_bounds__(kThreads) copy_kernel(const uint8_t* pool, int64_t rows, int steps, uint32_t* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t t = threadIdx.x;
  const int64_t row_bytes = MODE == 0 ? 1152 : 576, step_rows = MODE == 0 ? 32 : 64;
  int64_t r0 = (int64_t(blockIdx.x) * 7919 * step_rows) % rows;
  auto issue = [&](int s, uint32_t stage) {
    const int64_t first = (r0 + int64_t(s) * step_rows) % (rows - step_rows);
    if constexpr (MODE == 5 || MODE == 6 || MODE == 10) {
      // 8 threads a row, 8 bytes of chunk c0 + 8 c of the row a copy, two passes of 32 rows
#pragma unroll
      for (int pass = 0; pass < 2; ++pass) {
        const uint32_t row = t / 8 + 32 * pass, c0 = t % 8;
        const uint8_t* src = pool + (first + row) * row_bytes;
#pragma unroll
        for (int c = 0; c < 9; ++c) {
          if constexpr (MODE == 5) ca8(stage + c * 8192 + sw128(row, c0) + 8, src + (8 * c + c0) * 8);
          if constexpr (MODE == 6) ca8(stage + row * 576 + (8 * c + c0) * 8, src + (8 * c + c0) * 8);
          if constexpr (MODE == 10) ca8(stage + c * 8192 + sw128(row, c0) + ((row & 1) ? 0 : 8), src + (8 * c + c0) * 8);
        }
      }
    } else if constexpr (MODE == 0) {
      const uint32_t row = t / 8, c0 = t % 8;
      const uint8_t* src = pool + (first + row) * row_bytes + 16 * c0;
#pragma unroll
      for (int i = 0; i < 9; ++i) cg16(stage + i * 8192 + sw128(row, c0), src + 128 * i);
    } else {
      const uint32_t row = t / 4, c0 = t % 4;
      const uint8_t* src = pool + (first + row) * row_bytes + 16 * c0;
#pragma unroll
      for (int i = 0; i < 9; ++i) {
        if constexpr (MODE == 1) cg16(stage + i * 8192 + sw128(row, 2 * c0 + 1), src + 64 * i);
        if constexpr (MODE == 2 || MODE == 8) cg16(stage + i * 8192 + sw128(row, 4 + c0), src + 64 * i);
        if constexpr (MODE == 3) ca16(stage + i * 8192 + sw128(row, 2 * c0 + 1), src + 64 * i);
        if constexpr (MODE == 4) cg16(stage + row * 576 + 16 * c0 + 64 * i, src + 64 * i);
        if constexpr (MODE == 7 || MODE == 9) cg16(stage + i * 8192 + sw128(row, alt_slot(row, c0)), src + 64 * i);
      }
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  issue(0, base);
  uint32_t acc = 0;
  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps) {
      issue(s + 1, base + ((s + 1) % kStages) * kStageBytes);
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();
    if constexpr (MODE == 8 || MODE == 9) {
      // the producer's widening round trip (widen8): each thread reads its raw chunk of a tile, the row's quad syncs,
      // and two 16-byte stores go to slots 2 c0 and 2 c0 + 1 (a stand-in for the widened values)
      const uint32_t row = t / 4, c0 = t % 4, quad = 0xfu << ((t % 32) & ~3u);
      const uint32_t stage = base + (s % kStages) * kStageBytes;
      const uint32_t raw = sw128(row, MODE == 8 ? 4 + c0 : alt_slot(row, c0));
#pragma unroll
      for (int i = 0; i < 9; ++i) {
        const uint4 v = lds128(stage + i * 8192 + raw);
        __syncwarp(quad);
        sts128(stage + i * 8192 + sw128(row, 2 * c0), v);
        sts128(stage + i * 8192 + sw128(row, 2 * c0 + 1), make_uint4(v.y, v.x, v.w, v.z));
      }
      __syncthreads();
    }
    acc ^= reinterpret_cast<const uint32_t*>(smem + (s % kStages) * kStageBytes)[t * 4];
    __syncthreads();  // the stage is refilled next step
  }
  if (acc == 0x12345678u) sink[blockIdx.x] = acc;
}

template <int MODE>
float time_mode(const uint8_t* pool, int64_t rows, int ctas, int steps, uint32_t* sink, int reps) {
  CK(cudaFuncSetAttribute(copy_kernel<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, kStages * kStageBytes));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int rep = 0; rep < reps; ++rep) {
    CK(cudaEventRecord(a));
    copy_kernel<MODE><<<ctas, kThreads, kStages * kStageBytes>>>(pool, rows, steps, sink);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float m = 0.f;
    CK(cudaEventElapsedTime(&m, a, b));
    ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int main(int argc, char**) {
  const int reps = argc > 1 ? 1 : 7;  // (any argument: one launch each, for ncu)
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int64_t pool_bytes = int64_t(16) << 20;  // L2-resident (the kernel reads each key from L2 16 times)
  uint8_t* pool = nullptr;
  uint32_t* sink = nullptr;
  CK(cudaMalloc(&pool, pool_bytes));
  CK(cudaMalloc(&sink, 4096 * sizeof(uint32_t)));
  CK(cudaMemset(pool, 0x5a, pool_bytes));
  const int ctas = prop.multiProcessorCount, steps = 4000;
  const double bytes = double(ctas) * steps * kStepBytes;
  std::printf("%s, %d SMs: %d CTAs x %d steps x 36 KB, median of %d\n", prop.name, ctas, ctas, steps, reps);
  auto report = [&](const char* name, float ms) {
    std::printf("  %-11s %8.3f ms  %7.1f GB/s of pool bytes\n", name, ms, bytes / (ms * 1e6));
  };
  report("b16", time_mode<0>(pool, pool_bytes / 1152, ctas, steps, sink, reps));
  report("fp8-odd", time_mode<1>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  report("fp8-half", time_mode<2>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  report("fp8-odd-ca", time_mode<3>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  report("fp8-lin", time_mode<4>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  report("fp8-8b-ca", time_mode<5>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  report("fp8-8b-lin", time_mode<6>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  report("fp8-alt", time_mode<7>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  report("fp8-half+w", time_mode<8>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  report("fp8-alt+w", time_mode<9>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  report("fp8-8b-alt", time_mode<10>(pool, pool_bytes / 576, ctas, steps, sink, reps));
  return 0;
}
