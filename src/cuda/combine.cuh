// Merges the partial (o, lse) states of split requests. One warp per (request, draft token, q head,
// 128-column slice): the merge is a weighted mean with weights 2^(lse_s - max lse), summed in split
// order, so the result does not depend on timing (deterministic). A request nobody split was written by
// the verify kernel directly and is skipped here.
#pragma once

#include <cstdint>

#include "../plan.h"
#include "mma.cuh"
#include "params.cuh"

namespace fv {

constexpr int kCombineThreads = 128;

template <class T, int DV>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const __grid_constant__ VerifyParams p) {
  constexpr int COLS = DV >= 128 ? 128 : DV;  // columns per warp
  constexpr int VEC = COLS / 32;              // floats per lane (2 or 4)
  constexpr int SLICES = DV / COLS;
  const int lane = threadIdx.x % 32;
  const int64_t gw = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t total = int64_t(p.batch) * p.max_draft * p.num_q_heads * SLICES;
  if (gw >= total) return;
  const int slice = static_cast<int>(gw % SLICES);
  int64_t rest = gw / SLICES;
  const int h = static_cast<int>(rest % p.num_q_heads);
  rest /= p.num_q_heads;
  const int i = static_cast<int>(rest % p.max_draft);
  const int b = static_cast<int>(rest / p.max_draft);

  const int32_t* sched = p.sched;
  const int ns = sched[SchedLayout::num_splits(p.batch) + b];
  if (ns <= 1) return;
  const int64_t qo0 = load_index(p.qo_indptr, b, p.qo_i64);
  const int n = static_cast<int>(load_index(p.qo_indptr, b + 1, p.qo_i64) - qo0);
  if (i >= n) return;
  const int slot0 = sched[SchedLayout::slot_offset(p.batch) + b];
  const int64_t split_stride = int64_t(p.max_draft) * p.num_q_heads;  // rows between consecutive slots
  const int64_t row0 = (int64_t(slot0) * p.max_draft + i) * p.num_q_heads + h;

  float m = -INFINITY;
  for (int s = lane; s < ns; s += 32) m = fmaxf(m, p.part_lse[row0 + s * split_stride]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));

  float acc[VEC];
#pragma unroll
  for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
  float wsum = 0.f;
  if (m != -INFINITY) {
    const float* src = p.part_o + row0 * DV + slice * COLS + lane * VEC;
#pragma unroll 8
    for (int s = 0; s < ns; ++s) {
      const float w = exp2f(p.part_lse[row0 + s * split_stride] - m);
      wsum += w;
      const float* x = src + s * split_stride * DV;
      if constexpr (VEC == 4) {
        const float4 f = *reinterpret_cast<const float4*>(x);
        acc[0] += w * f.x;
        acc[1] += w * f.y;
        acc[2] += w * f.z;
        acc[3] += w * f.w;
      } else {
        const float2 f = *reinterpret_cast<const float2*>(x);
        acc[0] += w * f.x;
        acc[1] += w * f.y;
      }
    }
  }
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  const int64_t tok = qo0 + i;
  const int64_t base = tok * p.out_stride_token + int64_t(h) * p.out_stride_head + slice * COLS + lane * VEC;
#pragma unroll
  for (int v = 0; v < VEC; v += 2) {
    if (p.out_fp32) {
      *reinterpret_cast<float2*>(static_cast<float*>(p.out) + base + v) = make_float2(acc[v] * inv, acc[v + 1] * inv);
    } else {
      *reinterpret_cast<uint32_t*>(static_cast<T*>(p.out) + base + v) = pack2<T>(acc[v] * inv, acc[v + 1] * inv);
    }
  }
  if (p.lse != nullptr && slice == 0 && lane == 0)
    p.lse[tok * p.lse_stride_token + h] = wsum > 0.f ? (m + log2f(wsum)) * 0.69314718055994531f : -INFINITY;
}

}  // namespace fv
