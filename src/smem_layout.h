// Where rows and chunks sit in the kernels' shared memory: the swizzles, and the placements chosen against bank
// conflicts (v56): the fp8 producers' raw chunks (raw_slot), the 8-byte fp8 copies (fp8_half) and the Q chunks' visit
// order (q_cc). Header-only and host-callable, so that the CPU tests (tests/cpu/test_layout.cpp, a model of the 32
// banks) check the very functions the kernels (verify.cuh, verify_wg.cuh, wgmma.cuh) use.
//
// The bank model: shared memory has 32 banks of 4 bytes; a warp's access of W bytes a lane is served in phases of
// 128 / W lanes (8 lanes for 16-byte accesses, 16 for 8-byte ones), and a phase takes one wavefront per distinct
// 4-byte word on its busiest bank. A layout is conflict-free when every phase takes one.
#pragma once

#include <cstdint>

#ifndef FV_HD
#if defined(__CUDACC__)
#define FV_HD __host__ __device__ __forceinline__
#else
#define FV_HD inline
#endif
#endif

namespace fv {

// SW128 (the wgmma tiles): byte offset of 16-byte chunk c (0..7) of row r of a 64-column, 128-byte-row tile
FV_HD constexpr uint32_t sw128_offset(uint32_t r, uint32_t c) { return r * 128u + ((c ^ (r & 7u)) << 4); }

// The mma.sync tiles: byte offset of 16-byte chunk `chunk` of row `row` in a tile whose rows hold CHUNKS chunks. The
// chunk index is XOR-ed with bits of the row so that the 8 rows one ldmatrix phase reads fall in 8 different bank
// groups (rows of 576 bf16 are 1152 bytes: without it every row starts in bank 0).
template <int CHUNKS>
FV_HD constexpr uint32_t swizzle(int row, int chunk) {
  int phys = chunk;
  if constexpr (CHUNKS >= 8) phys = chunk ^ (row & 7);
  else if constexpr (CHUNKS == 4) phys = chunk ^ ((row >> 1) & 3);
  else if constexpr (CHUNKS == 2) phys = chunk ^ ((row >> 2) & 1);
  return static_cast<uint32_t>((row * CHUNKS + phys) * 16);
}

// KV8's 8-byte copies: the half of its 16-byte slot that a chunk (8 fp8 bytes) of a prefix row lands in, to be
// widened in place by the thread that copied it. `lane`: the thread's place among its row's threads (TPR of them,
// which copy chunks lane + TPR c). The kernels' default (alternate = false) is the upper half (bytes 8-15) for every
// chunk, where 16 lanes of a 64-bit access meet 16 banks twice: in the tiles of 8 threads a row, two rows whose 8
// chunks each cover the 8 bank groups of a 128-byte line; with 16 threads a row, one row's lanes l and l + 8. That is
// a two-way conflict on every copy and every widening read. alternate (-DFV_FP8_HALF_ALT, v56): the upper half where
// row + lane / 8 is even, else the lower one, which removes it (a thread's half is the same for all its chunks of a
// row; the kFrag8 tiles' non-compact steps, 4 threads a row, keep a two-way conflict: four rows on four slots). Not
// the default: its one measured row, GQA 8/1 d128 fp8 b1 on an H200 (v56, with the Q order below, 2 reps), came out
// 21.5-21.7 against 20.8-21.2 us; on the mma.sync tiles alone (FLASHVERIFY_WGMMA=0, an H100, v62, 2 reps) it is even
// within run-to-run spread on GQA 8/1 b1 / B=16, 32/8 B=16 and MLA N=8 B=16 (mean graph us -0.7% to +0.7%).
#if defined(FV_FP8_HALF_ALT)
constexpr bool kFp8HalfAlternate = true;
#else
constexpr bool kFp8HalfAlternate = false;
#endif
FV_HD constexpr uint32_t fp8_half(int row, int lane, bool alternate = kFp8HalfAlternate) {
  if (!alternate) return 8u;
  return ((row ^ (lane >> 3)) & 1) ? 0u : 8u;
}

// The fp8 MLA producers (verify_wg.cuh, PROD): the SW128 slot that holds raw chunk c0 (0..3: 16 fp8 bytes) of a
// prefix row's tile, before the row's four threads widen it into slots 2 c0 and 2 c0 + 1. half (RAWH, v55): within
// the row's aligned half row, so that a row's four cp.async fill one contiguous 64-byte span (one slot in two cost an
// L2 request and a 32-byte sector each 16-byte copy); else slot 2 c0 + 1. alternate (RAW_ALT, v56): the upper half
// for even rows, the lower one for odd rows: a 16-byte access's 8-lane phase holds rows r and r + 1, whose upper
// halves are one set of bank groups under SW128's XOR (a two-way conflict on each raw read and cp.async write).
FV_HD constexpr uint32_t raw_slot(uint32_t row, uint32_t c0, bool half, bool alternate) {
  return !half ? 2 * c0 + 1 : (alternate && (row & 1)) ? c0 : 4 + c0;
}

// The Hopper kernels' Q rows (verify_wg.cuh load_q, q_to_f16, q_to_e4m3): thread (row, c0 = 0..3) visits chunks
// c0 + 4 c of its row, its c-th access chunk q_cc(row, c0, c, odd): odd rows take c ^ odd, so that rows r and r + 1
// (one 8-lane phase) touch opposite halves of a tile row; with odd = 0 (the order until v55) both rows' chunks fall
// in one half under SW128's XOR, a two-way conflict on every Q copy, read and store. odd = 3 where a thread's chunk
// count is a multiple of 4 (GQA: q_to_e4m3's 8-byte stores then land on four distinct slot pairs), else 1.
FV_HD constexpr uint32_t q_cc(uint32_t row, uint32_t c0, uint32_t c, uint32_t odd) {
  return c0 + 4 * (c ^ ((row & 1) ? odd : 0u));
}
FV_HD constexpr uint32_t q_odd(int chunks_a_thread) { return chunks_a_thread % 4 == 0 ? 3u : 1u; }

}  // namespace fv
