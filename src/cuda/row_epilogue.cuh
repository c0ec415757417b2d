// The last arithmetic of a softmax row, shared by the verify tiles (verify.cuh, verify_wg.cuh) and the combine
// (combine.cuh): the sink joining the denominator, the LSE, the partial-state row index and the output stores.
// m is the row's maximum in log2 units (scores pre-multiplied by log2(e)), l its sum of 2^(s - m).
#pragma once

#include <cmath>
#include <cstdint>

#include "mma.cuh"
#include "params.cuh"

namespace fv {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.69314718055994531f;

// A sink adds exp(sink) to the denominator of q head h (p.sinks set), once: where the row's final state is formed
// (the verify kernel when the request is not split, else the combine), and only to a row that saw a key (l > 0).
// It joins the row's maximum as the oracle does, so that a sink far above every score (by more than fp32 exp's
// range, ~88) gives out ~0 and lse = the sink instead of an infinite denominator:
//   float inv = l > 0.f ? 1.f / l : 0.f;
//   if (final && p.sinks != nullptr && l > 0.f) join_sink(p.sinks[h] * kLog2e, m, l, inv);
// (the test written out at each call: the compiler scheduled the verify kernels' epilogues differently with it
// inside a helper, and GQA 8/1 b1 measured 1% slower; bench/NOTES.md v14)
// With M = max(m, s): l' = l 2^(m - M) + 2^(s - M), the output scale 2^(m - M) / l' and the LSE M + log2 l'.
__device__ __forceinline__ void join_sink(float sink_log2, float& m, float& l, float& inv) {
  const float mm = fmaxf(m, sink_log2);
  const float f = exp2f(m - mm);
  l = fmaf(l, f, exp2f(sink_log2 - mm));
  inv = __fdividef(f, l);  // l >= 1: the fast division is exact to 2 ulp, and has no slow path
  m = mm;
}

// The row's LSE in log2 units, the partial states' form (-inf for a row that saw no key); times kLn2 it is the
// natural-log LSE that p.lse takes. (The verify kernels' p.lse stores keep their own `l > 0.f ? lse2 * kLn2 :
// -INFINITY` select, the same value: without it ptxas rescheduled their epilogues, bench/NOTES.md v14.)
__device__ __forceinline__ float lse_log2(float m, float l) { return l > 0.f ? m + log2f(l) : -INFINITY; }

// The partial-state row (part_lse index; part_o row of Dv floats) of split slot `slot`, draft token i, q head h
__device__ __forceinline__ int64_t part_row(const VerifyParams& p, int slot, int i, int h) {
  return (int64_t(slot) * p.max_draft + i) * p.num_q_heads + h;
}

// Two adjacent output columns at element offset base + col of p.out (fp32 outputs, or T). The two offsets stay
// apart: callers pass a compile-time col, which then becomes the store's immediate offset.
template <class T>
__device__ __forceinline__ void store_out2(const VerifyParams& p, int64_t base, int col, float x, float y) {
  if (p.out_fp32) *reinterpret_cast<float2*>(static_cast<float*>(p.out) + base + col) = make_float2(x, y);
  else *reinterpret_cast<uint32_t*>(static_cast<T*>(p.out) + base + col) = pack2<T>(x, y);
}

}  // namespace fv
