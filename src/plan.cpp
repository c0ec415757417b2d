#include "plan.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common.h"
#include "partition.h"

namespace fv {
namespace {

constexpr std::size_t kAlign = 256;

std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// CTAs of `cfg` that fit on one multiprocessor at once: shared memory, threads (2048 per SM), and
// registers (a config whose __launch_bounds__ asks for one block a SM may use all 255 registers).
int estimate_ctas_per_sm(const TileConfig& cfg, const DeviceProps& props) {
  const int smem_per_sm = props.max_smem_per_sm > 0 ? props.max_smem_per_sm : props.max_smem_per_block;
  // the driver reserves 1 KB of shared memory per block
  const int by_smem = static_cast<int>(smem_per_sm / (cfg.smem_bytes() + 1024));
  const int by_threads = 2048 / cfg.threads();
  const int regs_per_thread = std::min(255, 65536 / (cfg.threads() * cfg.min_blocks_per_sm));
  const int by_regs = 65536 / (cfg.threads() * regs_per_thread);
  return std::max(1, std::min({by_smem, by_threads, std::max(1, by_regs)}));
}

// A CTA's shared memory per block: the configuration's dynamic bytes and the kernels' static ones. Every check against
// the device's limit counts this (v59: three counted the dynamic bytes alone)
std::size_t block_smem(const TileConfig& c) { return c.smem_bytes() + kVerifyStaticSmem; }
bool smem_fits(const TileConfig& c, const DeviceProps& props) {
  return static_cast<std::size_t>(props.max_smem_per_block) >= block_smem(c);
}

bool fits(const TileConfig& c, const DeviceProps& props) {
  if (!smem_fits(c, props)) return false;
  // the Hopper kernels (MLA, GQA d128 / d256): sm_90a machine code, present when the library was built for sm_90
  if (c.id == kMlaWg || c.id == kGqaWg128 || c.id == kGqaWg128S5 || c.id == kGqaWg256)
    return props.wg_kernel && props.cc_major == 9 && props.cc_minor == 0;
  return !c.large_smem || (props.cc_major >= 9 && props.cc_major < 12 && props.large_kernels);
}

// The 2-CTA variants (gqa128_bm32_bn64_s3, gqa256_bm64_bn32_s2) pay off only with two CTAs a multiprocessor: on a
// device that fits one, the 99 KB tile (two CTAs) keeps more work in flight
bool fits_two(const TileConfig& c, const DeviceProps& props, const fv_problem& p) {
  return p.profile != FV_PROFILE_SMALL_SMEM && fits(c, props) && estimate_ctas_per_sm(c, props) >= 2;
}

const TileConfig* choose_config(const fv_problem& p, const DeviceProps& props, fv_status* status) {
  *status = FV_OK;
  // Tuning hook for benchmark sweeps: FLASHVERIFY_CONFIG=<config name> forces a configuration of the
  // same head dims that fits the device; anything else is ignored.
  if (const char* forced = std::getenv("FLASHVERIFY_CONFIG")) {
    for (const TileConfig& c : kTileConfigs)
      if (std::strcmp(c.name, forced) == 0 && c.dqk == p.head_dim_qk && c.dv == p.head_dim_v && fits(c, props))
        return &c;
  }
  const bool mla = is_mla_dims(p.head_dim_qk, p.head_dim_v);
  if (mla) {
    const TileConfig& large = kTileConfigs[kMlaLarge];
    const TileConfig& small = kTileConfigs[kMlaSmall];
    // the large config's kernel body is compiled for sm_90 and sm_100 only (tile_config.h)
    const bool large_fits =
        props.cc_major >= 9 && props.cc_major < 12 && props.large_kernels && smem_fits(large, props);
    // the Hopper (wgmma) kernel in the large tile's place wherever it applies (an sm_90 device, a library built
    // for sm_90, one KV head): measured 1.3x (b1) to 1.7x (B16) the large tile (H200, bench/NOTES.md v12).
    // FLASHVERIFY_WGMMA=0 keeps the mma.sync tile (benchmark A/B); read per call, like FLASHVERIFY_COMBINE_WPR.
    // The dispatcher keeps the mma.sync tile for what the Hopper kernel does not implement (dispatch.cu).
    const bool wg_wanted = env_on_unless_0("FLASHVERIFY_WGMMA");
    const TileConfig& large_or_wg =
        wg_wanted && p.num_kv_heads == 1 && fits(kTileConfigs[kMlaWg], props) ? kTileConfigs[kMlaWg] : large;
    if (p.profile == FV_PROFILE_LARGE_SMEM) {
      if (!large_fits) {
        *status = fail(FV_ERR_UNSUPPORTED,
                       "problem.profile = FV_PROFILE_LARGE_SMEM needs %zu bytes of shared memory per block on "
                       "sm_90/sm_100; this GPU (sm_%d%d) allows %d",
                       block_smem(large), props.cc_major, props.cc_minor, props.max_smem_per_block);
        return nullptr;
      }
      return &large_or_wg;
    }
    if (p.profile == FV_PROFILE_AUTO && large_fits) return &large_or_wg;
    if (!smem_fits(small, props)) {
      *status = fail(FV_ERR_NO_DEVICE, "the GPU allows %d bytes of shared memory per block; MLA needs %zu",
                     props.max_smem_per_block, block_smem(small));
      return nullptr;
    }
    return &small;
  }
  const TileConfig* cfg = nullptr;
  // a GQA Hopper kernel is wanted and fits: FLASHVERIFY_WGMMA=0 keeps the mma.sync tiles, the 99 KB profile too
  auto hopper = [&](int id) {
    return env_on_unless_0("FLASHVERIFY_WGMMA") && p.profile != FV_PROFILE_SMALL_SMEM && fits(kTileConfigs[id], props);
  };
  switch (p.head_dim_qk) {
    case 64: cfg = &kTileConfigs[kGqa64]; break;
    case 128: {
      // a 32-row tile when every request's rows (group x drafts) fit in it, with 3 stages where two such CTAs
      // fit a multiprocessor and the caller did not ask for the 99 KB configurations. One request on one KV head
      // with 33-64 rows and 16-bit pools takes two 32-row tiles (2 stages) instead of one 64-row tile: the call is a
      // chain of latencies, and twice the CTAs of half the work each shorten it although every CTA pair reads the
      // same keys (the second time from L2). H200 (bench/NOTES.md v16): GQA 8/1 d128 N=8 P=32K b1 22.0-22.4 vs
      // 23.1-23.4 us (3 stages: 22.7). Not where the grid has more row work already: GQA 16/2 b1 30.8 vs 29.5,
      // 8/1 B=2 30.7 vs 29.6, B=4 47.3 vs 39.1, B=16 145 vs 105; and not with fp8 pools (25.9 vs 24.5: the 64-row
      // tile widens in shared memory, the 32-row one in registers)
      const int rows = (p.num_q_heads / p.num_kv_heads) * p.max_draft;
      const bool one_head_b1 = rows <= 64 && p.batch_size == 1 && p.num_kv_heads == 1;
      if (rows <= 32)
        cfg = &kTileConfigs[fits_two(kTileConfigs[kGqa128Bm32S3], props, p) ? kGqa128Bm32S3 : kGqa128Bm32];
      else if (one_head_b1 && p.kv_dtype != FV_DTYPE_FP8_E4M3)
        cfg = &kTileConfigs[kGqa128Bm32];
      else if (one_head_b1 && hopper(kGqaWg128S5))
        // fp8 pools, one request on one KV head: the 5-stage Hopper kernel (one CTA a multiprocessor, four steps in
        // flight; the rows widened in shared memory as in the 2-stage kernel). H200, graph us (bench/NOTES.md v31):
        // GQA 8/1 N=8 b1 20.9 vs 22.3 (2 stages; 16-bit pools' two 32-row tiles: 21.3), but B=4 45.3 vs 37.2 and
        // B=16 129.5 vs 99.9, so batch 1 only
        cfg = &kTileConfigs[kGqaWg128S5];
      else if (hopper(kGqaWg128))
        // the Hopper kernel (wgmma) in the 64-row tile's place on an sm_90 device whose library holds it (the
        // dispatcher keeps the mma.sync tile, whose plan is the same, for score modifiers other than fp8 pools' scales).
        // H200, graph us, against the mma.sync tile (bench/NOTES.md v28): GQA 8/1 N=8 B=16 95.3 vs 105.0, N=32 B=16
        // 272.7 vs 349, B=2 28.9 vs 29.5, GQA 16/2 b1 29.0 vs 29.6; not at batch 1 of one KV head with 16-bit pools
        // (22.5 vs 21.3 for the two 32-row tiles above). fp8 pools (rows widened in shared memory; v30): GQA 8/1 N=8
        // B=16 99.8 vs 141.0, B=4 37.0 vs 46.9, b1 22.4 vs 23.7; not for 32 rows or fewer (GQA 32/8 B=16 675 vs 519
        // on the 32-row tile). FLASHVERIFY_WGMMA=0 keeps the mma.sync tile.
        cfg = &kTileConfigs[kGqaWg128];
      else
        cfg = &kTileConfigs[kGqa128];
      break;
    }
    case 256:
      // the Hopper kernel (wgmma, 64-key steps, one ~170 KB CTA a multiprocessor) on an sm_90 device whose library
      // holds it; the dispatcher takes the 64-key d256 mma.sync tile of the same plan for score modifiers other than
      // fp8 pools' scales. H200, graph us, against the 32-key tile (bench/NOTES.md v29): GQA 8/1 N=8 B=16 156.5 vs
      // 251.8, 16/2 B=16 281.9 vs 474.1, 8/1 b1 27.8 vs 40.2 (the 64-key mma.sync tile: 191.8, 359.1, 29.2); fp8
      // pools against the 64-key mma.sync tile (v30): B=16 171.3 vs 283.3, b1 27.0 vs 34.2.
      // FLASHVERIFY_WGMMA=0 keeps the tiles below.
      if (hopper(kGqaWg256)) {
        cfg = &kTileConfigs[kGqaWg256];
        break;
      }
      // on sm_90 otherwise (a library without the Hopper kernel, FLASHVERIFY_WGMMA=0) the 64-key mma.sync
      // tile: H200, graph us, against the 32-key tile (bench/NOTES.md v29): fp8 pools GQA 8/1 N=8 B=16 281.8 vs 322.7,
      // b1 33.8 vs 42.8; 16-bit pools B=16 191.8 vs 251.8, B=4 61.6 vs 82.0, b1 29.2 vs 40.2
      if (props.cc_major == 9 && p.profile != FV_PROFILE_SMALL_SMEM && fits(kTileConfigs[kGqa256Bn64], props)) {
        cfg = &kTileConfigs[kGqa256Bn64];
        break;
      }
      // 32-key steps where two 104 KB CTAs fit a multiprocessor and the caller did not ask for the 99 KB
      // configurations
      cfg = &kTileConfigs[fits_two(kTileConfigs[kGqa256Bn32], props, p) ? kGqa256Bn32 : kGqa256];
      break;
    default:
      *status = fail(FV_ERR_UNSUPPORTED_HEAD_DIM, "no fast kernel for head_dim_qk %d", p.head_dim_qk);
      return nullptr;
  }
  if (!smem_fits(*cfg, props)) {
    *status = fail(FV_ERR_NO_DEVICE, "the GPU allows %d bytes of shared memory per block; %s needs %zu",
                   props.max_smem_per_block, cfg->name, block_smem(*cfg));
    return nullptr;
  }
  return cfg;
}

}  // namespace

int choose_num_parts(int64_t base, int64_t target) {
  if (base <= 0 || target <= 0) return 1;
  // Fill the GPU: as many partitions as make base * parts close to (a multiple of) the resident CTAs.
  // Fewer partitions mean fewer partial states to write and merge, so take the smallest count whose
  // last wave is at least 90% full, searching a little above the plain quotient.
  const int64_t p0 = std::max<int64_t>(1, target / base);
  auto efficiency = [&](int64_t parts) {
    const int64_t ctas = base * parts;
    return double(ctas) / double(ceil_div(ctas, target) * target);
  };
  int64_t best = p0;
  for (int64_t parts = p0; parts <= 2 * p0 + 4; ++parts) {
    if (efficiency(parts) >= 0.9) return static_cast<int>(std::min<int64_t>(parts, 4096));
    if (efficiency(parts) > efficiency(best) + 1e-9) best = parts;
  }
  return static_cast<int>(std::min<int64_t>(best, 4096));
}

fv_status make_plan(const fv_problem& p, const DeviceProps& props, Plan* plan) {
  *plan = Plan{};
  plan->group = p.num_q_heads / p.num_kv_heads;
  int impl = p.impl;
  if (impl == FV_IMPL_AUTO) impl = p.device == FV_DEVICE_CPU ? FV_IMPL_ORACLE : FV_IMPL_FAST;
  plan->impl = impl;
  // the naive kernel's grid: one block per (request, draft slot) in x, per q head in y (CUDA's limits: 2^31 - 1 and
  // 65535); beyond them a launch would fail or, where x wraps, leave rows unwritten
  if (impl == FV_IMPL_NAIVE && p.device == FV_DEVICE_CUDA &&
      (int64_t(p.batch_size) * p.max_draft > 0x7fffffff || p.num_q_heads > 65535))
    return fail(FV_ERR_UNSUPPORTED,
                "the naive kernel launches batch_size x max_draft (%d x %d) by num_q_heads (%d) blocks: at most "
                "2^31 - 1 by 65535",
                p.batch_size, p.max_draft, p.num_q_heads);
  if (impl == FV_IMPL_ORACLE || impl == FV_IMPL_NAIVE) return FV_OK;  // no workspace

  // every size below is a product of these: keep them far from int64's range (a wrapped product once passed the
  // combine-grid guard and gave a wrapped workspace size)
  const double out_elems = double(p.batch_size) * p.max_draft * p.num_q_heads * std::max(p.head_dim_qk, p.head_dim_v);
  if (out_elems > 0x1p52)
    return fail(FV_ERR_UNSUPPORTED,
                "batch_size %d x max_draft %d x num_q_heads %d x head dim %d is more than the fast kernel handles (2^52 "
                "elements)", p.batch_size, p.max_draft, p.num_q_heads, std::max(p.head_dim_qk, p.head_dim_v));

  fv_status st;
  const TileConfig* cfg = choose_config(p, props, &st);
  if (!cfg) return st;
  plan->cfg = cfg;
  // (benchmark sweeps: 1..kMaxTuningEnv, read per call)
  plan->overhead = env_int_in("FLASHVERIFY_OVERHEAD", 1, kMaxTuningEnv, cfg->overhead);
  plan->min_part_cost = env_int_in("FLASHVERIFY_MIN_PART_COST", 1, kMaxTuningEnv, cfg->min_part_cost);
  // the device planner sums the requests' costs (key steps plus the request overhead, partition.h) in int32: with the
  // call's tokens below kMaxBatchTokens (flashverify.h; check mode enforces it) the sum stays below
  // kMaxBatchTokens / bn + batch_size x (overhead + 1)
  if (kMaxBatchTokens / cfg->bn + int64_t(p.batch_size) * (plan->overhead + 1) > INT32_MAX)
    return fail(FV_ERR_UNSUPPORTED,
                "batch_size %d is more than the fast kernel's planner counts (%s, request overhead %d: at most %lld "
                "requests; it sums their costs in int32)", p.batch_size, cfg->name, plan->overhead,
                static_cast<long long>((INT32_MAX - kMaxBatchTokens / cfg->bn) / (plan->overhead + 1)));
  // fp8 pools on the 32-row d128 tiles: batches of at most kFp8NarrowMaxBatch take the kernel with 64-key compact
  // steps in the model's dtype (verify_kernel_narrow), larger ones the wide steps. H200, GQA 32/8 N=8 P=32K, bf16 /
  // fp16 model, narrow vs wide (bench/NOTES.md v19): b1 51.8 / 49.9 vs 70.0 / 66.0 us, B=2 88.8 vs 116.5, B=4
  // 155.4 / 148.0 vs 172.5 / 166.4, B=8 286.0 / 268.8 vs 284.3 / 272.5 (even), B=16 554.5 / 515.5 vs 515.7 / 493.9;
  // GQA 4/1 b1 22.6 vs 34.3. FLASHVERIFY_FP8_WIDE=0 / 1 forces the narrow / wide kernel (benchmark A/B, tests); read
  // per call.
  if (p.kv_dtype == FV_DTYPE_FP8_E4M3 && has_fp8_narrow_kernel(cfg->id)) {
    plan->fp8_narrow = p.batch_size <= kFp8NarrowMaxBatch;
    if (const char* v = std::getenv("FLASHVERIFY_FP8_WIDE")) {
      if (std::strcmp(v, "0") == 0) plan->fp8_narrow = true;
      if (std::strcmp(v, "1") == 0) plan->fp8_narrow = false;
    }
  }
  plan->m_tiles = static_cast<int>(ceil_div(int64_t(plan->group) * p.max_draft, cfg->bm));
  // fp8 pools on the 2-stage Hopper GQA kernels (d128, d256): their RING kernels (verify_wg.cuh: the next step widened
  // off the step's chain) only where FLASHVERIFY_GQA8_RING=1 asks for them (read per call). They win only where every
  // partition is long, which depends on the prefix lengths, device data the planner does not see. H200, GQA 8/1 N=8,
  // graph us, RING / the 2-stage kernel, request overhead 4 (bench/NOTES.md v34): P=32K B=16 bf16 model 94.7 / 99.8
  // (16-bit pools 95.0), fp16 model 91.9 / 98.8, B=4 39.7 / 36.6; P=4K B=16 31.8 / 28.2; d256 P=32K B=16 157.6 / 169.5,
  // B=8 95.9 / 96.7 (v33, overhead 1: B=4 64.5 / 55.9, b1 37.7 / 27.1). (The dispatcher keeps the mma.sync tile for
  // score modifiers other than the scales, ring or not.)
  if (p.kv_dtype == FV_DTYPE_FP8_E4M3 && (cfg->id == kGqaWg128 || cfg->id == kGqaWg256)) {
    const char* v = std::getenv("FLASHVERIFY_GQA8_RING");
    plan->fp8_ring = v != nullptr && std::strcmp(v, "1") == 0;
  }
  plan->ctas_per_sm = estimate_ctas_per_sm(*cfg, props);
  const int64_t base = int64_t(plan->m_tiles) * p.num_kv_heads;
  plan->num_parts = p.num_kv_splits > 0 ? p.num_kv_splits
                                        : choose_num_parts(base, int64_t(props.num_sms) * plan->ctas_per_sm);
  // A request split k ways uses k partial slots; every partition boundary splits at most one request,
  // so split requests use at most 2 * (parts - 1) slots, and never more than B + parts - 1.
  const int64_t parts = plan->num_parts;
  plan->max_slots = parts > 1 ? std::min<int64_t>(2 * (parts - 1), int64_t(p.batch_size) + parts - 1) : 0;
  if (double(plan->max_slots) * p.max_draft * p.num_q_heads * p.head_dim_v * sizeof(float) > 0x1p60)
    return fail(FV_ERR_UNSUPPORTED, "the partial states of %lld splits x max_draft %d x num_q_heads %d x head_dim_v %d "
                "need more than 2^60 bytes of workspace", static_cast<long long>(plan->max_slots), p.max_draft,
                p.num_q_heads, p.head_dim_v);
  // Small batches skip the prepare kernel (one launch less: ~3-4 us at batch 1); FLASHVERIFY_INLINE_PLAN=0
  // turns that off (benchmark A/B).
  static const bool inline_allowed = env_on_unless_0("FLASHVERIFY_INLINE_PLAN");
  plan->inline_plan = inline_allowed && p.batch_size >= 1 && p.batch_size <= kInlinePlanMaxBatch &&
                      p.mask_kind != FV_MASK_PARENTS;
  // sm_90 - sm_11x: the combine launches as a programmatic dependent of the verify kernel, so its launch and
  // block scheduling overlap the verify grid's tail; only where the loaded combine kernel waits for it
  // (props.combine_waits). Not on sm_120 until it has been run there. FLASHVERIFY_PDL=0 turns it off.
  static const bool pdl_allowed = env_on_unless_0("FLASHVERIFY_PDL");
  plan->pdl = pdl_allowed && props.cc_major >= 9 && props.cc_major < 12 && props.combine_waits &&
              p.device == FV_DEVICE_CUDA;
  // One combine block per (row, 128 columns); when that leaves multiprocessors idle (batch 1 of a small
  // group: GQA 8/1 with 8 drafts is 64 blocks on 132 SMs), 32 columns a block: four times the blocks.
  // FLASHVERIFY_COMBINE_WIDE=1 keeps 128 (benchmark A/B).
  static const bool wide_only = env_is_1("FLASHVERIFY_COMBINE_WIDE");
  const int64_t wide_blocks = int64_t(p.batch_size) * p.max_draft * p.num_q_heads * std::max(1, p.head_dim_v / 128);
  plan->combine_cols = wide_blocks < int64_t(props.num_sms) && !wide_only ? 32 : std::min(128, p.head_dim_v);
  // Warps a combine unit: about one per 8 splits the unit's request is expected to have (a split request
  // holds one slot a partition it meets: (parts + B - 1) / B on average), so a batch of requests split a
  // few ways merges with one warp a row (16 rows a block) instead of a block a row, and a request expected
  // to be split more than 64 ways (batch 1 of a long prefix) gets 16. A request split far more ways than
  // the average (a ragged batch) still merges, a warp taking several rounds of 8 loads. The count uses the
  // planned partitions; the device may use fewer (min_part_cost), which only makes wpr larger than needed.
  // FLASHVERIFY_COMBINE_WPR=1|2|4|8|16 forces it (benchmark A/B, tests).
  const int64_t expected_splits = ceil_div(parts + p.batch_size - 1, std::max(1, p.batch_size));
  plan->combine_wpr = 1;
  while (plan->combine_wpr < kCombineBlockWarps && int64_t(plan->combine_wpr) * kCombineBatch < expected_splits)
    plan->combine_wpr *= 2;
  // A block a unit (16 warps) that needs more than one wave of resident combine blocks (DeviceProps::
  // combine_blocks_per_sm a multiprocessor) waits for a second wave; 8 warps a unit (two units a block) halves
  // the grid. Measured (H200, bench/NOTES.md v11): MLA Hq16 N8 b1, 512 units on 264 resident blocks,
  // 54.6 -> 52.9 us with 8 warps a unit.
  int64_t units = int64_t(p.batch_size) * p.max_draft * p.num_q_heads * (p.head_dim_v / plan->combine_cols);
  if (plan->combine_wpr == kCombineBlockWarps && units > int64_t(props.combine_blocks_per_sm) * props.num_sms) {
    plan->combine_wpr = kCombineBlockWarps / 2;
    // the 8 warps of a unit in a block of their own (256 threads, one unit a block) instead of two units a
    // 512-thread block: the v12 MLA b1 trace showed one 512-thread block resident a multiprocessor at a time
    // (two combine waves); with 256-thread blocks the merge runs in one wave, MLA Hq16 N8 b1 39.7 vs 40.4 us
    // (H200, bench/NOTES.md v13). FLASHVERIFY_COMBINE_BLOCK8=0 keeps two units a block (benchmark A/B)
    plan->combine_block8 = env_on_unless_0("FLASHVERIFY_COMBINE_BLOCK8");
  }
  if (const char* v = std::getenv("FLASHVERIFY_COMBINE_WPR")) {
    const int w = std::atoi(v);
    if (w == 1 || w == 2 || w == 4 || w == 8 || w == 16) {  // (any other value is ignored)
      plan->combine_wpr = w;
      if (w != 8) plan->combine_block8 = false;
    }
  }
  // 256-column units: where units of 128 columns, a warp each (wpr 1), need more warps than the resident combine
  // blocks hold (MLA Hq16 N8 B16: 8192 units against 264 blocks of 16 warps on the H200), a warp merges 256
  // columns of its row: half the warps, so one wave of blocks instead of two (bench/NOTES.md v26). Its batches hold
  // 4 splits instead of 8 (combine.cuh). FLASHVERIFY_COMBINE_COLS=128 keeps 128 columns; =256 takes 256 wherever
  // the kernel has them (Dv 256 or 512, wpr < 16 in 16-warp blocks: benchmark A/B, tests).
  int cols_env = 0;
  if (const char* v = std::getenv("FLASHVERIFY_COMBINE_COLS")) cols_env = std::atoi(v);
  const bool c256_fits = plan->combine_cols == 128 && p.head_dim_v % 256 == 0 && plan->combine_wpr < kCombineBlockWarps;
  const int64_t resident_warps = int64_t(props.combine_blocks_per_sm) * props.num_sms * kCombineBlockWarps;
  if (c256_fits && (cols_env == 256 || (cols_env != 128 && plan->combine_wpr == 1 && units > resident_warps))) {
    plan->combine_cols = 256;
    plan->combine_block8 = false;
    units /= 2;
  }
  // launch limits: the verify grid is (m_tiles, parts <= 4096, Hkv), the combine grid one-dimensional
  if (p.num_kv_heads > 65535)
    return fail(FV_ERR_UNSUPPORTED, "num_kv_heads %d is more than the grid allows (65535)", p.num_kv_heads);
  if (plan->max_slots > 0) {
    plan->combine_blocks = plan->combine_block8 ? units : ceil_div(units, kCombineBlockWarps / plan->combine_wpr);
    if (plan->combine_blocks > INT32_MAX)
      return fail(FV_ERR_UNSUPPORTED,
                  "batch_size %d x max_draft %d x num_q_heads %d needs %lld combine blocks, more than a grid holds "
                  "(2^31 - 1): lower max_draft to the largest draft count of the batch",
                  p.batch_size, p.max_draft, p.num_q_heads, static_cast<long long>(plan->combine_blocks));
  }
  if ((p.mask_kind == FV_MASK_BYTES && !plan->inline_plan) || p.mask_kind == FV_MASK_PARENTS)
    plan->mask_words = static_cast<int>(ceil_div(p.max_draft, 32));

  const int64_t rows = int64_t(p.batch_size) * p.max_draft;  // token rows the batch can hold
  std::size_t off = 0;
  plan->off_sched = off;
  off = align_up(off + sizeof(int32_t) * SchedLayout::words(p.batch_size));
  plan->off_bits = off;
  off = align_up(off + sizeof(uint32_t) * std::size_t(rows) * plan->mask_words);
  plan->off_part_lse = off;
  off = align_up(off + sizeof(float) * std::size_t(plan->max_slots) * p.max_draft * p.num_q_heads);
  plan->off_part_o = off;
  off = align_up(off + sizeof(float) * std::size_t(plan->max_slots) * p.max_draft * p.num_q_heads * p.head_dim_v);
  plan->total = off;
  return FV_OK;
}

}  // namespace fv
