// The Hopper verify kernels (sm_90a, wgmma): the planner's MLA tile on sm_90 devices when the library was
// built for sm_90 (FLASHVERIFY_WGMMA=0 keeps the mma.sync tile), for one KV head and either 16-bit KV pools
// without SGLang's score modifiers or fp8 pools without a logit cap, window or xai temperature (anything else
// takes the mma.sync tile: dispatch.cu). Measured on the
// H200 against the mma.sync tile (bench/NOTES.md v12): MLA Hq16 N8 b1 40.4 vs 52.9 us, N64 B16 ~470 vs 275
// TFLOP/s. The same kernel with HD 128 (verify_wg_gqa_kernel) is the GQA d128 64-row tile there (16-bit pools
// without modifiers, fp8 pools with their scales only; the planner keeps the two 32-row tiles for one request on one
// KV head with 16-bit pools and the 32-row tiles for groups x drafts <= 32): bench/NOTES.md v28, GQA 8/1 N=8 B=16 95
// vs 105 us, N=32 B=16 273 vs 349; fp8 pools (v30) 99.8 vs 141.0. With HD 256 it is the GQA d256 tile there (the same
// pools, every batch; one ~170 KB CTA a multiprocessor): bench/NOTES.md v29, GQA 8/1 N=8 B=16 156.5 vs 251.8 us (the
// 32-key mma.sync tile), b1 27.8 vs 40.2; fp8 pools (v30) 171 vs 283 (the 64-key mma.sync tile), b1 27.0 vs 34.2.
//
// Same work split, plan, segments, tree mask and partial-state layout as the mma.sync MLA tile (verify.cuh,
// configuration kMlaLarge: 64 rows x 64 keys a step, 2 stages, 256 threads), different inner products:
//  - Q (64 x 576) and each stage's K rows (64 x 576; V is their first 512 columns) live in SW128 tiles
//    (wgmma.cuh), 9 column tiles each: 72 KB apiece, 216 KB with both stages; P (64 x 64) one more tile.
//  - Warpgroup 0 computes S = Q K^T with 36 wgmma m64n64k16 (operands straight from shared memory, no
//    ldmatrix), so each of its threads holds whole rows across its quad: the row maximum needs two shuffles
//    and no shared-memory exchange. It turns S into P in registers (its own A operand for P V), stores P into
//    the P tile and the rescale factors for warpgroup 1, and signals it with a named barrier.
//  - O (64 x 512 fp32) is split by columns: warpgroup 0 holds columns 0..255 (P from registers), warpgroup 1
//    columns 256..511 (P from the P tile), 128 accumulators a thread each.
//  - GQA d128 (HD 128): the plan of the 64-row mma.sync tile (kGqa128) and one KV head a CTA; Q, and a stage's K
//    and V rows, 2 SW128 tiles each (16 KB; a stage 32 KB, ~90 KB in all: two CTAs a multiprocessor); S in 8
//    wgmmas; O (64 x 128) 64 columns a warpgroup, 32 accumulators a thread. GQA d256 (HD 256): the plan of the
//    64-key d256 mma.sync tile (kGqa256Bn64); 4 SW128 tiles each (a stage 64 KB, ~170 KB: one CTA a
//    multiprocessor); S in 16 wgmmas; O 128 columns a warpgroup, 64 accumulators a thread.
// Step order: wait for the step's copies, barrier W (every warp is done with the previous step's P and
// stage), refill the other stage (16-bit MLA and GQA d128: WG 1 alone, WG1_COPIES; d256: WG 1 half, WG 0 half once its
// S wgmmas are issued; fp8 2-stage kernels: both halves right after W), S and softmax (WG 0) /
// wait for P (WG 1), P V (both). Epilogue: each thread's two rows, normalised, into the output, or (a split
// request) into its partial rows; with 16-bit pools those go through shared memory and one bulk copy a row
// (EPI_BULK below).
#pragma once

#include <utility>

#include <cstdint>

#include "verify.cuh"
#include "wgmma.cuh"

namespace fv {

// KV8: the pool holds fp8 e4m3 bytes (SGLang's uint8 pools): a prefix row's 8 bytes a chunk are copied into one half
// of the chunk's 16-byte slot (fp8_half, smem_layout.h) and widened to T in place by the thread that copied them,
// before the step's first barrier (as the mma.sync tile does; MLA: during the previous step's P V, kWidenEarly);
// k_scale scales the prefix scores and v_scale the prefix values (folded into P; the row sums stay unscaled). Draft
// rows are T as ever. GQA (HD 128 / 256, 2 stages): K and V rows alike; the MLA kernel's producer warpgroups are MLA
// only.
//
// PROD (KV8: verify_wg_kernel_prod, for rows that are 16-byte aligned; the dispatcher checks VerifyParams::kv8_a16,
// other rows take the kernel above): two producer warpgroups (512 threads) copy every row and widen the fp8 ones, so
// that the compute warpgroups do no copy or widening work. Each producer thread copies one row's 16-byte chunks c0 + 4
// i of fp8 bytes (16 values each) into slot 4 + c0 (odd rows: c0) of SW128 tile i (the four threads of a row: an
// aligned half row, RAWH and RAW_ALT below), and widens them into slots 2 c0 and 2 c0 + 1 once they land. Registers:
// setmaxnreg gives each producer thread 32 and each compute thread 224 (the launch gives each 128: 2 x 128 x (224 -
// 128) = 2 x 128 x (128 - 32); one producer warpgroup instead: see THREADS below). The stages change hands through
// named barriers instead of the 16-bit kernel's one CTA barrier a step: FULL[stage] (the producers arrive when a step's
// rows are in place), EMPTY[stage] and EMPTY_B[stage] (a stage is released in two parts: warpgroup 0 arrives at EMPTY
// when its S and P V no longer read the stage, and the producers refill tiles 0-3 and 8; warpgroup 1 at EMPTY_B after
// its P V, and they refill tiles 4-7), PFREE (warpgroup 1 is done with the P tile and the rescale factors of the
// previous step). Every compute thread takes part in FULL, and warpgroup 1 reaches it only once its P V is done, so the
// next S never overlaps warpgroup 1's P V and PFREE never waits (a FULL of warpgroup 0 and the producers alone, which
// would let it, measured even: bench/NOTES.md v25); what the two parts gain is that tiles 0-3 and 8 are refilled during
// warpgroup 1's P V. The two-part release against one EMPTY a stage (bench/NOTES.md v24, graph us): N=64 B=16 2888 vs
// 3108, N=8 B=16 395 vs 416, N=8 B=2 71-72 vs 75, N=64 b1 203 vs 213, N=8 b1 44.7 vs 45.0. The producer kernel itself
// (H200, MLA Hq=16 P=32K, graph us) against v20's fp8 kernels (the kernel above up to 8 request row tiles, else a
// kernel in which warpgroup 1 copied and widened; bench/NOTES.md v21): N=8 b1 46.0-46.4 vs 48.8-48.9, B=4 126.5-127.3
// vs 140.2-140.5, B=16 422-425 vs 457-458; N=64 b1 214-217 vs 240, B=16 3172-3205 vs 3443-3461. One producer warpgroup
// (40 / 232 registers) gained only at many row tiles (N=64 B=16 3345-3350) and lost at B=2 (84.0 vs 81.6); with 16-bit
// pools, which need no widening, one producer warpgroup measured even and two 13-15% slower.
//
// F16 (PROD with a bf16 model): the products run in fp16, whose e4m3 widening is one instruction a pair (bf16's is four:
// F2FP unpack to f16, two HADD2.F32, F2FP pack). At a segment's start the compute warps turn each Q row into fp16
// with a power-of-two factor 2^e that puts its largest magnitude in [2^14, 2^15) (exact: bf16's 8 significant bits fit
// fp16's 11) while the producers wait for the first rows, and take 2^-e into the row's score scale. Draft rows become fp16 times kd (a power of
// two near 1 / k_scale, VerifyParams::f16_draft_row), their scores and P take 1 / kd back; P's factors (v_scale for the
// prefix keys, 1 / kd for the draft keys) are divided by a power of two 2^sigma that makes the larger one at most 1,
// and the output takes 2^sigma back. fp16 holds draft values up to 65504 / kd, over 100x the pool's e4m3 range (448
// |k_scale|; kd is within 2^0.5 of 1 / |k_scale|); beyond, they overflow to Inf (NaN outputs). The dispatcher takes this
// kernel only with |k_scale| and |v_scale| in [2^-12, 2^12] and within 2^6 of each other (P's factors in [2^-7, 1]);
// FLASHVERIFY_FP8_MLA_F16=0 turns it off. P in fp16 is more precise than in bf16 where P times its factor stays normal
// (>= 2^-14); below, fp16 subnormals keep an absolute precision of 2^-25. ptxas: the producer kernels spill 80 / 112
// bytes (stores / loads), mostly outside the step loop (this one spilled 184 / 228 before the two-part release).
// HD: the head dim, 576 (MLA: V is the first 512 columns of the K rows, one KV head) or 128 / 256 (GQA: separate V rows,
// one KV head a CTA: blockIdx.z; 16-bit pools without modifiers, fp8 pools with their scales only: verify_wg_gqa_kernel
// below).
// ST: the stages (2; GQA d128 also 5: one CTA a multiprocessor with four steps of K / V in flight, so that a batch-1
// partition of ~4 steps is issued by the prologue; even at batch 1 with 16-bit pools (forced only), the planner's
// choice for fp8 pools at batch 1 of one KV head: tile_config.h). Stage it % ST holds step k_begin + it; the prologue
// issues ST - 1 steps (one cp.async group each, Q in the first), every step the next one into the stage the previous
// step held and waits for its own group with ST - 2 younger ones in flight.
// RG: RING below (the 2-stage fp8 GQA kernels; the planner's Plan::fp8_ring)
#ifdef FV_GQA8_RING
#error "FV_GQA8_RING (v32's compile-time switch) is gone: the RING kernels are always built; FLASHVERIFY_GQA8_RING=1 takes them"
#endif
#ifdef FV_S8_INTERLEAVED
#error "FV_S8_INTERLEAVED (v57's A/B switch) is gone: the S8 steps always sum Q's lo term first (S8_LO_FIRST)"
#endif
#if defined(FV_MLA_PROD384) || defined(FV_MLA_PROD384_COMPUTE_REGS)
#error "FV_MLA_PROD384 (v54's experiment build) is gone: 9-11% slower on the fp8 MLA rows (bench/results/h100-v58.txt)"
#endif
#if defined(FV_MLA_RAW_INTERLEAVED) || defined(FV_MLA_RAW_UPPER)
#error "FV_MLA_RAW_INTERLEAVED / FV_MLA_RAW_UPPER (v55 / v56's A/B switches) are gone: the producers' layout is RAWH with RAW_ALT"
#endif
template <class T, bool KV8, bool PROD = false, bool F16 = false, int HD = 576, int ST = 2, bool RG = false,
          bool S8E = true>
struct VerifyWg {
  static constexpr bool MLA = HD == 576;
  static_assert(MLA || HD == 128 || HD == 256, "MLA 576 / 512 or GQA d128 / d256");
  static_assert(MLA || !PROD, "GQA: fp8 pools widened by the compute warps (no producer warpgroups)");
  static_assert(ST == 2 || HD == 128, "more than 2 stages: the GQA d128 kernel only");
  static_assert(KV8 || !PROD, "PROD is an fp8 kernel");
  using M = std::conditional_t<F16, __half, T>;  // the products' operand type
  // H16: fp8 pools with an fp16 model: P is fp16, and v_scale reaches it split (VerifyParams::f16_p_prefix / f16_p_draft
  // / f16_out, dispatch.cu) so that it stays within fp16's range
  static constexpr bool H16 = KV8 && std::is_same_v<T, __half>;
  // its segment type, row-index fetch, Q rows and tree test (the mma.sync tile of the same geometry)
  using V = Verify<MLA ? kMlaLarge : HD == 128 ? kGqa128 : kGqa256Bn64, T, false, false>;
  using Seg = typename V::Seg;
  using RowIdx = typename V::RowIdx;
  // RAWH (v55): the producers copy a prefix row's fp8 chunk c0 + 4 i (bytes 16 c0 + 64 i) into SW128 slot 4 + c0 of
  // tile i, so that a row's four threads fill an aligned, contiguous half row, and each reads its raw chunk of a tile
  // before any of the four overwrites it with the widened values (slots 2 c0 and 2 c0 + 1; __syncwarp on the quad).
  // Until v54 the chunk went into slot 2 c0 + 1, the second of the two slots it widens to: cp.async then cost one L2
  // request and one 32-byte sector per 16-byte copy, twice the data's sectors (ncu, H100, N=64 B=16: 304 M sectors in
  // 302 M requests, L2 throughput 76%; the bf16 kernel moves 4 sectors a request). bench/probes/ldgsts_pattern_probe.cu
  // times the two patterns alone on an H100: 2141 vs 7600 GB/s of pool bytes. The kernel, H100, graph us (bench/NOTES.md
  // v55, ab-build x2): N=64 B=16 2403-2406 vs 2958, N=8 B=16 326.6-328.9 vs 393.1-394.2, N=8 b1 42.9-43.2 vs 46.2-46.4.
  // RAW_ALT (v56): the half row alternates, the upper one for even rows and the lower one for odd rows (raw_slot,
  // smem_layout.h: rows r and r + 1 share a 16-byte access's 8-lane phase, and their upper halves share bank groups
  // under SW128's XOR; with v56's Q chunk order, -2.2% at N=64 B=16 on the H200). The A/B switches for the layouts they
  // replaced (FV_MLA_RAW_INTERLEAVED, FV_MLA_RAW_UPPER) are gone since v58; smem_layout.h keeps every policy for the
  // bank model's test (tests/cpu/test_layout.cpp).
  static constexpr bool RAWH = true, RAW_ALT = true;
  // the SW128 slot that holds a prefix row's raw chunk c0 of a tile (smem_layout.h)
  __device__ static constexpr uint32_t raw_slot(uint32_t row, uint32_t c0) {
    return fv::raw_slot(row, c0, RAWH, RAW_ALT);
  }
  // PROD: two producer warpgroups, each thread one row of a step (four threads a row). One producer warpgroup of 384
  // threads, each two rows, so that the launch could give 168 registers and the compute warpgroups PV256 (v54-v58's
  // FV_MLA_PROD384, 40 / 232 registers), measured 9-11% slower on the fp8 MLA rows with RAWH and RAW_ALT (H100, graph
  // us: N=64 B=16 2584-2598 vs 2347-2385, N=8 B=16 353-357 vs 321-323, N=8 b1 44.4-45.6 vs 42.7-42.8;
  // bench/results/h100-v58.txt) and even or slower before them (v55), and is gone.
  static constexpr int BM = 64, BN = 64, DQK = HD, DV = MLA ? 512 : HD, COMPUTE = 256, THREADS = PROD ? 512 : COMPUTE;
  static_assert(!PROD || THREADS - COMPUTE == 4 * BN, "the producers cover a step's rows, 4 threads a row");
  // named barriers (0 is __syncthreads): P handoff (both kernels), PROD's stage handoff
  static constexpr int BAR_P = 1, BAR_FULL = 2, BAR_EMPTY = 4, BAR_PFREE = 6, BAR_EMPTY_B = 7, BAR_S = 10;
  static constexpr int BAR_QFAC = 11;  // PROD with F16: the compute warps' Q factors
  // 16-bit pools: the partial rows leave through shared memory, one bulk copy (cp.async.bulk) a row, instead of 64
  // 8-byte stores a thread (each a 32-byte sector of 8 rows). H200, graph µs, against the stores (bench/NOTES.md v27):
  // N=64 B=16 -2.5%, N=8 B=16 P=256K -1.4%, P=32K -0.6%, b1 even. Not in the fp8 kernels: the producer kernel's compute
  // warps spilled 184 / 216 bytes instead of 80 / 112 and fp8 b1 took 1 µs more. BAR_EPI: the compute warps' barrier
  // before the copies (EMPTY_B takes 7 and 8); EPI_ROW: staged rows 2 KB + 32 bytes apart, so that a warp's 8-byte
  // stores of 8 rows x 32 bytes fill two wavefronts without conflicts.
  static constexpr bool EPI_BULK = !(KV8 && MLA);
  // WG1_COPIES (16-bit pools, 2 stages, MLA and GQA d128): warpgroup 1 issues every copy of a step's refill (its thread t
  // also copies the rows of thread t - 128) and warpgroup 0 none, so none sits on warpgroup 0's chain between its S and
  // its softmax (ncu, v42: those 18 copies a thread took ~18% of the MLA step at N=64 B=16, while warpgroup 1 spent ~37%
  // of it waiting for P). H200, graph µs, against the even split (bench/NOTES.md v42): MLA Hq=16 N=64 B=16 2258-2264 vs
  // 2339-2364, Hq=128 18255 vs 19167-19170, N=8 B=16 287.1 vs 305.2, N=8 B=16 P=16K 160.7-161.1 vs 169.4-169.5, N=64 b1
  // 156.7-156.8 vs 164.8-165.2, N=8 b1 38.8-39.0 vs 39.9, GQA 8/1 d128 B=16 92.6-92.7 vs 93.7-94.7. Not at d256 (four
  // tiles of K and four of V a row, one CTA a multiprocessor): 157.7-158.8 vs 154.1 there.
  static constexpr bool WG1_COPIES = !KV8 && !PROD && !RG && ST == 2 && HD != 256;
  // PVW (16-bit MLA pools; -DFV_MLA_NO_PV256 at build time turns it off): each warpgroup's P V as one wide wgmma a k16 key
  // step over its NB 64-column O tiles (MLA: four m64n256k16; the V tiles LBO = TILE apart) instead of NB m64n64k16:
  // warpgroup 1 then reads its P tile once a key step instead of NB times (MLA: 32 -> 8 KB of shared memory a step).
  // Measured on an H100 (bench/NOTES.md v45, ab-build x2, direct / graph us, against m64n64k16): MLA Hq=16 N=64 B=16
  // 1885-1899 / 2078-2118 vs 1926-1933 / 2153-2169, Hq=128 16179-16305 / 17508-17676 vs 16680-16768 / 17812-17956, N=8
  // B=16 278.3-278.6 vs 280.1-280.7, N=8 b1 even (40.5-40.9). (Q's first tiles held in warpgroup 0's registers for S,
  // -DFV_MLA_QREG=1 on top, measured even or worse: N=8 B=16 284 vs 278, b1 41.2-41.4 vs 40.4-40.8.) GQA d256 with
  // m64n128k16 measured even (H100, v46: 8/1 B=16 205.3-205.7 vs 205.4-205.6 us, 16/2 B=16 382.2-382.4 vs 382.0-382.4,
  // 8/1 b1 31.6-31.8 vs 31.7: memory-bound rows) and is not taken; the fp8 MLA producer kernel cannot (ptxas C7602:
  // m64n256k16 at its 128-register launch; see PROD above for the 384-thread launch that would allow it)
#if defined(FV_MLA_NO_PV256)
  static constexpr bool PVW = false;
#else
  static constexpr bool PVW = MLA && !KV8;
#endif
  static constexpr int BAR_EPI = 9;
  static constexpr uint32_t EPI_ROW = DV * 4 + 32;
  // EMPTY and EMPTY_B (PROD): the producer warpgroups and the one compute warpgroup that releases that part
  static constexpr int EMPTY_THREADS = (THREADS - COMPUTE) + COMPUTE / 2;
  // PROD's registers a thread (setmaxnreg): the launch gives each 65536 / THREADS
  static constexpr int LAUNCH_REGS = 128, PROD_REGS = 32, COMPUTE_REGS = 224;
  static_assert(!PROD || (THREADS - COMPUTE) * (LAUNCH_REGS - PROD_REGS) >= COMPUTE * (COMPUTE_REGS - LAUNCH_REGS),
                "the CTA's register pool");
  static constexpr int KT = DQK / 64;                    // SW128 column tiles of a row
  static constexpr int VT = MLA ? 0 : DV / 64;           // GQA: a stage's V tiles, after its K tiles (MLA: V in K)
  static constexpr int NB = DV / 64 / 2;                 // O column tiles a warpgroup holds
  static constexpr int VT0 = MLA ? 0 : KT;               // a stage's first V tile (MLA: V is K's first columns)
  static constexpr uint32_t TILE = 64 * 128;             // one SW128 tile: 64 rows x 64 columns
  static constexpr uint32_t QOPER = KT * TILE;           // Q
  static constexpr uint32_t OPER = (KT + VT) * TILE;     // one stage: K rows (GQA: and V rows)
  // RING (fp8 GQA pools, the 2-stage kernels; Plan::fp8_ring: only with FLASHVERIFY_GQA8_RING=1): the prefix rows land
  // as fp8 bytes in RR raw stages, two steps ahead, and the next step is widened off this step's chain: K (one stage) by
  // warpgroup 1 while warpgroup 0 does the softmax (after S: barrier BAR_S), V (two stages: this step's P V reads one
  // while the next step's rows are widened into the other) by warpgroup 0 while its P V runs. Each thread copies and
  // widens the same raw chunks (16 bytes of a row), so no barrier guards the raw stages. Draft rows (model dtype) and
  // zeros are copied straight into the widened stages when their step is prepared (tail steps only). H200, GQA 8/1 N=8,
  // graph us against the 2-stage kernel (bench/NOTES.md v33): P=32K B=16 fp16 model 92.0 vs 98.0 (16-bit pools ~96),
  // d256 (bf16 model, fp16 products) 162.8 vs 170.1; but a bf16 model's d128 99.5 vs 99.2, and shorter partitions lose:
  // P=4K B=16 38.0 vs 29.9, d256 B=8 102.4 vs 94.7, b1 37.7 vs 27.1.
  static constexpr int RR = 2;
  static constexpr bool RING = RG;
  // the P V's first V tile, bytes from its descriptor's base (RING: a V stage of its own; else the stage's V tiles)
  static constexpr uint32_t V_OFF = RING ? 0u : VT0 * TILE;
  static_assert(!RG || (KV8 && !MLA && ST == 2), "RING: the 2-stage fp8 GQA kernels");
  static_assert(!F16 || ((PROD || RING) && std::is_same<T, __nv_bfloat16>::value),
                "F16: the bf16 models' producer kernel and RING kernels");
  // S8 (fp8 GQA pools, bf16 models, the 2-stage d128 and d256 kernels without RING; where p.fp8_s8: 16-byte aligned
  // rows, at d256 at least 4 (request, KV head) pairs, and FLASHVERIFY_GQA8_S8=0 turns it off): a step of prefix keys
  // only lands as e4m3 bytes, 16-byte copies that bypass L1,
  // K in the first KT8 tiles of the stage's K space and V in the others; S runs on e4m3 wgmma with K as it landed and Q
  // as two e4m3 terms, hi + lo, of the row times 2^e (q_to_e4m3: exact for bf16 values down to 2^-9 of the row's
  // largest; 2^-e in q_fac joins the score scale), and warpgroup 1 widens V into the stage's V tiles while warpgroup 0's
  // S and softmax run; BAR_P, which both warpgroups then sync on, orders that before either P V. So no widening is left
  // on warpgroup 0's chain. Steps holding draft or past-the-end keys (the tail) land and widen as without it (8-byte
  // copies into one half of each slot, fp8_half, widened at W) and run S in bf16; Q is split in the prologue, a cp.async group of
  // its own, while the first rows land. (An fp16 model's Q has 11 bits: two e4m3 terms would lose three.) H200, GQA 8/1
  // N=8, graph us against the kernel without it (bench/NOTES.md v38, x2 interleaved): P=32K B=16 93.0-93.2 vs 99.8-99.9
  // (16-bit pools 94.2-94.4), B=4 35.0-35.2 vs 37.1, P=4K B=16 27.4-27.8 vs 28.1-28.3. At d256 (v39-v40, its steps in
  // loops of their own, S8_LOOPS below) B=16 148.0-151.3 vs 165.8-169.6 (16-bit pools 156.2-157.0), B=4 54.4-55.8 vs
  // 55.0-56.7, but batch 1 of one KV head 32.8-33.2 vs 26.8-27.0, and the S8 kernel with S8 off ran 31.6 there (v39),
  // 32.0-32.6 launched without its 32 KB of Q tiles (v40): its code, not S8 or its shared memory, is slower there.
  // Hence S8E and the threshold in dispatch.cu. Its Q tiles add 16 KB at d128 (~108.5 KB a CTA, still two a
  // multiprocessor); with them the 8-byte copies that go through L1 ran 18-40% slower (v38 call 1: the smaller L1),
  // hence 16-byte rows only. Widening half of V in warpgroup 0 while its S runs measured slower (B=16 101.5).
  // S8_LO_FIRST (v57): S takes Q's lo term over all k32 steps first, then its hi term, into the one accumulator.
  // e4m3 wgmma keeps ~14 bits of its sum (the DeepSeek-V3 report, 3.3.2; v56's wgmma test: 7.15e-4 relative L2 for
  // hi and lo interleaved), and bench/probes/p3_error_sim.py, which aligns each k32 step's products and the
  // accumulator to their largest exponent, reproduces that; in it, the lo products (~2^-4 of the hi ones) lose
  // their low bits to an accumulator of S's size when interleaved, and keep them when summed first: GQA 8/1 d128
  // with scores spread ~6 (sharp softmax), 2.0-2.1e-3 relative L2 against 3.6-4.2e-3 interleaved (naive 1.6e-3: 2x
  // naive is the tests' bound), d256 2.4-2.5e-3 against 4.0-4.2e-3; the same wgmmas, no registers or FADDs (an fp32
  // promotion every 2 k32 steps: 2.0-2.6e-3, with a second set of accumulators and their FADDs).
  // The order until v56 (hi and lo a k32 step at a time) measured even in time (h100-v57.txt) and is gone; the wgmma
  // test (tests/gpu/test_wgmma_fp8.cu) still runs both orders on the same inputs.
  // S8E = false: the same kernel without S8 (launch_verify_wg_gqa takes it where p.fp8_s8 is off, so the S8 kernel's
  // code never tests p.fp8_s8). At d256 the S8 kernel runs its e4m3 steps as a phase of their own (S8_LOOPS,
  // run_segment): s8_step is then a compile-time constant in each phase and ptxas keeps the wgmmas pipelined. At d128 the
  // same split costs more than it saves (spills, see there).
  static constexpr bool S8 =
      S8E && KV8 && (HD == 128 || HD == 256) && !RG && ST == 2 && std::is_same<T, __nv_bfloat16>::value;
  static constexpr bool S8_LOOPS = S8 && HD == 256;
  static constexpr int KT8 = DQK / 128;  // e4m3 SW128 tiles of a row (128 values a 128-byte row)
  static constexpr uint32_t RAW_TILE = 64 * 64;             // a tile's fp8 bytes: 64 rows x 64 values, row-major
  static constexpr uint32_t RAW_STAGE = (KT + VT) * RAW_TILE;
  static constexpr uint32_t OFF_Q = 0, OFF_K = QOPER, OFF_V = OFF_K + KT * TILE,  // (OFF_V: RING only)
      OFF_RAW = OFF_K + (RING ? (KT + 2 * VT) * TILE : ST * OPER), OFF_P = OFF_RAW + (RING ? RR * RAW_STAGE : 0),
      OFF_STATS = OFF_P + TILE;
  // statistics: rescale factors, row sums, row maxima, (F16, S8) Q's row factors 2^-e; then (S8) Q's e4m3 tiles, KT8 hi
  // then KT8 lo
  static constexpr uint32_t STATS_END = OFF_STATS + 4 * BM * 4, OFF_Q8 = (STATS_END + 1023u) & ~1023u;
  static constexpr uint32_t RING_EXTRA = OFF_P - (OFF_K + ST * OPER);  // over the planner's figure (tile_config.h)
  static constexpr uint32_t S8_EXTRA = S8 ? OFF_Q8 + 2 * KT8 * TILE - STATS_END : 0;  // (likewise)
  static constexpr uint32_t SMEM = STATS_END + S8_EXTRA + 1024;  // + aligning the base to 1024 bytes
  static_assert(BM * EPI_ROW <= OFF_P, "the staged partial rows fit Q's and the stages' space");
  static_assert(V::BM == BM && V::BN == BN && V::DQK == DQK && V::DV == DV && V::THREADS == COMPUTE,
                "the mma.sync tile's geometry (its row fetch is reused)");
  static_assert(V::KCopy::TPR == 8 && V::KCopy::RP == 32 && V::KCopy::PASSES == 2, "row mapping of fetch_rows");
  static_assert(SMEM + 512 <= 232448, "sm_90's shared memory per block (with the static plan buffer)");
  static_assert(!(HD == 128 && ST == 2) || 2 * (SMEM + 1024 + 512) <= 233472, "two CTAs a multiprocessor");
  static constexpr int CFG = MLA ? kMlaWg : HD == 256 ? kGqaWg256 : ST == 2 ? kGqaWg128 : kGqaWg128S5;
  static_assert(kTileConfigs[CFG].stages == ST, "the planner's configuration has these stages");
  static_assert(SMEM - RING_EXTRA - S8_EXTRA <= kTileConfigs[CFG].smem_bytes() + 1024,
                "the planner's figure (tile_config.h) covers it");

  // Key rows of `step` into a stage: thread (r0 = tid / 8, c0 = tid % 8) copies chunks 8 c + c0 (c < KT) of
  // rows r0 and r0 + 32, i.e. chunk c0 of SW128 tile c (the rows fetch_rows loaded the slot indices of); GQA: the
  // same chunks of the V rows into the stage's V tiles, KV head hk
  __device__ static void issue_rows(const VerifyParams& p, const Seg& s, int step, const RowIdx& ri, uint32_t k_base,
                                    int hk = 0) {
    issue_rows_of(threadIdx.x, p, s, step, ri, k_base, hk);
  }
  // (the same for the rows of thread `tid`)
  __device__ static void issue_rows_of(unsigned tid, const VerifyParams& p, const Seg& s, int step, const RowIdx& ri,
                                       uint32_t k_base, int hk) {
    const int r0 = tid / 8, c0 = tid % 8;
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int row = r0 + pass * 32;
      const int pos = step * BN + row;
      const T* src = static_cast<const T*>(p.k_pool);  // any valid address when zero-filling
      [[maybe_unused]] const T* vsrc = static_cast<const T*>(MLA ? p.k_pool : p.v_pool);
      int bytes = 0;
      if (pos < s.plen) {
        const int64_t slot = p.paged ? ri.raw[pass] * p.page_size + pos % p.page_size : ri.raw[pass];
        if constexpr (KV8) {
          const uint8_t* k8 = static_cast<const uint8_t*>(p.k_pool) + slot * p.k_pool_stride_slot;
          if constexpr (!MLA) k8 += hk * p.k_pool_stride_head;
          // (run_segment's s8_step; S8_LOOPS: its S8 phase, steps below s8_end. The two must agree)
          if (S8 && (step + 1) * BN <= s.plen) {
            // S8, a prefix step: 16-byte chunk c0 of each e4m3 tile of the row, K's into the K space's tiles 0 .. KT8 - 1,
            // V's into tiles KT8 .. KT - 1
            const uint8_t* v8 =
                static_cast<const uint8_t*>(p.v_pool) + slot * p.v_pool_stride_slot + hk * p.v_pool_stride_head;
#pragma unroll
            for (int c = 0; c < KT8; ++c) {
              const uint32_t off = c * TILE + wg::sw128_offset(row, c0);
              cp_async_16(k_base + off, k8 + 128 * c + 16 * c0, 16);
              cp_async_16(k_base + KT8 * TILE + off, v8 + 128 * c + 16 * c0, 16);
            }
            continue;
          }
#pragma unroll
          for (int c = 0; c < KT; ++c)
            cp_async_8(k_base + c * TILE + wg::sw128_offset(row, c0) + fp8_half(row, c0), k8 + (8 * c + c0) * 8, 8);
          if constexpr (!MLA) {
            const uint8_t* v8 =
                static_cast<const uint8_t*>(p.v_pool) + slot * p.v_pool_stride_slot + hk * p.v_pool_stride_head;
#pragma unroll
            for (int c = 0; c < VT; ++c)
              cp_async_8(k_base + (KT + c) * TILE + wg::sw128_offset(row, c0) + fp8_half(row, c0), v8 + (8 * c + c0) * 8,
                         8);
          }
          continue;
        }
        src = static_cast<const T*>(p.k_pool) + slot * p.k_pool_stride_slot;  // MLA: one KV head
        if constexpr (!MLA) {
          src += hk * p.k_pool_stride_head;
          vsrc = static_cast<const T*>(p.v_pool) + slot * p.v_pool_stride_slot + hk * p.v_pool_stride_head;
        }
        bytes = 16;
      } else if (pos < s.len) {
        src = static_cast<const T*>(p.k_draft) + (s.qo0 + (pos - s.plen)) * p.k_draft_stride_token;
        if constexpr (!MLA) {
          src += hk * p.k_draft_stride_head;
          vsrc = static_cast<const T*>(p.v_draft) + (s.qo0 + (pos - s.plen)) * p.v_draft_stride_token +
                 hk * p.v_draft_stride_head;
        }
        bytes = 16;
      }
#pragma unroll
      for (int c = 0; c < KT; ++c) cp_async_16(k_base + c * TILE + wg::sw128_offset(row, c0), src + (8 * c + c0) * 8, bytes);
      if constexpr (!MLA)
#pragma unroll
        for (int c = 0; c < VT; ++c)
          cp_async_16(k_base + (KT + c) * TILE + wg::sw128_offset(row, c0), vsrc + (8 * c + c0) * 8, bytes);
    }
  }

  // WG1_COPIES, a step of prefix rows only: this thread's four rows without a branch a row, every
  // address before the first copy (the chunks issue_rows copies). Rows 0 and 3 are those of thread `tid_o` (slot
  // indices ri_o), passes 0 and 1; rows 1 and 2 are this thread's, passes 0 and 1 (ri). MLA only: in GQA d128's
  // two-CTA kernel (128 registers) it spilled 188 bytes instead of 124. H200, MLA, graph µs, against issue_rows for
  // each of the four (bench/NOTES.md v42): Hq=16 N=64 B=16 2174-2209 vs 2227-2260, Hq=128 17491-17675 vs 18030-18079,
  // N=8 B=16 278.4-278.8 vs 287.1-287.8, N=64 B=4 chain 527.5-527.8 vs 545.0-545.3, N=8 b1 38.2-38.5 vs 39.0-39.1.
  // (Warpgroup 0 copying one row of the four after its S, the others here, took every row back to the even split's
  // times.)
  __device__ static void issue_prefix_rows(const VerifyParams& p, int step, const RowIdx& ri, const RowIdx& ri_o,
                                           unsigned tid_o, uint32_t k_base) {
    static_assert(MLA, "K rows only, one KV head");
    const int c0 = threadIdx.x % 8;
    const T* src[4];
    uint32_t dst[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const bool own = q == 1 || q == 2;
      const int pass = q >= 2;
      const int row = (own ? threadIdx.x : tid_o) / 8 + pass * 32;
      const int64_t raw = own ? ri.raw[pass] : ri_o.raw[pass];
      const int pos = step * BN + row;
      const int64_t slot = p.paged ? raw * p.page_size + pos % p.page_size : raw;
      src[q] = static_cast<const T*>(p.k_pool) + slot * p.k_pool_stride_slot + 8 * c0;
      dst[q] = k_base + wg::sw128_offset(row, c0);
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
#pragma unroll
      for (int c = 0; c < KT; ++c) cp_async_16(dst[q] + c * TILE, src[q] + 64 * c, 16);
    }
  }

  // V::fetch_rows for the rows of thread `tid`
  __device__ static void fetch_rows_of(unsigned tid, const VerifyParams& p, const Seg& s, int step, RowIdx& ri) {
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) ri.raw[pass] = V::row_index(p, s, step * BN + tid / 8 + pass * 32);
  }

  // Q rows (the compute warps load them): thread (row = tid / 4, c0 = tid % 4) copies chunks c0, c0 + 4, ... (MLA: 18 of
  // the row's 72; GQA: 4 of 16) (F16: q_to_f16 converts the chunks its own thread copied, after its own wait), its
  // c-th access chunk q_cc(row, c0, c): odd rows in another order (smem_layout.h: against a two-way bank conflict on
  // every Q copy, read and store; -DFV_Q_ORDER_LINEAR builds the order until v55). MLA only by default: the GQA
  // kernels keep the linear order unless built with -DFV_GQA_Q_ORDER (v56: not yet measured apart from fp8_half's
  // placement, with which GQA 8/1 fp8 b1 came out 0.5 us slower on an H200).
  static_assert(DQK / 8 / 4 % 2 == 0, "q_cc pairs a thread's Q chunks");
#if defined(FV_Q_ORDER_LINEAR)
  static constexpr uint32_t Q_ODD = 0;
#elif defined(FV_GQA_Q_ORDER)
  static constexpr uint32_t Q_ODD = q_odd(DQK / 8 / 4);
#else
  static constexpr uint32_t Q_ODD = MLA ? q_odd(DQK / 8 / 4) : 0u;
#endif
  __device__ static constexpr uint32_t q_cc(uint32_t row, uint32_t c0, uint32_t c) {
    return fv::q_cc(row, c0, c, Q_ODD);
  }
  // 16-byte chunk cc (values 8 cc ..) of Q row `row` (the layout load_q writes and q_to_f16 / q_to_e4m3 read)
  __device__ static uint32_t q_chunk(uint32_t q_base, uint32_t row, uint32_t cc) {
    return q_base + (cc / 8) * TILE + wg::sw128_offset(row, cc % 8);
  }

  __device__ static void load_q(const VerifyParams& p, const Seg& s, int m_tile, uint32_t q_base, int hk = 0) {
    const int row = threadIdx.x / 4, c0 = threadIdx.x % 4;
    int bytes;
    const T* src = V::q_row_src(p, s, m_tile, hk, row, bytes);
#pragma unroll
    for (int c = 0; c < DQK / 8 / 4; ++c) {
      const int cc = q_cc(row, c0, c);
      cp_async_16(q_chunk(q_base, row, cc), src + cc * 8, bytes);
    }
  }

  // KV8: widen the fp8 prefix rows this thread copied for `step` into the stage at `k_stage` (its copies are
  // complete; no other thread touches these slots)
  __device__ static void widen_rows(const Seg& s, int step, uint8_t* k_stage) {
    const int r0 = threadIdx.x / 8, c0 = threadIdx.x % 8;
    // the two row passes rolled (456 fewer instructions in the bf16-model kernel: N64 B16 3745 vs 3792 us, b1
    // unchanged; bench/NOTES.md v14), each row's chunk loop unrolled: its 9 loads issue back to back (v13: fp8 MLA
    // b1 49.6 vs 51.7 us, N64 B16 3780 vs 4010 us against a rolled chunk loop, which also spilled 20 bytes)
#pragma unroll 1
    for (int pass = 0; pass < 2; ++pass) {
      const int row = r0 + pass * 32;
      if (step * BN + row >= s.plen) continue;
#pragma unroll
      for (int c = 0; c < KT + VT; ++c) {  // (GQA: the V tiles after the K tiles)
        uint8_t* slot = k_stage + c * TILE + wg::sw128_offset(row, c0);
        const uint2 w = *reinterpret_cast<const uint2*>(slot + fp8_half(row, c0));
        uint4 o;
        e4m3x4_to<T>(w.x, o.x, o.y);
        e4m3x4_to<T>(w.y, o.z, o.w);
        *reinterpret_cast<uint4*>(slot) = o;
      }
    }
  }

  // S8, warpgroup 1 (t = tid - 128), a prefix step of the stage at k_stage (every copy of it has landed: after W): the
  // e4m3 V rows (the K space's tiles KT8 on) into the stage's V tiles. Thread t widens 16-byte chunk c0 = t % 8 of each
  // e4m3 tile of rows t / 8 + 16 k: values 128 c + 16 c0 .., which are chunks 2 c0 and 2 c0 + 1 of V tile 2 c + c0 / 4;
  // the lanes with c0 >= 4 store their upper chunk first, so that the 8 lanes of a row store to 8 distinct bank groups
  __device__ static void widen_v8(uint32_t k_stage, uint32_t t) {
    static_assert(BM == 4 * (COMPUTE / 2 / 8), "a warpgroup's 16 row groups of 8 threads, 4 rows each");
    const uint32_t c0 = t % 8;
    const bool swap = c0 >= 4;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t row = t / 8 + 16 * k;
#pragma unroll
      for (int c = 0; c < KT8; ++c) {
        const uint4 w = lds_128(k_stage + (KT8 + c) * TILE + wg::sw128_offset(row, c0));
        uint4 lo, hi;
        e4m3x16_to<T>(w, lo, hi);
        const uint32_t v = k_stage + (KT + 2 * c + c0 / 4) * TILE;
        const uint32_t a0 = v + wg::sw128_offset(row, (2 * c0) % 8), a1 = v + wg::sw128_offset(row, (2 * c0 + 1) % 8);
        sts_128(swap ? a1 : a0, swap ? hi : lo);
        sts_128(swap ? a0 : a1, swap ? lo : hi);
      }
    }
  }

  // ---- RING. A thread (t = its index in its warpgroup) handles 16-byte raw chunk q = t % 4 of rows t / 4 and t / 4
  // + 32 of each of its warpgroup's tiles (ring_mine: warpgroup 0 V's, warpgroup 1 K's). Tile c of a row lies at c *
  // RAW_TILE + 64 row in a raw stage (8 threads: 128 contiguous bytes) and widens to chunks 2 q and 2 q + 1 of the row's
  // SW128 row (8 threads: 8 distinct bank groups). Tile offsets are immediates (static_for): computed a chunk, the
  // compiler kept them across the step loop and spilled.
  template <class F, int... I>
  __device__ __forceinline__ static void static_for_impl(F&& f, std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>{}), ...);
  }
  template <int N, class F>
  __device__ __forceinline__ static void static_for(F&& f) {
    static_for_impl(f, std::make_integer_sequence<int, N>{});
  }
  template <uint32_t DOFF, uint32_t SOFF>
  __device__ __forceinline__ static void copy_raw16(uint32_t dst, const uint8_t* src, bool a16) {
    if (a16) {
      asm volatile("cp.async.cg.shared.global [%0+%2], [%1+%3], 16;\n" ::"r"(dst), "l"(src), "n"(DOFF), "n"(SOFF));
    } else {  // 8-byte aligned rows (the fp8 kernels' requirement)
      asm volatile("cp.async.ca.shared.global [%0+%2], [%1+%3], 8;\n" ::"r"(dst), "l"(src), "n"(DOFF), "n"(SOFF));
      asm volatile("cp.async.ca.shared.global [%0+%2], [%1+%3], 8;\n" ::"r"(dst), "l"(src), "n"(DOFF + 8), "n"(SOFF + 8));
    }
  }
  __device__ static int ring_q() { return threadIdx.x % 4; }
  __device__ static int ring_row() { return (threadIdx.x % 128) / 4; }
  __device__ static void ring_fetch(const VerifyParams& p, const Seg& s, int step, int64_t (&ri)[2]) {
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) ri[pass] = V::row_index(p, s, step * BN + ring_row() + 32 * pass);
  }
  // warpgroup WG's tiles
  template <int WG>
  __device__ static constexpr bool ring_mine(int c) { return WG == 0 ? c >= KT : c < KT; }
  // tile c of a row (K's KT tiles, then V's) in the widened stages at k_w (K) and v_w (V)
  template <int C>
  __device__ __forceinline__ static uint32_t ring_tile(uint32_t k_w, uint32_t v_w) {
    return C < KT ? k_w + C * TILE : v_w + (C - KT) * TILE;
  }
  // the thread's tiles (warpgroup WG's) of its prefix rows of `step` into the raw stage at r_base
  template <int WG>
  __device__ static void ring_issue(const VerifyParams& p, const Seg& s, int step, const int64_t (&ri)[2],
                                    uint32_t r_base, int hk) {
    const int q = ring_q(), r = ring_row();
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int pos = step * BN + r + 32 * pass;
      if (pos >= s.plen) continue;
      const int64_t slot = p.paged ? ri[pass] * p.page_size + pos % p.page_size : ri[pass];
      const uint8_t* k8 =
          static_cast<const uint8_t*>(p.k_pool) + slot * p.k_pool_stride_slot + hk * p.k_pool_stride_head + 16 * q;
      const uint8_t* v8 =
          static_cast<const uint8_t*>(p.v_pool) + slot * p.v_pool_stride_slot + hk * p.v_pool_stride_head + 16 * q;
      const uint32_t dst = r_base + 64 * (r + 32 * pass) + 16 * q;
      static_for<KT + VT>([&](auto i) {
        constexpr int c = decltype(i)::value;
        if constexpr (ring_mine<WG>(c)) {
          if constexpr (c < KT) copy_raw16<c * RAW_TILE, 64 * c>(dst, k8, p.kv8_a16);
          else copy_raw16<c * RAW_TILE, 64 * (c - KT)>(dst, v8, p.kv8_a16);
        }
      });
    }
  }
  // ... widened from the raw stage at r_base into K at k_w and V at v_w (prefix rows; the others: ring_tail)
  template <int WG>
  __device__ static void ring_widen(const Seg& s, int step, uint32_t r_base, uint32_t k_w, uint32_t v_w) {
    const int q = ring_q(), r = ring_row();
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int row = r + 32 * pass;
      if (step * BN + row >= s.plen) continue;
      const uint32_t src = r_base + 64 * row + 16 * q;
      uint4 w[KT + VT];
      static_for<KT + VT>([&](auto i) {
        constexpr int c = decltype(i)::value;
        if constexpr (ring_mine<WG>(c)) {
          asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4+%5];\n"
                       : "=r"(w[i].x), "=r"(w[i].y), "=r"(w[i].z), "=r"(w[i].w)
                       : "r"(src), "n"(c * RAW_TILE));
        }
      });
      const uint32_t o0 = wg::sw128_offset(row, 2 * q), o1 = wg::sw128_offset(row, 2 * q + 1);
      static_for<KT + VT>([&](auto i) {
        constexpr int c = decltype(i)::value;
        if constexpr (ring_mine<WG>(c)) {
          const uint32_t t = c < KT ? k_w : v_w;
          constexpr uint32_t off = (c < KT ? c : c - KT) * TILE;
          uint4 lo, hi;
          e4m3x16_to<M>(w[i], lo, hi);
          asm volatile("st.shared.v4.b32 [%0+%1], {%2, %3, %4, %5};\n" ::"r"(t + o0), "n"(off), "r"(lo.x), "r"(lo.y),
                       "r"(lo.z), "r"(lo.w));
          asm volatile("st.shared.v4.b32 [%0+%1], {%2, %3, %4, %5};\n" ::"r"(t + o1), "n"(off), "r"(hi.x), "r"(hi.y),
                       "r"(hi.z), "r"(hi.w));
        }
      });
    }
  }
  // ... the thread's rows past the prefix (draft rows in the model dtype, zeros past the request) straight into K / V
  template <int WG>
  __device__ static void ring_tail(const VerifyParams& p, const Seg& s, int step, uint32_t k_w, uint32_t v_w, int hk) {
    const int q = ring_q(), r = ring_row();
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int row = r + 32 * pass;
      const int pos = step * BN + row;
      if (pos < s.plen) continue;
      const T* ksrc = static_cast<const T*>(p.k_pool);  // any valid address when zero-filling
      const T* vsrc = static_cast<const T*>(p.v_pool);
      int bytes = 0;
      if (pos < s.len) {
        ksrc = static_cast<const T*>(p.k_draft) + (s.qo0 + (pos - s.plen)) * p.k_draft_stride_token +
               hk * p.k_draft_stride_head;
        vsrc = static_cast<const T*>(p.v_draft) + (s.qo0 + (pos - s.plen)) * p.v_draft_stride_token +
               hk * p.v_draft_stride_head;
        bytes = 16;
      }
      const uint32_t o0 = wg::sw128_offset(row, 2 * q), o1 = wg::sw128_offset(row, 2 * q + 1);
      static_for<KT + VT>([&](auto i) {
        constexpr int c = decltype(i)::value;
        if constexpr (ring_mine<WG>(c)) {
          const uint32_t t = ring_tile<c>(k_w, v_w);
          const T* src = (c < KT ? ksrc + 64 * c : vsrc + 64 * (c - KT)) + 16 * q;
          cp_async_16(t + o0, src, bytes);
          cp_async_16(t + o1, src + 8, bytes);
        }
      });
    }
  }
  // F16: the thread's draft-row chunks (ring_tail's, landed) into fp16 times kd, in place
  template <int WG>
  __device__ static void ring_tail_f16(const VerifyParams& p, const Seg& s, int step, uint32_t k_w, uint32_t v_w) {
    const int q = ring_q(), r = ring_row();
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int row = r + 32 * pass;
      const int pos = step * BN + row;
      if (pos < s.plen || pos >= s.len) continue;
      const uint32_t o0 = wg::sw128_offset(row, 2 * q), o1 = wg::sw128_offset(row, 2 * q + 1);
      static_for<KT + VT>([&](auto i) {
        constexpr int c = decltype(i)::value;
        if constexpr (ring_mine<WG>(c)) {
          const uint32_t t = ring_tile<c>(k_w, v_w);
          chunk_bf16_to_f16(t + o0, p.f16_draft_row);
          chunk_bf16_to_f16(t + o1, p.f16_draft_row);
        }
      });
    }
  }
  // step k_begin + it of the segment, the thread's tiles: wait for its raw rows, widen them into K and V stage it & 1,
  // copy the tail rows (and wait for them), then refill the raw stage with step + RR's rows (ri, then the next indices)
  template <int WG>
  __device__ static void ring_prepare(const VerifyParams& p, const Seg& s, int it, int64_t (&ri)[2], uint32_t base,
                                      int hk) {
    const int step = s.k_begin + it;
    const uint32_t r_base = base + OFF_RAW + (unsigned(it) % RR) * RAW_STAGE;
    const uint32_t k_w = base + OFF_K, v_w = base + OFF_V + (unsigned(it) & 1) * (VT * TILE);
    cp_async_wait<RR - 1>();  // step's raw rows (the next step's group may be in flight)
    ring_widen<WG>(s, step, r_base, k_w, v_w);
    if ((step + 1) * BN > s.plen) {
      // a tail step: the later steps have no prefix rows (their groups are empty), so waiting for every group waits
      // for these copies
      ring_tail<WG>(p, s, step, k_w, v_w, hk);
      cp_async_commit();
      cp_async_wait<0>();
      if constexpr (F16) ring_tail_f16<WG>(p, s, step, k_w, v_w);
    }
    const int next = step + RR;
    if (next < s.k_end) ring_issue<WG>(p, s, next, ri, r_base, hk);
    cp_async_commit();
    if (next + 1 < s.k_end) ring_fetch(p, s, next + 1, ri);
  }
  __device__ static void ring_prepare_wg(const VerifyParams& p, const Seg& s, int it, int64_t (&ri)[2], uint32_t base,
                                         int hk, int wgi) {
    if (wgi == 0) ring_prepare<0>(p, s, it, ri, base, hk);
    else ring_prepare<1>(p, s, it, ri, base, hk);
  }

  // KV8, early widening (MLA): while this step's P V runs on the tensor cores, wait for the next step's copies (the
  // only ones in flight) and widen this thread's rows of them (the other stage: no wgmma reads it now)
  // (measured on the H200, bench/NOTES.md v12: fp8 MLA N64 B16 4006 vs 4068 us with the widening at the top). GQA
  // widens each step's rows before its W instead, which gives the copies a whole step to land (H200, graph us, bench/
  // NOTES.md v30, against early widening: GQA 8/1 d128 N=8 B=16 99.8 vs 103.4, B=4 37.0 vs 38.3, b1 22.4 vs 22.5; d256
  // B=16 171.6 vs 171.0, b1 27.0 vs 26.9). 16-byte copies of 16 fp8 values widened into two slots (every other SW128
  // tile a thread) measured 11-37% slower than these 8-byte ones.
  static constexpr bool kWidenEarly = MLA;
  __device__ static void widen_next(const Seg& s, int step, int it, uint8_t* smem) {
    if constexpr (KV8 && !PROD && kWidenEarly) {
      if (step + 1 < s.k_end) {
        cp_async_wait<0>();
        widen_rows(s, step + 1, smem + OFF_K + ((it + 1) & 1) * OPER);
      }
    }
  }

  // PROD: producer thread t = tid - 256 copies row r0 = t / 4 of each step, c0 =
  // t % 4: chunks c0 + 4 i (i = 0..8) of the row's 36 16-byte chunks of fp8 bytes, which widen to chunks 2 c0 and 2 c0
  // + 1 of SW128 tile i (chunk c0 + 4 i is copied into slot raw_slot(row, c0): 4 + c0 or c0, RAW_ALT), or chunks c0 + 4
  // k (k = 0..17) of a draft row's 72
  static constexpr int RAW = DQK / 16 / 4;  // 16-byte fp8 chunks a thread
  __device__ static uint32_t prod_row() { return (threadIdx.x - COMPUTE) / 4; }

  // the raw index value (slot, or page) of the thread's row of `step`, loaded a step ahead of its use
  __device__ static int64_t fetch8(const VerifyParams& p, const Seg& s, int step, uint32_t row) {
    return V::row_index(p, s, step * BN + int(row));
  }

  // A stage is released in two parts: EMPTY once warpgroup 0 is done with it (its S read every tile, its P V tiles
  // 0-3), EMPTY_B once warpgroup 1 is (its P V: tiles 4-7), which runs after warpgroup 0's softmax and ends later.
  // So a step's rows are copied and widened in two parts: PART_A (tiles 0-3 and 8) at EMPTY, PART_B (tiles 4-7) at
  // EMPTY_B, each its own cp.async group.
  static constexpr int PART_A = 0, PART_B = 1;
  __device__ static constexpr bool in_part(int tile, int part) { return (tile >= 4 && tile < 8) == (part == PART_B); }

  // the thread's row of `step`, tiles of `part`, into the stage at `k_base` (zeros past the request)
  __device__ static void issue8(const VerifyParams& p, const Seg& s, int step, int64_t idx, uint32_t k_base, int part,
                                uint32_t row) {
    const uint32_t c0 = threadIdx.x % 4;
    const int pos = step * BN + int(row);
    if (pos < s.plen) {
      const int64_t slot = p.paged ? idx * p.page_size + pos % p.page_size : idx;
      const uint8_t* k8 = static_cast<const uint8_t*>(p.k_pool) + slot * p.k_pool_stride_slot + 16 * c0;
      const uint32_t off = wg::sw128_offset(row, raw_slot(row, c0));
#pragma unroll
      for (int i = 0; i < RAW; ++i)
        if (in_part(i, part)) cp_async_16(k_base + i * TILE + off, k8 + 64 * i, 16);
    } else {
      const T* src = static_cast<const T*>(p.k_pool);  // any valid address when zero-filling
      int bytes = 0;
      if (pos < s.len) {
        src = static_cast<const T*>(p.k_draft) + (s.qo0 + (pos - s.plen)) * p.k_draft_stride_token;
        bytes = 16;
      }
      // chunk c0 + 4 k is chunk c0 (k even) or c0 + 4 (k odd) of tile k / 2
      const uint32_t off0 = wg::sw128_offset(row, c0), off1 = wg::sw128_offset(row, c0 + 4);
#pragma unroll
      for (int k = 0; k < 2 * RAW; ++k)
        if (in_part(k / 2, part))
          cp_async_16(k_base + (k / 2) * TILE + (k % 2 ? off1 : off0), src + (c0 + 4 * k) * 8, bytes);
    }
  }

  // widen the thread's fp8 prefix chunks of `step`, tiles of `part` (their copies are complete), in the stage at
  // `k_base`, which no wgmma reads now (F16, PART_B: a draft row's chunks become fp16 times kd in place)
  __device__ static void widen8(const VerifyParams& p, const Seg& s, int step, uint32_t k_base, int part,
                                uint32_t row) {
    const uint32_t c0 = threadIdx.x % 4;
    const int pos = step * BN + int(row);
    if (pos >= s.plen) {
      if constexpr (F16)
        if (part == PART_B && pos < s.len) draft_to_f16(k_base, row, c0, p.f16_draft_row);
      return;
    }
    const uint32_t off0 = wg::sw128_offset(row, 2 * c0), off1 = wg::sw128_offset(row, 2 * c0 + 1);
    const uint32_t raw = wg::sw128_offset(row, raw_slot(row, c0));
    const uint32_t quad = 0xfu << ((threadIdx.x % 32) & ~3u);  // the row's four threads (RAWH)
#pragma unroll
    for (int i = 0; i < RAW; ++i) {
      if (!in_part(i, part)) continue;
      const uint32_t tile = k_base + i * TILE;
      uint4 lo, hi;
      const uint4 v = lds_128(tile + raw);
      if constexpr (RAWH) __syncwarp(quad);  // the row's raw chunks are read before any is overwritten
      e4m3x16_to<M>(v, lo, hi);
      sts_128(tile + off0, lo);
      sts_128(tile + off1, hi);
    }
  }

  // F16: eight bf16 values (a 16-byte chunk of shared memory) times f, rounded to fp16, in place
  __device__ static void chunk_bf16_to_f16(uint32_t addr, float f) {
    const uint4 v = lds_128(addr);
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = pack2<__half>(__uint_as_float(w[i] << 16) * f, __uint_as_float(w[i] & 0xffff0000u) * f);
    sts_128(addr, make_uint4(w[0], w[1], w[2], w[3]));
  }

  // F16: the thread's chunks of a draft row (issue8's draft mapping) times kd in fp16
  __device__ static void draft_to_f16(uint32_t k_base, uint32_t row, uint32_t c0, float kd) {
    const uint32_t off0 = wg::sw128_offset(row, c0), off1 = wg::sw128_offset(row, c0 + 4);
#pragma unroll 2
    for (int k = 0; k < 2 * RAW; ++k) chunk_bf16_to_f16(k_base + (k / 2) * TILE + (k % 2 ? off1 : off0), kd);
  }

  // F16: the compute thread's Q chunks (load_q's mapping; they have landed) into fp16 times 2^e, e putting the
  // row's largest magnitude in [2^14, 2^15) (0 for rows of zeros, Inf or NaN); 2^-e into q_fac[row]
  __device__ static void q_to_f16(uint32_t q_base, float* q_fac) {
    const uint32_t t = threadIdx.x, row = t / 4, c0 = t % 4;
    auto addr = [&](int c) { return q_chunk(q_base, row, q_cc(row, c0, c)); };
    uint32_t mx = 0;  // the largest |value| of the row as bf16 bits, in both halves (bf16 magnitudes order as integers)
#pragma unroll 1
    for (int c = 0; c < DQK / 8 / 4; ++c) {
      const uint4 v = lds_128(addr(c));
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) mx = __vmaxu2(mx, w[i] & 0x7fff7fffu);
    }
    mx = __vmaxu2(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the row's quad
    mx = __vmaxu2(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = max(mx & 0xffffu, mx >> 16);
    // bf16 exponent field E: |max| in [2^(E-127), 2^(E-126)) (subnormals: below 2^-126, scaled as 2^-126)
    const int ex = int(mx >> 7);
    const int e = (mx == 0 || ex >= 255) ? 0 : min(14 - (max(ex, 1) - 127), 126);
    if (c0 == 0) q_fac[row] = __uint_as_float(uint32_t(127 - e) << 23);
    const float f = __uint_as_float(uint32_t(127 + e) << 23);
#pragma unroll 1
    for (int c = 0; c < DQK / 8 / 4; ++c) chunk_bf16_to_f16(addr(c), f);
  }

  // S8: the compute thread's Q chunks (load_q's mapping; they have landed) times 2^e as two e4m3 terms, hi = e4m3(x)
  // and lo = e4m3(x - hi), into the hi and lo tiles at q8 (value k of a row: tile k / 128, byte k % 128); e puts the
  // row's largest magnitude in [2^7, 2^8) (0 for rows of zeros, Inf or NaN); 2^-e into q_fac[row]. A bf16 value has 8
  // significant bits, hi keeps the first 4 and x - hi (a multiple of x's last bit, at most 8 of them) fits lo's 4: so
  // hi + lo = x exactly where lo is a normal e4m3 value or a multiple of 2^-9 (x at least 2^-9 of the row's largest),
  // and within 2^-10 2^-e of it below that
  __device__ static void q_to_e4m3(uint32_t q_base, uint32_t q8, float* q_fac) {
    const uint32_t t = threadIdx.x, row = t / 4, c0 = t % 4;
    auto addr = [&](int c) { return q_chunk(q_base, row, q_cc(row, c0, c)); };
    auto value = [](uint32_t w, int half) {  // value `half` (0: the low one) of a bf16 pair (S8: bf16 models)
      return __uint_as_float(half ? w & 0xffff0000u : w << 16);
    };
    float mx = 0.f;
#pragma unroll 1
    for (int c = 0; c < DQK / 8 / 4; ++c) {
      const uint4 v = lds_128(addr(c));
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) mx = fmaxf(mx, fmaxf(fabsf(value(w[i], 0)), fabsf(value(w[i], 1))));
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the row's quad
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // fp32 exponent field E: mx in [2^(E-127), 2^(E-126)) (subnormals: below 2^-126, scaled as 2^-126)
    const int ex = int(__float_as_uint(mx) >> 23);
    const int e = (mx == 0.f || ex >= 255) ? 0 : min(134 - max(ex, 1), 126);
    if (c0 == 0) q_fac[row] = __uint_as_float(uint32_t(127 - e) << 23);
    const float f = __uint_as_float(uint32_t(127 + e) << 23);
#pragma unroll 1
    for (int c = 0; c < DQK / 8 / 4; ++c) {
      const uint4 v = lds_128(addr(c));
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
      uint32_t hw[4], lw[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 x = make_float2(value(w[i], 0) * f, value(w[i], 1) * f);
        const __nv_fp8x2_storage_t h = __nv_cvt_float2_to_fp8x2(x, __NV_SATFINITE, __NV_E4M3);
        const float2 b = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(h, __NV_E4M3)));
        hw[i] = h;
        lw[i] = __nv_cvt_float2_to_fp8x2(make_float2(x.x - b.x, x.y - b.y), __NV_SATFINITE, __NV_E4M3);
      }
      // values 8 cc .. 8 cc + 7: bytes 8 (cc % 2) of chunk (cc % 16) / 2, tile cc / 16
      const uint32_t cc = q_cc(row, c0, c);
      const uint32_t a = q8 + (cc / 16) * TILE + wg::sw128_offset(row, (cc % 16) / 2) + 8 * (cc % 2);
      asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(a), "r"(hw[0] | (hw[1] << 16)), "r"(hw[2] | (hw[3] << 16))
                   : "memory");
      asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(a + KT8 * TILE), "r"(lw[0] | (lw[1] << 16)),
                   "r"(lw[2] | (lw[3] << 16))
                   : "memory");
    }
  }

  // FV_TRACE_PROD (diagnostic, with FLASHVERIFY_TRACE; scripts/trace-summary; batch-1 cases, one segment a CTA):
  // thread `who` writes %globaltimer into word `slot` (0 or 1) of trace event `ev`. The first producer thread records
  // when it issued (slot 1: both parts) and saw landed (slot 0: the first part) the copies of steps 0-4 as events 8-12,
  // and when it began to issue those of steps 1-4 (events 4-7, slot 1: after the EMPTY barrier); compute thread 0
  // records its prologue (event 2, slot 0, without trace_event's clearing of the later events), with fp16 products
  // when its Q rows landed (event 1, slot 1: the plan event's clock64 word) and the end of its Q conversion (event 2,
  // slot 1), and W of steps 0-4 only (events 3-7, slot 0). So the clock64 words scripts/trace-summary reads hold times
  // here: it leaves them out.
  __device__ static void diag_time(const VerifyParams& p, int ev, int slot, uint32_t who) {
#if defined(FLASHVERIFY_TRACE) && defined(FV_TRACE_PROD)
    const int64_t block = V::trace_block();
    if (p.trace == nullptr || threadIdx.x != who || block >= kTraceBlocks) return;
    uint64_t g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g)::"memory");
    p.trace[block * kTraceWords + 2 + 2 * ev + slot] = g;
#endif
  }

  template <int N = COMPUTE>
  __device__ static void named_sync(int id) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(N) : "memory"); }
  template <int N = COMPUTE>
  __device__ static void named_arrive(int id) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(N) : "memory"); }

  // PROD: the producer warpgroups' part of a segment: every row of every step copied (fp8 prefix rows into one half
  // of each tile row, RAWH; draft rows as they are) and widened into the stages, the next step's copies in
  // flight while the compute warps work on this one. (RAWH: widen8's __syncwarp also orders the quad's landed copies
  // before another lane's stores over them, so each lane's cp_async_wait must stay before its widen8.)
  __device__ static void produce_segment(const VerifyParams& p, const Seg& s, uint8_t* smem) {
    const uint32_t k_base = smem_addr(smem) + OFF_K;
    __syncthreads();  // (the compute warps' segment start) the previous segment is done with every shared buffer
    const int n = s.k_end - s.k_begin;
    const uint32_t r0 = prod_row();  // the thread's row of each step
    int64_t idx = 0;                 // its raw index value, a step ahead
    auto fetch = [&](int step) { idx = fetch8(p, s, step, r0); };
    auto issue = [&](int step, uint32_t base, int part) {
      issue8(p, s, step, idx, base, part, r0);
      cp_async_commit();
    };
    auto widen = [&](int step, uint32_t stage, int part) { widen8(p, s, step, stage, part, r0); };
    if (n > 0) {
      fetch(s.k_begin);
      issue(s.k_begin, k_base, PART_A);
      issue(s.k_begin, k_base, PART_B);
      diag_time(p, 8, 1, COMPUTE);
      if (n > 1) fetch(s.k_begin + 1);
    }
    for (int it = 0; it < n; ++it) {
      const int step = s.k_begin + it;
      const uint32_t stage = k_base + (it & 1) * OPER;
      cp_async_wait<1>();  // the step's PART_A (its PART_B, the newer group, may still be in flight)
      if (it < 5) diag_time(p, 8 + it, 0, COMPUTE);
      widen(step, stage, PART_A);
      cp_async_wait<0>();
      widen(step, stage, PART_B);
      wg::fence_proxy_async();                  // the copies and widened rows, for the tensor cores' reads
      named_arrive<THREADS>(BAR_FULL + (it & 1));  // the step's stage is ready
      if (it + 1 < n) {
        // the other stage held step it - 1: its PART_A once warpgroup 0 is done with it, its PART_B once warpgroup 1 is
        const uint32_t next = k_base + ((it + 1) & 1) * OPER;
        if (it >= 1) named_sync<EMPTY_THREADS>(BAR_EMPTY + ((it + 1) & 1));
        if (it + 1 < 5) diag_time(p, 4 + it, 1, COMPUTE);
        issue(step + 1, next, PART_A);
        if (it >= 1) named_sync<EMPTY_THREADS>(BAR_EMPTY_B + ((it + 1) & 1));
        issue(step + 1, next, PART_B);
        if (it + 1 < 5) diag_time(p, 9 + it, 1, COMPUTE);
        if (it + 2 < n) fetch(step + 2);
      }
    }
    __syncthreads();  // (the compute warps' epilogue barrier)
  }

  // request row r of the tile's KV head hk: draft token i (returned through i) and its q head (run passes hk 0 for MLA,
  // whose one KV head serves every q head)
  __device__ __forceinline__ static int row_head(const VerifyParams& p, int r, int hk, int& i) {
    i = r / p.group;
    return hk * p.group + r - i * p.group;
  }

  __device__ static void rescale(float (&o)[NB][32], float a0, float a1) {
    if (a0 == 1.f && a1 == 1.f) return;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        o[nb][4 * j] *= a0;
        o[nb][4 * j + 1] *= a0;
        o[nb][4 * j + 2] *= a1;
        o[nb][4 * j + 3] *= a1;
      }
  }
  __device__ static void fence_operands(float (&o)[NB][32]) {
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) wg::fence_operands(o[nb]);
  }

  // A warpgroup's P V: O (its NB column tiles) = O * (a0, a1) + P V, mma(nb, kk) issuing the wgmma of column
  // tile nb and key step kk; fp8 MLA: the next step's rows are widened while the wgmmas run (widen_next)
  struct NoOp {
    __device__ void operator()() const {}
  };
  template <class Mma, class During = NoOp>
  __device__ __forceinline__ static void pv(const Seg& s, int step, int it, uint8_t* smem, float (&o)[NB][32],
                                            float a0, float a1, Mma&& mma, During&& during = During{}) {
    rescale(o, a0, a1);
    fence_operands(o);
    wg::fence();
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) mma(nb, kk);
    wg::commit();
    widen_next(s, step, it, smem);
    during();  // (RING: warpgroup 0 prepares its tiles of the next step)
    wg::wait<0>();
    fence_operands(o);
  }

  __device__ static void run_segment(const VerifyParams& p, const Seg& s, int m_tile, int split, int num_splits,
                                     int slot0, uint8_t* smem, int hk = 0) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    const int wgi = warp / 4, wq = warp % 4;  // warpgroup, warp within it: rows 16 wq + g (+ 8)
    const uint32_t base = smem_addr(smem);
    const uint32_t q_base = base + OFF_Q, p_base = base + OFF_P;
    float* alpha_s = reinterpret_cast<float*>(smem + OFF_STATS);
    float* l_fin = alpha_s + BM;
    float* m_fin = l_fin + BM;
    float* q_fac = m_fin + BM;  // F16

    __syncthreads();  // the previous segment is done with every shared buffer

    // ---- prologue: Q and the first step (one cp.async group), the second step's slot indices (ST > 2: the first ST - 1
    // steps, a group each, and step ST - 1's indices). The general loop below reproduces ST == 2's steps, but compiled
    // for it the device-checked 2-stage kernels' sm_90a SASS changes (v29 review, local comparison), so they keep theirs
    load_q(p, s, m_tile, q_base, hk);
    RowIdx ri;
    [[maybe_unused]] int64_t rri[2];  // RING: the thread's rows' slot indices, a step ahead of their copies
    [[maybe_unused]] RowIdx ri0;  // WG1_COPIES: warpgroup 1's thread t also holds the slot indices of thread t - 128
    if constexpr (PROD) {
      cp_async_commit();  // Q (the producers copy the rows)
    } else if constexpr (RING) {
      // steps 0 .. RR - 1: the slot indices (independent loads), then the thread's raw rows, a group each (Q in the
      // first); step 0 is prepared here, the others by the step before them
      int64_t first[RR][2];
#pragma unroll
      for (int j = 0; j < RR; ++j)
        if (s.k_begin + j < s.k_end) ring_fetch(p, s, s.k_begin + j, first[j]);
#pragma unroll
      for (int j = 0; j < RR; ++j) {
        if (s.k_begin + j < s.k_end) {
          if (wgi == 0) ring_issue<0>(p, s, s.k_begin + j, first[j], base + OFF_RAW + j * RAW_STAGE, hk);
          else ring_issue<1>(p, s, s.k_begin + j, first[j], base + OFF_RAW + j * RAW_STAGE, hk);
        }
        cp_async_commit();
      }
      if (s.k_begin + RR < s.k_end) ring_fetch(p, s, s.k_begin + RR, rri);
      if (s.k_begin < s.k_end) ring_prepare_wg(p, s, 0, rri, base, hk, wgi);
    } else if constexpr (ST == 2) {
      if constexpr (S8) cp_async_commit();  // (S8: Q a group of its own, split below while the first rows land)
      if (s.k_begin < s.k_end) {
        V::fetch_rows(p, s, s.k_begin, ri);
        issue_rows(p, s, s.k_begin, ri, base + OFF_K, hk);
      }
      cp_async_commit();
      if (s.k_begin + 1 < s.k_end) V::fetch_rows(p, s, s.k_begin + 1, ri);
      if constexpr (WG1_COPIES)
        if (wgi == 1 && s.k_begin + 1 < s.k_end) fetch_rows_of(threadIdx.x - 128, p, s, s.k_begin + 1, ri0);
      if constexpr (S8)
        if (s.k_begin < s.k_end) {
          cp_async_wait<1>();  // Q
          q_to_e4m3(q_base, base + OFF_Q8, q_fac);
        }
    } else {
      // the first ST - 1 steps' slot indices (independent loads), then their rows, one group a step
      RowIdx first[ST - 1];
#pragma unroll
      for (int j = 0; j < ST - 1; ++j)
        if (s.k_begin + j < s.k_end) V::fetch_rows(p, s, s.k_begin + j, first[j]);
#pragma unroll
      for (int j = 0; j < ST - 1; ++j) {
        if (s.k_begin + j < s.k_end) issue_rows(p, s, s.k_begin + j, first[j], base + OFF_K + j * OPER, hk);
        cp_async_commit();
      }
      if (s.k_begin + ST - 1 < s.k_end) V::fetch_rows(p, s, s.k_begin + ST - 1, ri);
    }
#if defined(FV_TRACE_PROD)
    diag_time(p, 2, 0, 0);
#else
    FV_TRACE(V::trace_block(), 2);
#endif

    if constexpr (F16)
      if (s.k_begin < s.k_end) {
        // Q (RING: in group 0, which ring_prepare's wait has completed; waiting for every group here would wait for
        // the raw rows of steps 1 and 2 that the prologue has just issued, a memory round trip a segment)
        if constexpr (!RING) cp_async_wait<0>();
        diag_time(p, 1, 1, 0);
        q_to_f16(q_base, q_fac);  // (while the producers wait for the first rows)
        wg::fence_proxy_async();
        // PROD: q_fac's rows reach the other compute warps through a barrier of the compute warps alone, not through
        // the first FULL barrier that the producers' bar.arrive completes. compute-sanitizer racecheck reports q_fac's
        // store and the first step's read as a hazard when FULL alone orders them (HopperMla's multi-segment problems,
        // 2-3 hazards, counts varying run to run), while the same barrier protocol in isolation (fv_barrier_probe:
        // FULL / EMPTY from registers, setmaxnreg, several segments) is clean under racecheck; with this barrier the
        // kernel is clean too, and it costs nothing measurable (H100, v46, x3: fp8 MLA b1 46.2-46.5 vs 46.2-46.7 us,
        // N=64 B=16 2963-2981 vs 2965-2981, N=8 B=16 393.2-395.0 vs 393.6-395.0): the compute warps would wait at FULL
        // for the producers' first rows anyway
        if constexpr (PROD) named_sync<COMPUTE>(BAR_QFAC);
        diag_time(p, 2, 1, 0);
      }

    int row_of[2], tok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_of[h] = 16 * wq + g + 8 * h;
      tok[h] = (m_tile * BM + row_of[h]) / p.group;
    }
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
    float qf[2] = {1.f, 1.f};  // F16: the rows' Q factors 2^-e (read at the segment's first step)
    float o[NB][32];  // columns (DV / 2) wgi + 64 nb + 8 j + 2 t4 (+1), rows g (+ 8) of the warp's 16
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
      for (int i = 0; i < 32; ++i) o[nb][i] = 0.f;

    // The key steps. S8_LOOPS runs them in two phases, the S8 steps (prefix keys only, S on e4m3) and then the others,
    // the phase loop unrolled so that s8_step is a compile-time constant in each copy of the step loop: with a runtime
    // branch between the e4m3 and the bf16 S wgmma sequences (and around widen_rows) ptxas serializes every wgmma of the
    // kernel (C7520, "compiler-inserted WG.AR in divergent path"). Every other kernel has one phase, not unrolled: its
    // sm_90a SASS is the plain step loop's, instruction for instruction (cuobjdump, v40; a full unroll of one phase
    // spilled the MLA producer kernel's compute warps 236 bytes instead of 80, and v39-v40's form, the step a lambda
    // called from the loops, changed the MLA kernels' SASS as well). Without the unroll the two phases stay a loop:
    // C7520.
    // Measured on the H200 (GQA 8/1 N=8 P=32K, graph us, bench/NOTES.md v39): at d128 two phases ran slower than the
    // serialized single loop (B=16 103.8-104.4 vs 93.4, B=4 43.5-43.8 vs 35.1-35.2: ptxas spills 180 bytes where the
    // single loop spills 48), at d256 (no spills) they take fp8 B=16 from 167-170 to 148-151 (16-bit pools 156.7-157.0).
    // issue_rows lands a step's rows by the same test, (step + 1) * BN <= s.plen, i.e. step < s8_end.
    const int s8_end = S8_LOOPS ? min(s.k_end, max(s.k_begin, s.plen / BN)) : s.k_begin;
#pragma unroll(S8_LOOPS ? 2 : 1)
    for (int phase = 0; phase < (S8_LOOPS ? 2 : 1); ++phase)  // (the step loop below is its body)
    for (int step = !S8_LOOPS || phase == 0 ? s.k_begin : s8_end; step < (S8_LOOPS && phase == 0 ? s8_end : s.k_end);
         ++step) {
      const int it = step - s.k_begin;
      const bool s8_step = S8_LOOPS ? phase == 0 : S8 && (step + 1) * BN <= s.plen;
      if constexpr (PROD) {
        if constexpr (!F16)
          if (it == 0) {
            cp_async_wait<0>();  // Q
            wg::fence_proxy_async();
          }
        named_sync<THREADS>(BAR_FULL + (it & 1));  // the producers' rows of the step (and every compute warp's Q)
        if constexpr (F16)
          if (it == 0) {  // (braced: a bare #pragma under a discarded if constexpr can warn, #607-D)
#pragma unroll
            for (int h = 0; h < 2; ++h) qf[h] = q_fac[row_of[h]];
          }
      } else if constexpr (RING) {
        wg::fence_proxy_async();  // the thread's widened rows and tail copies, for the tensor cores' reads
        __syncthreads();          // (W) the step's rows; every warp done with the previous P and V stage
        if constexpr (F16)
          if (it == 0) {  // (braced: #607-D, above)
#pragma unroll
            for (int h = 0; h < 2; ++h) qf[h] = q_fac[row_of[h]];
          }
      } else {
        cp_async_wait<ST - 2>();  // this step's group (ST - 2 younger ones may be in flight)
        // KV8: a segment's first step widens here; the others were widened during the previous step's P V (MLA);
        // S8's prefix steps widen V after W (warpgroup 1)
        if constexpr (KV8)
          if ((!kWidenEarly || it == 0) && !s8_step) widen_rows(s, step, smem + OFF_K + (unsigned(it) % ST) * OPER);
        wg::fence_proxy_async();  // this thread's copies, visible to the tensor cores' operand reads
        __syncthreads();          // (W) every copy of the step; every warp done with the previous P and stage
        if constexpr (S8)
          if (it == 0) {  // (braced: #607-D, above)
#pragma unroll
            for (int h = 0; h < 2; ++h) qf[h] = q_fac[row_of[h]];
          }
      }
#if defined(FV_TRACE_PROD)
      if (it < 5) diag_time(p, 3 + it, 0, 0);
#else
      if (it < 10) FV_TRACE(V::trace_block(), 3 + it);
#endif
      // (!PROD) this thread's rows of step + ST - 1 into the stage of the previous step, which every warp is done
      // with (W)
      auto copy_next = [&]() {
        if constexpr (!PROD && !RING) {
          const int next = step + ST - 1;
#if defined(FV_DIAG_NOREFILL)  // (diagnostic, wrong scores: no copies after the first ST steps; timing only)
          if (next < s.k_end && next < s.k_begin + ST)
#else
          if (next < s.k_end)
#endif
          {
            const uint32_t dst = base + OFF_K + ((unsigned(it) + ST - 1) % ST) * OPER;  // the previous step's stage
            if constexpr (WG1_COPIES) {
              if (wgi == 1) {
                bool prefix_step = false;  // MLA's prefix steps: issue_prefix_rows; the others row by row
                if constexpr (MLA) {
                  prefix_step = (next + 1) * BN <= s.plen;
                  if (prefix_step)
                    issue_prefix_rows(p, next, ri, ri0, threadIdx.x - 128, dst);
                }
                if (!prefix_step) {
                  issue_rows(p, s, next, ri, dst, hk);
                  issue_rows_of(threadIdx.x - 128, p, s, next, ri0, dst, hk);
                }
              }
            } else {
              issue_rows(p, s, next, ri, dst, hk);
            }
          }
          cp_async_commit();
          if constexpr (WG1_COPIES) {
            if (wgi == 1 && next + 1 < s.k_end) {
              V::fetch_rows(p, s, next + 1, ri);
              fetch_rows_of(threadIdx.x - 128, p, s, next + 1, ri0);
            }
          } else if (next + 1 < s.k_end)
            V::fetch_rows(p, s, next + 1, ri);
        }
      };
      // 16-bit pools: warpgroup 0 issues its copies after its S wgmmas, which would otherwise wait behind them (a
      // copy's issue waits on the SM's global-memory queue). Measured on the H200 (bench/NOTES.md v25, graph us,
      // against copies first): MLA Hq=16 N=64 B=16 2423 vs 2549, Hq=128 19438 vs 20540, N=8 B=16 310 vs 330, N=64 b1
      // 167.4 vs 177.2, N=8 b1 38.9 vs 39.2. WG1_COPIES (MLA, GQA d128): warpgroup 1 issues them all and warpgroup 0
      // none (above). The fp8 kernels issue theirs first (MLA widens them during P V, widen_next; GQA's fp8 order with
      // the copies after S has not been measured).
      constexpr bool kCopyAfterS = !KV8;
      if (!kCopyAfterS || wgi == 1) copy_next();
      const uint32_t k_base = base + OFF_K + (RING ? 0u : (unsigned(it) % ST) * OPER);
      [[maybe_unused]] const uint32_t v_base = base + OFF_V + (unsigned(it) & 1) * (VT * TILE);  // RING
      [[maybe_unused]] const bool more = step + 1 < s.k_end;

      if (wgi == 0) {
        // ---- S = Q K^T
        float acc[32];
        wg::zero_operands(acc);
        wg::fence();
        // (the descriptors of the tiles' first chunks; desc_plus offsets them)
        [[maybe_unused]] const uint64_t qd0 = wg::desc_sw128(q_base, 16, 1024);
        const uint64_t kd0 = wg::desc_sw128(k_base, 16, 1024);
        if (s8_step) {
          const uint64_t q8d = wg::desc_sw128(base + OFF_Q8, 16, 1024);
          // Q's lo term over every k32 step first, then its hi term (S8_LO_FIRST above: the accumulator is still
          // small while the lo products go in)
#pragma unroll
          for (int term = 1; term >= 0; --term)
#pragma unroll
            for (int kb = 0; kb < KT8; ++kb)
#pragma unroll
              for (int j = 0; j < 4; ++j)
                wg::mma_m64n64k32_e4m3_ss(acc, wg::desc_plus(q8d, (term * KT8 + kb) * TILE + 32 * j),
                                          wg::desc_plus(kd0, kb * TILE + 32 * j), term == 0 || kb + j > 0);
        } else {
#if defined(FV_DIAG_S_TILES)
          // diagnostic (wrong scores; ab-build timing only): MLA 16-bit pools' S over FV_DIAG_S_TILES of the 9 tiles
          constexpr int kSTiles = MLA && !KV8 ? FV_DIAG_S_TILES : KT;
#else
          constexpr int kSTiles = KT;
#endif
#pragma unroll
          for (int kb = 0; kb < kSTiles; ++kb)
#pragma unroll
            for (int j = 0; j < 4; ++j)
              wg::mma_m64n64k16_ss<M>(acc, wg::desc_plus(qd0, kb * TILE + 32 * j),
                                      wg::desc_plus(kd0, kb * TILE + 32 * j), kb + j > 0);
        }
        wg::commit();
        if (kCopyAfterS) copy_next();
        wg::wait<0>();
        wg::fence_operands(acc);
        if constexpr (RING) named_arrive(BAR_S);  // K is free: warpgroup 1 widens the next step's K

        // ---- scale; mask keys past the request and draft keys outside the tree
        const bool tail = (step + 1) * BN > s.plen;
        float mx[2] = {-INFINITY, -INFINITY};
#if defined(FV_DIAG_NO_SOFTMAX)
        // diagnostic (wrong outputs; ab-build timing only, v58): the softmax's math left out of every step, the P
        // stores, barriers and P V kept: what that arithmetic costs warpgroup 0's chain, which hiding it (the seesaw)
        // could gain. -DFV_DIAG_NO_SOFTMAX=1: exp2 alone (P = S - max; ptxas, sm_90a: the fp8 producer kernel's compute
        // warps spill 92 / 124 bytes against the default's 96 / 128, the 16-bit MLA kernels 4 / 4 against 0 / 0); =2: no
        // scale of a prefix step, row maxima or exp2 either (P = S, rescale factors 1; but ptxas then spills 136 / 168
        // and 96 / 128 in the 16-bit fp8-capable kernels, 0 in the 16-bit-pool one: read its times with that in mind)
        // Measured (H100, bench/NOTES.md v59, graph us): =2 takes 8.5% off fp8 MLA N=64 B=16 (2169 vs 2348-2392),
        // 7-8% off N=8, 12.6% off 16-bit pools' N=64 B=16; =1 0.8% / 5.7%
        constexpr int kDiagNoSoftmax = FV_DIAG_NO_SOFTMAX;
        static_assert(kDiagNoSoftmax == 1 || kDiagNoSoftmax == 2, "FV_DIAG_NO_SOFTMAX: 1 (exp2) or 2 (all the math)");
#else
        constexpr int kDiagNoSoftmax = 0;
#endif
        constexpr bool diag_skip = kDiagNoSoftmax == 2, diag_exp = kDiagNoSoftmax > 0;
        // KV8: k_scale multiplies the prefix scores (folded into scale_log2_prefix)
        if (diag_skip && !tail) {
          // (FV_DIAG_NO_SOFTMAX=2: a prefix step's scores unscaled)
        } else if (!tail) {
          if constexpr (F16 || S8) {  // (S8: a prefix step, whose S took Q times 2^e)
            const float c[2] = {p.scale_log2_prefix * qf[0], p.scale_log2_prefix * qf[1]};
#pragma unroll
            for (int i = 0; i < 32; ++i) acc[i] *= c[(i >> 1) & 1];
          } else {
#pragma unroll
            for (int i = 0; i < 32; ++i) acc[i] *= KV8 ? p.scale_log2_prefix : p.scale_log2;
          }
        } else {
#pragma unroll
          for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              float v = acc[4 * j + e] * p.scale_log2;
              const int pos = step * BN + 8 * j + 2 * t4 + (e & 1);
              if constexpr (KV8)
                if (pos < s.plen) v = acc[4 * j + e] * p.scale_log2_prefix;
              if constexpr (F16) v *= qf[e >> 1] * (pos < s.plen ? 1.f : p.f16_draft_score);
              const int tk = tok[e >> 1];
              if (pos >= s.len) v = -INFINITY;
              else if (pos >= s.plen && (tk >= s.n || !V::tree_visible(p, s, tk, pos - s.plen))) v = -INFINITY;
              acc[4 * j + e] = v;
            }
        }
        if (!diag_skip)
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            mx[0] = fmaxf(mx[0], fmaxf(acc[4 * j], acc[4 * j + 1]));
            mx[1] = fmaxf(mx[1], fmaxf(acc[4 * j + 2], acc[4 * j + 3]));
          }
        // ---- online softmax: a row lives in one quad
        float use[2], alpha[2], sum[2] = {0.f, 0.f};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (diag_skip) {
            use[h] = 0.f;
            alpha[h] = 1.f;
            continue;
          }
          mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
          mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
          const float m_new = fmaxf(m_run[h], mx[h]);
          use[h] = m_new == -INFINITY ? 0.f : m_new;  // a row that saw only masked keys keeps P at 0
          alpha[h] = m_new == -INFINITY ? 1.f : exp2f(m_run[h] - m_new);
          m_run[h] = m_new;
        }
        uint32_t a[4][4];  // P as the A operand of the 4 key steps: n-tile 2 kk -> a0, a1; 2 kk + 1 -> a2, a3
        // RING: the P tile's 16 store addresses are recomputed here every step (the empty asm hides that p_base is
        // loop-invariant); hoisted out of the step loop they were spilled and reloaded every step
        uint32_t pst = p_base;
        if constexpr (RING) asm volatile("" : "+r"(pst));
        if constexpr (PROD)
          if (it > 0) named_sync(BAR_PFREE);  // warpgroup 1 is done with the previous P and rescale factors
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float p0 = diag_exp ? acc[4 * j] - use[0] : exp2_ftz(acc[4 * j] - use[0]);
          const float p1 = diag_exp ? acc[4 * j + 1] - use[0] : exp2_ftz(acc[4 * j + 1] - use[0]);
          const float p2 = diag_exp ? acc[4 * j + 2] - use[1] : exp2_ftz(acc[4 * j + 2] - use[1]);
          const float p3 = diag_exp ? acc[4 * j + 3] - use[1] : exp2_ftz(acc[4 * j + 3] - use[1]);
          sum[0] += p0 + p1;
          sum[1] += p2 + p3;
          uint32_t w0, w1;
          if constexpr (KV8) {  // v_scale on the prefix keys' P (the row sums stay unscaled); F16 and fp16 models (P in
            // fp16, whose range v_scale alone could leave): VerifyParams' factors, the output takes f16_out
            const int pos = step * BN + 8 * j + 2 * t4;
            const float vp = F16 || H16 ? p.f16_p_prefix : p.v_scale, vd = F16 || H16 ? p.f16_p_draft : 1.f;
            const float v0 = pos < s.plen ? vp : vd, v1 = pos + 1 < s.plen ? vp : vd;
            w0 = pack2<M>(p0 * v0, p1 * v1);
            w1 = pack2<M>(p2 * v0, p3 * v1);
          } else {
            w0 = pack2<M>(p0, p1);
            w1 = pack2<M>(p2, p3);
          }
          a[j / 2][2 * (j % 2)] = w0;
          a[j / 2][2 * (j % 2) + 1] = w1;
          // the P tile (SW128, rows x keys) for warpgroup 1: keys 8 j + 2 t4 are bytes 4 t4 of chunk j
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(pst + wg::sw128_offset(row_of[0], j) + 4 * t4), "r"(w0));
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(pst + wg::sw128_offset(row_of[1], j) + 4 * t4), "r"(w1));
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          l_run[h] = l_run[h] * alpha[h] + sum[h];
          if (t4 == 0) alpha_s[row_of[h]] = alpha[h];
        }
        wg::fence_proxy_async();  // P, for warpgroup 1's operand reads
        // P and the rescale factors are in shared memory (S8: and warpgroup 1's V rows)
        if constexpr (S8) named_sync(BAR_P);
        else named_arrive(BAR_P);

        // ---- O[:, 0:DV/2] = O * alpha + P V (P from registers)
        auto during = [&]() {
          if constexpr (RING)
            if (more) ring_prepare<0>(p, s, it + 1, rri, base, hk);
        };
        const uint64_t vd0 = wg::desc_sw128(RING ? v_base : k_base, TILE, 1024);
        pv(
            s, step, it, smem, o, alpha[0], alpha[1],
            [&](int nb, int kk) {
              if constexpr (PVW) {
                if (nb == 0) wg::mma_pv_wide_rs_tb<M>(o, a[kk], wg::desc_plus(vd0, V_OFF + 2048 * kk));
              } else {
                const uint32_t off = V_OFF + nb * TILE + 2048 * kk;
                wg::mma_m64n64k16_rs_tb<M>(o[nb], a[kk], wg::desc_plus(vd0, off));
              }
            },
            during);
        if constexpr (PROD)
          if (step + 2 < s.k_end) named_arrive<EMPTY_THREADS>(BAR_EMPTY + (it & 1));  // the producers refill the stage
      } else {
        if constexpr (RING) {
          named_sync(BAR_S);  // warpgroup 0's S is done with K
          if (more) ring_prepare<1>(p, s, it + 1, rri, base, hk);
        }
        if (s8_step) {  // S8: the step's V rows, for both warpgroups' P V
          widen_v8(k_base, tid - COMPUTE / 2);
          wg::fence_proxy_async();
        }
        named_sync(BAR_P);  // warpgroup 0 wrote P and the rescale factors
        // ---- O[:, DV/2:DV] = O * alpha + P V (P from the P tile)
        const uint64_t pd0 = wg::desc_sw128(p_base, 16, 1024), vd0 = wg::desc_sw128(RING ? v_base : k_base, TILE, 1024);
        pv(s, step, it, smem, o, alpha_s[row_of[0]], alpha_s[row_of[1]], [&](int nb, int kk) {
          if constexpr (PVW) {
            if (nb == 0)
              wg::mma_pv_wide_ss_tb<M>(o, wg::desc_plus(pd0, 32 * kk),
                                       wg::desc_plus(vd0, V_OFF + NB * TILE + 2048 * kk));
          } else {
            const uint32_t off = V_OFF + (NB + nb) * TILE + 2048 * kk;
            wg::mma_m64n64k16_ss_tb<M>(o[nb], wg::desc_plus(pd0, 32 * kk), wg::desc_plus(vd0, off));
          }
        });
        if constexpr (PROD) {
          if (step + 1 < s.k_end) named_arrive(BAR_PFREE);
          if (step + 2 < s.k_end) named_arrive<EMPTY_THREADS>(BAR_EMPTY_B + (it & 1));  // ... its tiles 4-7
        }
      }
    }

    // ---- epilogue: warpgroup 0 holds the row sums (a row's quad covers all its keys)
    if (wgi == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = l_run[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (t4 == 0) {
          l_fin[row_of[h]] = l;
          m_fin[row_of[h]] = m_run[h];
        }
      }
    }
    __syncthreads();
    FV_TRACE(V::trace_block(), 13);

    const bool final_out = num_splits == 1;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_of[h], r = m_tile * BM + row;
      if (r >= s.rows) continue;
      float l = l_fin[row];
      float m = m_fin[row];
      int i;
      const int hq = row_head(p, r, hk, i);
      float inv = l > 0.f ? 1.f / l : 0.f;
      // a sink joins the denominator once: here when the request is not split, else in the combine
      if (final_out && p.sinks != nullptr && l > 0.f) join_sink(p.sinks[hq] * kLog2e, m, l, inv);
      if constexpr (F16 || H16) inv *= p.f16_out;  // P's 2^-sigma
      const int64_t tok_row = s.qo0 + i;
      const float lse2 = lse_log2(m, l);
      const int col0 = (DV / 2) * wgi + 2 * t4;
      if (final_out) {
        const int64_t ob = tok_row * p.out_stride_token + int64_t(hq) * p.out_stride_head + col0;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const int col = 64 * nb + 8 * j;
            const float x = o[nb][4 * j + 2 * h] * inv, y = o[nb][4 * j + 2 * h + 1] * inv;
            store_out2<T>(p, ob, col, x, y);
          }
        if (p.lse != nullptr && wgi == 0 && t4 == 0)
          p.lse[tok_row * p.lse_stride_token + hq] = l > 0.f ? lse2 * kLn2 : -INFINITY;
      } else {
        const int64_t prow = part_row(p, slot0 + split, i, hq);
        // EPI_BULK: the row into shared memory (Q's and the stages' space: every wgmma of the segment is done), for
        // one bulk copy a row below; else straight to the partial row
        const uint32_t srow = base + OFF_Q + row * EPI_ROW + 4 * col0;
        float* dst = p.part_o + prow * DV + col0;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float x = o[nb][4 * j + 2 * h] * inv, y = o[nb][4 * j + 2 * h + 1] * inv;
            if constexpr (EPI_BULK)
              asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(srow + 4 * (64 * nb + 8 * j)), "f"(x), "f"(y)
                           : "memory");
            else
              *reinterpret_cast<float2*>(dst + 64 * nb + 8 * j) = make_float2(x, y);
          }
        if (wgi == 0 && t4 == 0) p.part_lse[prow] = lse2;
      }
    }
    if (EPI_BULK && !final_out) {
      // the staged rows to global memory by the bulk-copy engine: thread r < 64 copies row r (2 KB), then waits until
      // the copy has read shared memory (the next segment's copies reuse it). Their global writes need no wait here:
      // the combine reads them after griddepcontrol.wait, i.e. once this grid has completed, bulk copies included.
      wg::fence_proxy_async();
      named_sync(BAR_EPI);
      const int r = m_tile * BM + int(threadIdx.x);
      if (threadIdx.x < BM && r < s.rows) {
        int i;
        const int hq = row_head(p, r, hk, i);
        float* dst = p.part_o + part_row(p, slot0 + split, i, hq) * DV;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst),
                     "r"(base + OFF_Q + threadIdx.x * EPI_ROW), "n"(DV * 4) : "memory");
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      }
    }
    FV_TRACE(V::trace_block(), 14);
  }

  // The mma.sync tile's plan, segments and splits (Verify::for_each_planned_segment) with this tile's body
  __device__ static void run(const VerifyParams& p, uint8_t* smem_raw) {
    uint8_t* smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);  // SW128 tiles: 1024-aligned
    auto compute = [&](const Seg& s, int m_tile, int hk, int split, int num_splits, int slot0) {
      run_segment(p, s, m_tile, split, num_splits, slot0, smem, MLA ? 0 : hk);  // (MLA: hk a constant 0 below)
    };
    if constexpr (PROD) {
      // the two warpgroup roles walk the plan in two places: one inline plan buffer for both
      __shared__ int32_t inline_sched[V::kInlineSchedWords];
      if (threadIdx.x >= COMPUTE) {
        wg::set_max_regs<PROD_REGS, false>();
        V::for_each_planned_segment(
            p, [&](const Seg& s, int, int, int, int, int) { produce_segment(p, s, smem); }, inline_sched);
      } else {
        wg::set_max_regs<COMPUTE_REGS, true>();
        V::for_each_planned_segment(p, compute, inline_sched);
      }
    } else {
      V::for_each_planned_segment(p, compute);
    }
  }
};

template <class T, bool KV8>
__global__ void __launch_bounds__(256, 1) verify_wg_kernel(const __grid_constant__ VerifyParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
#if FV_HAS_WGMMA
  VerifyWg<T, KV8>::run(p, smem);
#elif defined(__CUDA_ARCH__)
  __trap();  // built for sm_90a only (the planner never selects it elsewhere)
#endif
}

// fp8 pools with 16-byte aligned rows: two producer warpgroups (PROD above; 512 threads); F16: fp16 products (bf16)
template <class T, bool F16>
__global__ void __launch_bounds__(VerifyWg<T, true, true, F16>::THREADS, 1) verify_wg_kernel_prod(const __grid_constant__ VerifyParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
#if FV_HAS_WGMMA
  VerifyWg<T, true, true, F16>::run(p, smem);
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

// GQA (16-bit pools without score modifiers; KV8: fp8 pools with k_scale / v_scale only): the same kernel with K and V
// rows of one KV head a CTA (blockIdx.z).
// HD 128, ST 2 (kGqaWg128): about 90 KB of shared memory, two CTAs a multiprocessor (ptxas at two CTAs' 128 registers:
// 120 / 148 bytes of spill, mostly outside the step loop; 159 registers uncapped). HD 128, ST 5 (kGqaWg128S5): ~186 KB,
// one CTA a multiprocessor, 196 registers, no spill. HD 256 (kGqaWg256): 4 SW128 tiles a row, a stage 64 KB, ~170 KB,
// one CTA a multiprocessor, 196 registers, no spill. RING (fp8, 2 stages): ~106 KB at d128 (still two CTAs a
// multiprocessor), ~202 KB at d256
// RG (fp8 pools, ST 2: Plan::fp8_ring): RING; F16 (RING only, bf16 models with p.fp8_f16): fp16 products, as the MLA
// producer kernel's
// S8E (default on): S8 where VerifyWg has it (fp8 pools, bf16 models, 2 stages, no RING); false: the same kernel without
template <class T, int HD, int ST, bool KV8, bool F16 = false, bool RG = false, bool S8E = true>
__global__ void __launch_bounds__(256, HD == 128 && ST == 2 ? 2 : 1)
    verify_wg_gqa_kernel(const __grid_constant__ VerifyParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
#if FV_HAS_WGMMA
  VerifyWg<T, KV8, false, F16, HD, ST, RG, S8E>::run(p, smem);
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

template <class T, int HD, int ST, bool KV8>
cudaError_t launch_verify_wg_gqa(const VerifyParams& p, dim3 grid, cudaStream_t stream) {
  using W = VerifyWg<T, KV8, false, false, HD, ST>;
  if constexpr (W::S8)
    if (!p.fp8_s8) {  // S8 off (dispatch.cu): the kernel without its code and its e4m3 Q tiles (verify_wg.cuh, S8)
      using W0 = VerifyWg<T, KV8, false, false, HD, ST, false, false>;
      return launch_with_smem(verify_wg_gqa_kernel<T, HD, ST, KV8, false, false, false>, grid, W0::THREADS, W0::SMEM, p,
                              stream);
    }
  return launch_with_smem(verify_wg_gqa_kernel<T, HD, ST, KV8>, grid, W::THREADS, W::SMEM, p, stream);
}

// the RING kernels (fp8 pools, 2 stages; src/cuda/wg/verify_gqa_ring.cu), with fp16 products for a bf16 model where
// p.fp8_f16 allows them
template <class T, int HD>
cudaError_t launch_verify_wg_gqa_ring(const VerifyParams& p, dim3 grid, cudaStream_t stream) {
  using W = VerifyWg<T, true, false, false, HD, 2, true>;
  auto kernel = verify_wg_gqa_kernel<T, HD, 2, true, false, true>;
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    static_assert(VerifyWg<T, true, false, true, HD, 2, true>::SMEM == W::SMEM, "one shared-memory size");
    if (p.fp8_f16) kernel = verify_wg_gqa_kernel<T, HD, 2, true, true, true>;
  }
  return launch_with_smem(kernel, grid, W::THREADS, W::SMEM, p, stream);
}

// prod (KV8 only): the producer-warpgroup kernel; with p.fp8_f16 (bf16 models) its fp16 products
template <class T, bool KV8>
cudaError_t launch_verify_wg(const VerifyParams& p, bool prod, dim3 grid, cudaStream_t stream) {
  using W = VerifyWg<T, KV8>;
  using WP = VerifyWg<T, true, true>;
  static_assert(WP::SMEM == W::SMEM, "one shared-memory size");
  auto kernel = KV8 && prod ? verify_wg_kernel_prod<T, false> : verify_wg_kernel<T, KV8>;
  if constexpr (KV8 && std::is_same<T, __nv_bfloat16>::value) {
    static_assert(VerifyWg<T, true, true, true>::SMEM == W::SMEM, "one shared-memory size");
    static_assert(VerifyWg<T, true, true, true>::THREADS == WP::THREADS, "the F16 producer kernel's launch size");
    if (prod && p.fp8_f16) kernel = verify_wg_kernel_prod<T, true>;
  }
  return launch_with_smem(kernel, grid, KV8 && prod ? WP::THREADS : W::THREADS, W::SMEM, p, stream);
}

}  // namespace fv
