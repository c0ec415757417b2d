// The prepare kernel: the device-side work planner, plus the tree-mask conversion. It reads the lengths
// from device memory, so fv_run never reads device data on the host and can be captured in a CUDA graph
// and replayed after SGLang rewrote qo_indptr / kv_indptr / kv_indices / the mask in place.
//
// Block 0 plans. Request b costs ceil((P_b + N_b) / bn) key steps plus a fixed overhead (its Q tile,
// partial-state writes); the steps of all requests are laid end to end (cum = prefix sums of the
// costs) and cut into `parts` partitions of equal cost: step k of request b sits at position
// cum[b] + overhead + k and belongs to partition floor(pos * parts / total). The plan records, per
// request, its first partition, its number of splits and where its partial states start.
// Blocks 1..B convert request b's byte mask (only its draft columns are read) or parent array into
// packed ancestor bits, [B * max_draft, words] in the workspace.
#pragma once

#include <cstdint>

#include "flashverify/flashverify.h"
#include "../partition.h"
#include "../plan.h"
#include "params.cuh"

namespace fv {

constexpr int kPrepareThreads = 256;

// Inclusive prefix sum over the block; `total` receives the block-wide sum. All threads must call it.
__device__ __forceinline__ int block_inclusive_scan(int v, int* warp_sums, int* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int w = lane < nwarps ? warp_sums[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    if (lane < nwarps) warp_sums[lane] = w;
  }
  __syncthreads();
  if (warp > 0) v += warp_sums[warp - 1];
  *total = warp_sums[nwarps - 1];
  __syncthreads();  // warp_sums may be reused by the next call
  return v;
}

__device__ void plan_partitions(const VerifyParams& p) {
  __shared__ int warp_sums[32];
  int32_t* sched = p.sched;
  int32_t* cum = sched + SchedLayout::cum(p.batch);
  int32_t* first_part = sched + SchedLayout::first_part(p.batch);
  int32_t* num_splits = sched + SchedLayout::num_splits(p.batch);
  int32_t* slot_off = sched + SchedLayout::slot_offset(p.batch);
  const int B = p.batch;

  int carry = 0;
  if (threadIdx.x == 0) cum[0] = 0;
  for (int base = 0; base < B; base += blockDim.x) {
    const int b = base + threadIdx.x;
    int cost = 0;
    if (b < B) {
      const int64_t n = load_index(p.qo_indptr, b + 1, p.qo_i64) - load_index(p.qo_indptr, b, p.qo_i64);
      const int64_t plen = load_index(p.kv_indptr, b + 1, p.kv_indptr_i64) - load_index(p.kv_indptr, b, p.kv_indptr_i64);
      cost = request_cost(n, plen - int64_t(window_skip_steps(plen, p.window, p.block_n)) * p.block_n, p.block_n,
                          p.overhead);
    }
    int chunk_total;
    const int inc = block_inclusive_scan(cost, warp_sums, &chunk_total);
    if (b < B) cum[b + 1] = carry + inc;
    carry += chunk_total;
  }
  const int total = carry;
  const int parts = effective_parts(p.num_parts, total, p.min_part_cost);
  if (threadIdx.x == 0) {
    sched[0] = parts;
    sched[1] = total;
  }
  __syncthreads();  // cum[] written by other threads is read below

  carry = 0;
  for (int base = 0; base < B; base += blockDim.x) {
    const int b = base + threadIdx.x;
    int slots = 0;
    if (b < B) {
      int fp, ns;
      request_splits(cum[b], cum[b + 1], p.overhead, parts, total, &fp, &ns);
      first_part[b] = fp;
      num_splits[b] = ns;
      slots = ns > 1 ? ns : 0;
    }
    int chunk_total;
    const int inc = block_inclusive_scan(slots, warp_sums, &chunk_total);
    if (b < B) slot_off[b] = carry + inc - slots;
    carry += chunk_total;
  }
}

__device__ void convert_mask(const VerifyParams& p, uint32_t* bits, int words, int b) {
  const int64_t qo0 = load_index(p.qo_indptr, b, p.qo_i64);
  const int n = static_cast<int>(load_index(p.qo_indptr, b + 1, p.qo_i64) - qo0);
  if (n <= 0) return;
  uint32_t* rows = bits + int64_t(b) * p.max_draft * words;
  if (p.mask_kind == FV_MASK_BYTES) {
    // a warp reads 32 consecutive draft columns of one row and ballots them into one word
    const int64_t plen = load_index(p.kv_indptr, b + 1, p.kv_indptr_i64) - load_index(p.kv_indptr, b, p.kv_indptr_i64);
    const int64_t m0 = load_index(p.mask_indptr, b, p.mask_indptr_i64);
    const int64_t off = p.window_kv_offsets != nullptr ? p.window_kv_offsets[b] : 0;  // SGLang's SWA layout
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    const int row_words = (n + 31) / 32;
    for (int w = warp; w < n * row_words; w += nwarps) {
      const int i = w / row_words, word = w - i * row_words;
      const int j = word * 32 + lane;
      bool visible = false;
      if (j < n) visible = p.custom_mask[m0 + int64_t(i) * (off + plen + n) + off + plen + j] != 0;
      const uint32_t ballot = __ballot_sync(0xffffffffu, visible);
      if (lane == 0) rows[int64_t(i) * words + word] = ballot;
    }
  } else {  // FV_MASK_PARENTS: each thread owns one row and walks to the root
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      uint32_t* row = rows + int64_t(i) * words;
      for (int w = 0; w < words; ++w) row[w] = 0u;
      int x = i;
      for (int steps = 0; x >= 0 && x < n && steps <= n; ++steps) {
        row[x >> 5] |= 1u << (x & 31);
        x = p.parents[qo0 + x];
      }
    }
  }
}

__global__ void __launch_bounds__(kPrepareThreads) prepare_kernel(const __grid_constant__ VerifyParams p,
                                                                   uint32_t* bits, int words) {
  if (blockIdx.x == 0) plan_partitions(p);
  else convert_mask(p, bits, words, blockIdx.x - 1);
}

}  // namespace fv
