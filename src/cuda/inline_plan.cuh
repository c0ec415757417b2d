// The work plan of a small batch (at most kInlinePlanMaxBatch requests), computed by one warp inside the
// kernels that need it instead of by the prepare kernel (schedule.cuh): every verify CTA plans for itself
// (v6), and the combine kernel plans before it waits for the verify grid, so that after the wait it only
// loads partial states. The same partition.h functions as the prepare kernel, hence the same plan.
#pragma once

#include <cstdint>

#include "../partition.h"
#include "../plan.h"
#include "params.cuh"

namespace fv {

// The prepare kernel's plan, computed by warp 0 of the calling block for a batch of at most
// kInlinePlanMaxBatch requests into `sp` (SchedLayout order), with the same partition.h functions.
__device__ inline void plan_inline(const VerifyParams& p, int32_t* sp) {
  const int lane = threadIdx.x;  // warp 0
  const int B = p.batch;
  int cost = 0;
  if (lane < B) {
    const int64_t n = load_index(p.qo_indptr, lane + 1, p.qo_i64) - load_index(p.qo_indptr, lane, p.qo_i64);
    const int64_t plen =
        load_index(p.kv_indptr, lane + 1, p.kv_indptr_i64) - load_index(p.kv_indptr, lane, p.kv_indptr_i64);
    cost = request_cost(n, plen - int64_t(window_skip_steps(plen, p.window, p.block_n)) * p.block_n, p.block_n,
                        p.overhead);
  }
  int inc = cost;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int x = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += x;
  }
  const int total = __shfl_sync(0xffffffffu, inc, 31);
  const int parts = effective_parts(p.num_parts, total, p.min_part_cost);
  int32_t* cum = sp + SchedLayout::cum(B);
  if (lane == 0) {
    sp[0] = parts;
    sp[1] = total;
    cum[0] = 0;
  }
  if (lane < B) cum[lane + 1] = inc;
  __syncwarp();
  int fp = 0, ns = 0;
  if (lane < B) request_splits(cum[lane], cum[lane + 1], p.overhead, parts, total, &fp, &ns);
  const int slots = ns > 1 ? ns : 0;
  int sinc = slots;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int x = __shfl_up_sync(0xffffffffu, sinc, o);
    if (lane >= o) sinc += x;
  }
  if (lane < B) {
    sp[SchedLayout::first_part(B) + lane] = fp;
    sp[SchedLayout::num_splits(B) + lane] = ns;
    sp[SchedLayout::slot_offset(B) + lane] = sinc - slots;
  }
}

}  // namespace fv
