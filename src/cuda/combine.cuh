// Merges the partial (o, lse) states of split requests. Work unit: (request, draft token, q head, COLS-column
// slice: min(Dv, 128), 32 when the batch has too few rows to fill the GPU, or 256 (combine_kernel only) where
// 128-column units a warp each would need a second wave of blocks: Plan::combine_cols). A unit gets wpr warps
// (VerifyParams::combine_wpr: about one per 8 splits its request is expected to have, from 1 for batches
// whose requests are split a few ways up to 16 beyond 64, or 8 where a block a unit would need two waves of
// blocks) and a block 16 / wpr units. The merge is a weighted mean with
// weights 2^(lse_s - max lse), summed in split order and then in warp order, so the result does not depend
// on timing (deterministic). A request nobody split was written by the verify kernel directly and is skipped
// here. Three kernels: combine_block_kernel for wpr 16 (one unit a block), combine_block8_kernel for wpr 8 in
// blocks of 8 warps (Plan::combine_block8) and combine_kernel for any wpr.
#pragma once

#include <cstdint>

#include "../plan.h"
#include "mma.cuh"
#include "params.cuh"
#include "row_epilogue.cuh"
#include "trace.cuh"

namespace fv {

constexpr int kCombineWarps = kCombineBlockWarps;  // (plan.h)
constexpr int kCombineThreads = 32 * kCombineWarps;
constexpr int kCombineBlock8Threads = 256;  // combine_block8_kernel: 8 warps, one unit a block

// A unit index (request, draft token, q head, column slice), slice fastest, split into its parts.
struct CombineUnit {
  int slice, h, i, b;
};
template <int SLICES>
__device__ __forceinline__ CombineUnit combine_unit(const VerifyParams& p, int64_t unit) {
  CombineUnit u;
  u.slice = static_cast<int>(unit % SLICES);
  unit /= SLICES;
  u.h = static_cast<int>(unit % p.num_q_heads);
  unit /= p.num_q_heads;
  u.i = static_cast<int>(unit % p.max_draft);
  u.b = static_cast<int>(unit / p.max_draft);
  return u;
}

// Streams one unit's splits first, first + step, ... < ns (none unless go) in batches of kCombineBatch: all
// loads of a batch are issued before any is used (one memory round trip a batch), and a running maximum
// rescales what was summed before, so no separate pass over the lse values is needed. src: the unit's
// columns of split 0's partial output; row0: its partial-lse row.
// With 256-column units (VEC 8) a batch holds half as many splits, so that its loads fit the combine kernel's
// 64 registers (5 spill 68 bytes and measured no faster, 8 spill 372: bench/NOTES.md v26).
template <int DV, int VEC>
__device__ __forceinline__ void stream_splits(const VerifyParams& p, const float* src, int64_t row0,
                                              int64_t split_stride, int first, int step, int ns, bool go, float& m,
                                              float& wsum, float (&acc)[VEC]) {
  constexpr int kBatch = VEC == 8 ? kCombineBatch / 2 : kCombineBatch;
  m = -INFINITY;
  wsum = 0.f;
#pragma unroll
  for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
  for (int s0 = first; go && s0 < ns; s0 += step * kBatch) {
    float lse[kBatch], x[kBatch][VEC];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int s = s0 + u * step;
      lse[u] = -INFINITY;
      if (s < ns) {
        lse[u] = p.part_lse[row0 + s * split_stride];
        const float* px = src + s * split_stride * DV;
        if constexpr (VEC == 4 || VEC == 8) {
#pragma unroll
          for (int v = 0; v < VEC; v += 4) {
            const float4 f = *reinterpret_cast<const float4*>(px + v);
            x[u][v] = f.x; x[u][v + 1] = f.y; x[u][v + 2] = f.z; x[u][v + 3] = f.w;
          }
        } else if constexpr (VEC == 1) {
          x[u][0] = *px;
        } else {
          const float2 f = *reinterpret_cast<const float2*>(px);
          x[u][0] = f.x; x[u][1] = f.y;
        }
      } else {
#pragma unroll
        for (int v = 0; v < VEC; ++v) x[u][v] = 0.f;
      }
    }
    float mb = m;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) mb = fmaxf(mb, lse[u]);
    if (mb == -INFINITY) continue;  // nothing visible yet
    const float scale = exp2f(m - mb);  // 0 when m was -inf
    wsum *= scale;
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] *= scale;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const float w = exp2f(lse[u] - mb);  // 0 for splits that saw nothing and for padding
      wsum += w;
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] += w * x[u][v];
    }
    m = mb;
  }
}

// Normalises a merged unit (a sink, when present, joins the denominator here) and writes its output columns
// and, from its first slice, its LSE.
template <class T, int VEC, int COLS>
__device__ __forceinline__ void write_unit(const VerifyParams& p, float m, float wsum, const float (&acc)[VEC], int h,
                                           int64_t qo0, int i, int slice, int lane) {
  float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  if (p.sinks != nullptr && wsum > 0.f) join_sink(p.sinks[h] * kLog2e, m, wsum, inv);  // once, after the merge
  const int64_t tok = qo0 + i;
  const int64_t base = tok * p.out_stride_token + int64_t(h) * p.out_stride_head + slice * COLS + lane * VEC;
  if constexpr (VEC == 1) {
    if (p.out_fp32) static_cast<float*>(p.out)[base] = acc[0] * inv;
    else static_cast<T*>(p.out)[base] = from_float<T>(acc[0] * inv);
  }
#pragma unroll
  for (int v = 0; v + 1 < VEC; v += 2) {
    store_out2<T>(p, base, v, acc[v] * inv, acc[v + 1] * inv);
  }
  if (p.lse != nullptr && slice == 0 && lane == 0)
    p.lse[tok * p.lse_stride_token + h] = lse_log2(m, wsum) * kLn2;
}

// One block per unit (wpr 16: NW = 16; and NW = 8 with wpr 8 where a unit a block of 16 warps would need two
// waves of blocks: smaller blocks, more of them resident), its NW warps take every NW-th split, so a request
// split 100 ways has all its loads in flight at once. The warps' partial sums are added in warp order. This is the v9 kernel as it was
// measured: combine_kernel below with wpr 16 computes the same (same loads, same order) but was measured
// ~2 us slower at batch 1 (its block-wide merge loop has a run-time trip count, and blocks with nothing to
// merge still pass the barrier and the loop), so the launcher takes this one for wpr 16 until a single
// kernel is measured as fast (bench/NOTES.md, v10).
template <class T, int DV, int COLS, int NW>
__device__ __forceinline__ void combine_block_body(const VerifyParams& p) {
  static_assert(COLS % 32 == 0 && DV % COLS == 0, "column slices");
  constexpr int VEC = COLS / 32;  // floats per lane (1, 2 or 4)
  constexpr int SLICES = DV / COLS;
  __shared__ float part[NW][COLS];
  __shared__ float part_w[NW];
  __shared__ float red[NW];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const CombineUnit u = combine_unit<SLICES>(p, blockIdx.x);
  const int slice = u.slice, h = u.h, i = u.i, b = u.b;
  // qo_indptr is an input the verify kernel does not write: read before the wait, so that after it one round
  // trip (the plan's two words) stands between the release and the partial rows
  const int64_t qo0 = load_index(p.qo_indptr, b, p.qo_i64);
  const int n = static_cast<int>(load_index(p.qo_indptr, b + 1, p.qo_i64) - qo0);

  FV_TRACE_COMBINE(0);
  // launched as a programmatic dependent of the verify kernel (sm_90+): everything below reads its output
  pdl_wait_primary();
  FV_TRACE_COMBINE(1);
  const int32_t* sched = p.sched;
  const int ns = sched[SchedLayout::num_splits(p.batch) + b];
  const int slot0 = sched[SchedLayout::slot_offset(p.batch) + b];
  // (slot0 < 0 never holds: testing it keeps slot0's load beside ns's, in one round trip, instead of after the exit)
  if (ns <= 1 || i >= n || slot0 < 0) return;
  const int64_t split_stride = int64_t(p.max_draft) * p.num_q_heads;  // rows between consecutive slots
  const int64_t row0 = part_row(p, slot0, i, h);

  float m, wsum, acc[VEC];
  stream_splits<DV, VEC>(p, p.part_o + row0 * DV + slice * COLS + lane * VEC, row0, split_stride, warp,
                         NW, ns, true, m, wsum, acc);
#pragma unroll
  for (int v = 0; v < VEC; ++v) part[warp][lane * VEC + v] = acc[v];
  if (lane == 0) {
    part_w[warp] = wsum;
    red[warp] = m;
  }
  __syncthreads();
  if (warp != 0) return;
  // merge the warps' states, in warp order
  m = -INFINITY;
#pragma unroll
  for (int w = 0; w < NW; ++w) m = fmaxf(m, red[w]);
  wsum = 0.f;
#pragma unroll
  for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
  if (m != -INFINITY) {
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const float scale = exp2f(red[w] - m);
      wsum += scale * part_w[w];
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] += scale * part[w][lane * VEC + v];
    }
  }
  write_unit<T, VEC, COLS>(p, m, wsum, acc, h, qo0, i, slice, lane);
  FV_TRACE_COMBINE(2);
}
template <class T, int DV, int COLS>
__global__ void __launch_bounds__(kCombineThreads)
    combine_block_kernel(const __grid_constant__ VerifyParams p) {
  combine_block_body<T, DV, COLS, kCombineWarps>(p);
}
// 8 warps (Plan::combine_block8), at most 64 registers: four blocks a multiprocessor
template <class T, int DV, int COLS>
__global__ void __launch_bounds__(kCombineBlock8Threads, 4) combine_block8_kernel(const __grid_constant__ VerifyParams p) {
  combine_block_body<T, DV, COLS, kCombineBlock8Threads / 32>(p);
}

// A block holds 16 / wpr units, wpr consecutive warps a unit; a unit's warps take every wpr-th split, so a
// request split 100 ways (wpr 16) has all its loads in flight at once, and a request split 3 ways (wpr 1)
// costs one warp a row instead of a block. At most 64 registers (two blocks a multiprocessor): the sink's join
// of the row maximum took sm_90's 128-column instantiations to 80 without the cap. sm_120 keeps its uncapped
// build (74-89 registers before the sink change, one block a multiprocessor) until a cap is measured there
// (bench/NOTES.md plan 5).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define FV_COMBINE_MIN_BLOCKS 1
#else
#define FV_COMBINE_MIN_BLOCKS 2
#endif
template <class T, int DV, int COLS>
__global__ void __launch_bounds__(kCombineThreads, FV_COMBINE_MIN_BLOCKS)
    combine_kernel(const __grid_constant__ VerifyParams p) {
  static_assert(COLS % 32 == 0 && DV % COLS == 0, "column slices");
  constexpr int VEC = COLS / 32;  // floats per lane (1, 2 or 4)
  constexpr int SLICES = DV / COLS;
  __shared__ float part[kCombineWarps][COLS];
  __shared__ float part_w[kCombineWarps];
  __shared__ float red[kCombineWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wpr = p.combine_wpr;  // 1, 2, 4, 8 or 16
  const int sub = warp & (wpr - 1);
  const int64_t unit = int64_t(blockIdx.x) * (kCombineWarps / wpr) + warp / wpr;
  bool active = unit < int64_t(p.batch) * p.max_draft * p.num_q_heads * SLICES;
  const CombineUnit u = combine_unit<SLICES>(p, active ? unit : 0);
  const int slice = u.slice, h = u.h, i = u.i, b = u.b;
  // qo_indptr before the wait (an input the verify kernel does not write), the plan's two words together after it
  const int64_t qo0 = active ? load_index(p.qo_indptr, b, p.qo_i64) : 0;
  const int n = active ? static_cast<int>(load_index(p.qo_indptr, b + 1, p.qo_i64) - qo0) : 0;

  FV_TRACE_COMBINE(0);
  // launched as a programmatic dependent of the verify kernel (sm_90+): everything below reads its output
  pdl_wait_primary();
  FV_TRACE_COMBINE(1);
  const int32_t* sched = p.sched;
  const int ns = active ? sched[SchedLayout::num_splits(p.batch) + b] : 0;
  const int slot0 = active ? sched[SchedLayout::slot_offset(p.batch) + b] : 0;
  active = active && ns > 1 && i < n;
  // (no return before the barrier below: the block's other units may need it)
  const int64_t split_stride = int64_t(p.max_draft) * p.num_q_heads;  // rows between consecutive slots
  const int64_t row0 = part_row(p, slot0, i, h);

  float m, wsum, acc[VEC];
  stream_splits<DV, VEC>(p, p.part_o + row0 * DV + slice * COLS + lane * VEC, row0, split_stride, sub, wpr, ns,
                         active, m, wsum, acc);
  if (wpr > 1) {
    // merge the unit's warps' states, in warp order
#pragma unroll
    for (int v = 0; v < VEC; ++v) part[warp][lane * VEC + v] = acc[v];
    if (lane == 0) {
      part_w[warp] = wsum;
      red[warp] = m;
    }
    __syncthreads();
    if (sub != 0) return;
    m = -INFINITY;
    for (int w = warp; w < warp + wpr; ++w) m = fmaxf(m, red[w]);
    wsum = 0.f;
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
    if (m != -INFINITY) {
      for (int w = warp; w < warp + wpr; ++w) {
        const float scale = exp2f(red[w] - m);
        wsum += scale * part_w[w];
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[v] += scale * part[w][lane * VEC + v];
      }
    }
  }
  if (!active) return;
  write_unit<T, VEC, COLS>(p, m, wsum, acc, h, qo0, i, slice, lane);
  FV_TRACE_COMBINE(2);
}

}  // namespace fv
