// The closed list of tile configurations of the split-KV kernel. Plain C++ (constexpr) so that the host
// planner, the CPU tests and the CUDA kernels read the same numbers: shared-memory bytes, threads, and
// the work-partitioning constants.
#pragma once

#include <cstddef>

namespace fv {

struct TileConfig {
  int id;
  const char* name;
  int bm;      // query rows per CTA: (q heads of one KV head) x (draft tokens), packed token-major
  int bn;      // keys per pipeline step
  int dqk, dv;
  int wm, wn;  // S = Q K^T warp grid: each warp owns 16 rows x (bn / wn) keys
  int wom, won;// O += P V warp grid: each warp owns (bm / wom) rows x (dv / won) columns
  int stages;  // cp.async pipeline depth for K (and V)
  bool v_in_k; // MLA: V is the first dv columns of the K row, so the K tile serves both
  int min_blocks_per_sm;  // __launch_bounds__ minimum; also caps the CTAs the planner assumes
  bool large_smem;        // needs more than sm_120's 99 KB per block (sm_90 / sm_100 only)
  // Work partitioning, in units of one bn-key step. `overhead` is what a request costs on top of its
  // key steps (loading its Q tile, writing a partial state, the combine's read): it spreads requests
  // fairly over partitions. `min_part_cost` keeps partitions from becoming so short that writing and
  // merging their partial state costs more than the keys they read.
  int overhead;
  int min_part_cost;

  constexpr int threads() const { return wm * wn * 32; }
  constexpr std::size_t q_bytes() const { return std::size_t(bm) * dqk * 2; }
  constexpr std::size_t k_stage_bytes() const { return std::size_t(bn) * dqk * 2; }
  constexpr std::size_t v_stage_bytes() const { return v_in_k ? 0 : std::size_t(bn) * dv * 2; }
  constexpr std::size_t p_bytes() const { return std::size_t(bm) * bn * 2; }
  // row statistics: partial max and partial sum per S-warp column, alpha and final max per row
  constexpr std::size_t stat_bytes() const { return std::size_t(2 * wn + 2) * bm * 4; }
  constexpr std::size_t smem_bytes() const {
    return q_bytes() + std::size_t(stages) * (k_stage_bytes() + v_stage_bytes()) + p_bytes() + stat_bytes();
  }
};

enum ConfigId {
  kMlaLarge = 0,
  kMlaSmall = 1,
  kGqa64 = 2,
  kGqa128 = 3,
  kGqa256 = 4,
  kGqa128Bm32 = 5,
  kGqa128Bn32 = 6,
  kGqa128Bm32S3 = 7,
  kMlaWg = 8,
  kGqa256Bn32 = 9,
  kGqaWg128 = 10,
  kGqaWg128S5 = 11,
  kGqa256Bn64 = 12,
  kGqaWg256 = 13,
  kNumConfigs = 14
};

// Why these shapes (bench/NOTES.md has the arithmetic):
// - MLA large (sm_90): 64 rows x 576 of Q (72 KB) stay resident; 64-key K tiles (72 KB) double-buffered;
//   V is read from the K tile. 8 warps: S in 16x32 warp tiles, O (64 x 512 fp32 = 128 KB) split by
//   columns, 64 per warp = 128 accumulator registers a thread. 230 KB of shared memory.
// - MLA small (fits sm_120's 99 KB): 32 rows (36 KB of Q), 16-key K steps, 3 stages; 4 warps each
//   owning 128 O columns.
// - GQA: 64 rows, 4 x 2 warps for S, O split 4 (rows) x 2 (columns); K and V tiles separate. GQA with a
//   small tree is memory-bound: the pipeline is 4 stages deep so that 3 steps of K/V are in flight per
//   CTA (2 CTAs a multiprocessor), which 99 KB allows for d128 only with 32-key steps.
// - GQA d128 with group x drafts <= 32: a 32-row tile (half the MMA work of 64 rows); 3 stages where the
//   GPU has the shared memory (sm_90 / sm_100; not under FV_PROFILE_SMALL_SMEM), 2 elsewhere.
//   min_part_cost 2 for the 64- and 32-row d128 tiles (the bn32 tuning tile keeps 8): measured on the
//   64-row tile, GQA 8/1 b1 24.4 us vs 26.9 at 4 (bench/NOTES.md v8); the 32-row tiles take the same
//   value unmeasured at batch 1.
// - Request overhead 4 steps on the 64-key GQA d128 / d256 plans of sm_90 (the Hopper kernels, their 5-stage sibling
//   and the mma.sync tiles of the same plans, which must partition alike): a segment's fixed costs (plan, indices,
//   first keys, partial store: ~9 us in the v34 trace) are ~3.6 of its ~2.5 us steps, and at 2 (d256: 1) the
//   partitions that begin a request mid-way ran two segments and finished last. H200 env A/B (v34, graph us, x2):
//   GQA 8/1 d128 N=8 P=4K B=16 29.2 vs 31.3 (fp8 28.2 vs 30.0), P=32K B=16 95.0 vs 96.1, d256 B=16 156.9 vs 158.9
//   (fp8 169.5 vs 173.5); b1, B=4 and GQA 32/8 B=16 unchanged (3 gives about the same). The 64-key d128 mma.sync tile
//   is also sm_80 - sm_120's GQA d128 tile: there the value is unmeasured.
// - GQA d256: 16-key steps in 99 KB (3 stages); where two 104 KB CTAs fit (sm_90 / sm_100), 32-key steps in 2
//   stages: half the per-step work (barriers, softmax, O rescale) per key with as many bytes in flight. H200
//   (v15): GQA 8/1 d256 N=8 B=16 251 vs 277 us, GQA 16/2 B=16 472 vs 523, b1 39.7 vs 38.7 (1 us slower); it
//   spills 132 bytes at the 128-register cap of two CTAs (the 16-key tile 48).
constexpr TileConfig kTileConfigs[kNumConfigs] = {
    {kMlaLarge, "mla576_bm64_bn64_s2", 64, 64, 576, 512, 4, 2, 1, 8, 2, true, 1, true, 2, 3},
    {kMlaSmall, "mla576_bm32_bn16_s3", 32, 16, 576, 512, 2, 2, 1, 4, 3, true, 1, false, 2, 6},
    {kGqa64, "gqa64_bm64_bn64_s4", 64, 64, 64, 64, 4, 2, 4, 2, 4, false, 2, false, 2, 4},
    {kGqa128, "gqa128_bm64_bn64_s2", 64, 64, 128, 128, 4, 2, 4, 2, 2, false, 2, false, 4, 2},
    {kGqa256, "gqa256_bm64_bn16_s3", 64, 16, 256, 256, 4, 2, 4, 2, 3, false, 2, false, 2, 8},
    // for groups x drafts <= 32 rows (GQA 32/8 with 8 drafts): half the MMA work of the 64-row tile
    {kGqa128Bm32, "gqa128_bm32_bn64_s2", 32, 64, 128, 128, 2, 2, 2, 2, 2, false, 2, false, 2, 2},
    // a deeper pipeline of shorter steps (tuning alternative, FLASHVERIFY_CONFIG=gqa128_bm64_bn32_s4)
    {kGqa128Bn32, "gqa128_bm64_bn32_s4", 64, 32, 128, 128, 4, 2, 4, 2, 4, false, 2, false, 2, 8},
    // the 32-row tile with a third stage where shared memory allows it (sm_90 / sm_100: 109 KB, two CTAs a
    // multiprocessor): two steps of K/V in flight per CTA instead of one
    {kGqa128Bm32S3, "gqa128_bm32_bn64_s3", 32, 64, 128, 128, 2, 2, 2, 2, 3, false, 2, true, 2, 2},
    // the Hopper MLA kernel (verify_wg.cuh: wgmma, sm_90a only; the MLA default on sm_90): the large tile's geometry,
    // its own shared-memory layout (verify_wg.cuh's SMEM; this entry's smem_bytes is the large tile's) and a request
    // overhead of 5 steps: a segment's fixed costs (plan, Q and first keys, last step, partial store: ~9.5 us in the v42
    // trace of MLA h16 N8 B16 16K) are ~4.3 of its 2.23 us steps, and with 3 the two-segment partitions ended last
    // (CTAs end 142-156 us, p50 147). H200 env A/B (v42, x2, direct / graph us, overhead 3 / 5 / 6): N8 B16 16K 159.3 /
    // 158.2-158.5, 155.6-155.7 / 154.5-154.7, 154.9 / 154.3; 32K 280.4-280.9, 278.1-278.8, 277.7; N8 B4 16K 62.7-62.8 /
    // 61.2-62.0, 59.2-60.1 / 58.9, 59.0-59.7 / 58.9; N8 b1 39.2 / 38.7-38.8, 39.0-39.2 / 38.4-38.8, 39.0-39.6 /
    // 38.7-39.1; N64 B16 within noise (2167-2210 graph at each). Before v42's faster steps, 3 was best (v16, v26)
    {kMlaWg, "mla576_wg_bm64_bn64_s2", 64, 64, 576, 512, 4, 2, 1, 8, 2, true, 1, true, 5, 3},
    // GQA d256 where the shared memory allows it (sm_90 / sm_100: 104 KB, two CTAs a multiprocessor): 32-key
    // steps, half as many per key as the 99 KB tile's 16-key steps, with as many bytes in flight a multiprocessor
    {kGqa256Bn32, "gqa256_bm64_bn32_s2", 64, 32, 256, 256, 4, 2, 4, 2, 2, false, 2, true, 1, 4},
    // the Hopper kernel for GQA d128 (verify_wg.cuh with HD 128: wgmma, sm_90a only; 16-bit pools without score
    // modifiers, anything else takes the 64-row mma.sync tile of the same geometry, kGqa128): ~90 KB, two CTAs a
    // multiprocessor
    {kGqaWg128, "gqa128_wg_bm64_bn64_s2", 64, 64, 128, 128, 4, 2, 4, 2, 2, false, 2, true, 4, 2},
    // the same kernel with 5 stages (~186 KB, one CTA a multiprocessor): four steps of K / V in flight a CTA, so that a
    // batch-1 partition (~4 steps) is issued whole by the prologue. The planner takes it for fp8 pools at batch 1 of
    // one KV head (v31: GQA 8/1 N=8 b1 20.9 vs 22.3 us on the 2-stage kernel); for 16-bit pools it is forced only. H200
    // (bench/NOTES.md v29, graph us, x3) against the planner's tiles: GQA 8/1 N=8 b1 21.6 vs 21.9 (its steps are at the
    // memory floor, ~1.06 us for 32 KB a multiprocessor), 4/1 b1 21.3 vs 20.5, 16/2 b1 30.8 vs 29.2, 8/1 B=2 30.6 vs
    // 29.2, 32/8 b1 68.1 vs 54.8
    {kGqaWg128S5, "gqa128_wg_bm64_bn64_s5", 64, 64, 128, 128, 4, 2, 4, 2, 5, false, 1, true, 4, 2},
    // GQA d256 with 64-key steps (~170 KB, one CTA a multiprocessor): the Hopper kernel (verify_wg.cuh with HD 256;
    // 16-bit pools without score modifiers; the planner's d256 tile on sm_90) and the mma.sync tile of the same plan,
    // which serves the rest (modifiers). H200 (bench/NOTES.md v29, graph us): GQA 8/1 N=8 B=16 156.5 (Hopper) / 191.8
    // (mma.sync) / 251.8 (the 32-key tile), 16/2 B=16 281.9 / 359.1 / 474.1, 8/1 b1 27.8 / 29.2 / 40.2. The 64-key
    // mma.sync tile also serves fp8 pools on sm_90: GQA 8/1 N=8 B=16 281.8 vs 322.7 (32-key tile), b1 33.8 vs 42.8
    {kGqa256Bn64, "gqa256_bm64_bn64_s2", 64, 64, 256, 256, 4, 2, 4, 2, 2, false, 1, true, 4, 2},
    {kGqaWg256, "gqa256_wg_bm64_bn64_s2", 64, 64, 256, 256, 4, 2, 4, 2, 2, false, 1, true, 4, 2},
};

// The configurations with a second fp8 kernel (verify_kernel_narrow: 64-key compact steps, for small batches; the
// planner's Plan::fp8_narrow): the 32-row d128 tiles, whose fp8 kernels otherwise take 128-key steps
constexpr bool has_fp8_narrow_kernel(int id) { return id == kGqa128Bm32 || id == kGqa128Bm32S3; }

constexpr std::size_t kSmallSmemLimit = 101376;  // 99 KB: sm_86, sm_89, sm_120 per-block opt-in maximum
// Static shared memory of the verify kernels beside a configuration's dynamic smem_bytes(): the in-kernel plan's buffer
// (verify.cuh, inline_sched, asserted there). A block's dynamic + static bytes must fit the per-block opt-in maximum,
// so the planner's fits() and the asserts below count it (until v54 they compared smem_bytes() alone; no
// configuration was within 384 bytes of a limit)
constexpr std::size_t kVerifyStaticSmem = 384;

static_assert(kTileConfigs[kMlaLarge].smem_bytes() + kVerifyStaticSmem <= 232448, "MLA large config exceeds sm_90's 227 KB");
static_assert(kTileConfigs[kMlaSmall].smem_bytes() + kVerifyStaticSmem <= kSmallSmemLimit, "MLA small config must fit sm_120");
static_assert(kTileConfigs[kGqa64].smem_bytes() + kVerifyStaticSmem <= kSmallSmemLimit, "GQA d64 config must fit sm_120");
static_assert(kTileConfigs[kGqa128].smem_bytes() + kVerifyStaticSmem <= kSmallSmemLimit, "GQA d128 config must fit sm_120");
static_assert(kTileConfigs[kGqa256].smem_bytes() + kVerifyStaticSmem <= kSmallSmemLimit, "GQA d256 config must fit sm_120");
static_assert(kTileConfigs[kGqa128Bm32].smem_bytes() + kVerifyStaticSmem <= kSmallSmemLimit, "must fit sm_120");
static_assert(kTileConfigs[kGqa128Bn32].smem_bytes() + kVerifyStaticSmem <= kSmallSmemLimit, "must fit sm_120");
// two CTAs a multiprocessor on sm_90 (228 KB a multiprocessor, 1 KB reserved a block, 384 bytes static)
static_assert(2 * (kTileConfigs[kGqa128Bm32S3].smem_bytes() + 1024 + kVerifyStaticSmem) <= 233472, "two CTAs must fit an sm_90 SM");
static_assert(kTileConfigs[kGqa256Bn32].smem_bytes() > kSmallSmemLimit, "large_smem is right for it");
static_assert(2 * (kTileConfigs[kGqaWg128].smem_bytes() + 1024 + kVerifyStaticSmem) <= 233472, "two CTAs must fit an sm_90 SM");
static_assert(2 * (kTileConfigs[kGqa256Bn32].smem_bytes() + 1024 + kVerifyStaticSmem) <= 233472, "two CTAs must fit an sm_90 SM");
static_assert(kTileConfigs[kGqaWg128S5].smem_bytes() + 1024 + 512 <= 232448, "fits an sm_90 block");
static_assert(kTileConfigs[kGqaWg256].smem_bytes() + 1024 + 512 <= 232448, "fits an sm_90 block");
static_assert(kTileConfigs[kGqa256Bn64].smem_bytes() == kTileConfigs[kGqaWg256].smem_bytes(), "one plan");

}  // namespace fv
