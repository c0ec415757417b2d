// The planner (tile configuration, partitions, workspace layout) for an H200 and an sm_120 card, and the
// partition arithmetic the GPU scheduler and kernel run (src/partition.h), checked exhaustively on
// random batches: every key step of every request is computed by exactly one partition, and the split
// counts and partial-state slots match what the kernels index.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common.h"
#include "partition.h"
#include "plan.h"
#include "testkit.h"
#include "tile_config.h"

namespace {

const fv::DeviceProps kH200{132, 232448, 233472, 9, 0};
const fv::DeviceProps kSm120{188, 101376, 102400, 12, 0};
const fv::DeviceProps kA100{108, 166912, 167936, 8, 0};

fv_problem mla_problem(int hq, int n, int b) {
  fv_problem p;
  fv_problem_init(&p);
  p.dtype = FV_DTYPE_BF16;
  p.batch_size = b;
  p.max_draft = n;
  p.num_q_heads = hq;
  p.num_kv_heads = 1;
  p.head_dim_qk = 576;
  p.head_dim_v = 512;
  return p;
}

// GQA / MHA with Hq q heads over Hkv KV heads of head dim d
fv_problem gqa_problem(int hq, int hkv, int d, int n, int b) {
  fv_problem p = mla_problem(hq, n, b);
  p.num_kv_heads = hkv;
  p.head_dim_qk = p.head_dim_v = d;
  return p;
}

TEST(Plan, ConfigsFitTheirTargets) {
  for (const fv::TileConfig& c : fv::kTileConfigs) {
    SCOPED_TRACE(c.name);
    if (c.large_smem) EXPECT_LE(c.smem_bytes(), 232448u);
    else EXPECT_LE(c.smem_bytes(), fv::kSmallSmemLimit) << "must fit sm_120's 99 KB";
    EXPECT_EQ(c.bm / c.wm, 16);
    EXPECT_EQ(c.wm * c.wn, c.wom * c.won);
    EXPECT_EQ(c.bn % 16, 0);
  }
}

TEST(Plan, MlaOnH200UsesLargeTiles) {
  fv::Plan plan;
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kMlaLarge);
  EXPECT_EQ(plan.m_tiles, 2);          // 16 heads x 8 drafts = 128 rows
  EXPECT_EQ(plan.ctas_per_sm, 1);
  EXPECT_EQ(plan.num_parts, 66);       // 2 x 66 = 132 CTAs, one per SM
  EXPECT_EQ(plan.max_slots, 66);       // min(2 * 65, B + 65)
  EXPECT_TRUE(plan.inline_plan);     // batch 1: no prepare kernel, the byte mask is read in place
  EXPECT_EQ(plan.mask_words, 0);
  // layout: scheduler words, converted mask bits, partial lse, partial o; 256-byte aligned
  EXPECT_EQ(plan.off_sched, 0u);
  EXPECT_EQ(plan.off_bits % 256, 0u);
  EXPECT_GE(plan.off_part_o - plan.off_part_lse, 66u * 8 * 16 * 4);
  EXPECT_GE(plan.total - plan.off_part_o, 66u * 8 * 16 * 512 * 4);
  EXPECT_LT(plan.total - plan.off_part_o, 66u * 8 * 16 * 512 * 4 + 256);
}

TEST(Plan, InlinePlanningOnlyForSmallBatchesWithoutParentArrays) {
  fv::Plan plan;
  fv_problem p = mla_problem(16, 8, fv::kInlinePlanMaxBatch);
  ASSERT_EQ(fv::make_plan(p, kH200, &plan), FV_OK);
  EXPECT_TRUE(plan.inline_plan);
  EXPECT_EQ(plan.mask_words, 0);
  p.batch_size = fv::kInlinePlanMaxBatch + 1;  // the prepare kernel plans and converts the byte mask
  ASSERT_EQ(fv::make_plan(p, kH200, &plan), FV_OK);
  EXPECT_FALSE(plan.inline_plan);
  EXPECT_EQ(plan.mask_words, 1);
  p.batch_size = 2;
  p.mask_kind = FV_MASK_PARENTS;  // parent arrays are converted to bits by the prepare kernel
  ASSERT_EQ(fv::make_plan(p, kH200, &plan), FV_OK);
  EXPECT_FALSE(plan.inline_plan);
  EXPECT_EQ(plan.mask_words, 1);
}

TEST(Plan, ForcedProfilesAndDevices) {
  fv::Plan plan;
  fv_problem p = mla_problem(16, 8, 4);
  ASSERT_EQ(fv::make_plan(p, kSm120, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kMlaSmall);
  ASSERT_EQ(fv::make_plan(p, kA100, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kMlaSmall);  // 163 KB is not enough for the large tiles
  p.profile = FV_PROFILE_SMALL_SMEM;
  ASSERT_EQ(fv::make_plan(p, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kMlaSmall);
  p.profile = FV_PROFILE_LARGE_SMEM;
  EXPECT_EQ(fv::make_plan(p, kSm120, &plan), FV_ERR_UNSUPPORTED);
  fv_problem g = mla_problem(32, 8, 16);
  g.num_kv_heads = 8;
  for (int d : {64, 128, 256}) {
    g.head_dim_qk = g.head_dim_v = d;
    ASSERT_EQ(fv::make_plan(g, kSm120, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->dqk, d);
    EXPECT_LE(plan.cfg->smem_bytes(), fv::kSmallSmemLimit);
  }
}

TEST(Plan, GqaD128TileChoice) {
  fv::Plan plan;
  fv_problem g = gqa_problem(32, 8, 128, 8, 16);  // GQA 32/8 d128, 8 drafts: 4 x 8 = 32 rows
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32S3);  // 3 stages: 109 KB, two CTAs a multiprocessor
  EXPECT_EQ(plan.ctas_per_sm, 2);
  ASSERT_EQ(fv::make_plan(g, kSm120, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32);  // 99 KB: 2 stages
  ASSERT_EQ(fv::make_plan(g, kA100, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32);  // sm_80: the large-tile bodies are not compiled for it
  g.profile = FV_PROFILE_SMALL_SMEM;         // the 99 KB configurations on any GPU
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32);
  g.profile = FV_PROFILE_AUTO;
  g.num_q_heads = 64;                        // 8 x 8 = 64 rows
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128);
}

TEST(Plan, GqaD256TileChoice) {
  fv::Plan plan;
  fv_problem g = gqa_problem(8, 1, 256, 8, 16);  // GQA 8/1 d256, 8 drafts
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa256Bn64);  // sm_90: 64-key steps, 170 KB, one CTA a multiprocessor (measured there)
  EXPECT_EQ(plan.ctas_per_sm, 1);
  fv::DeviceProps sm100 = kH200;
  sm100.cc_major = 10;
  ASSERT_EQ(fv::make_plan(g, sm100, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa256Bn32);  // 32-key steps: 104 KB, two CTAs a multiprocessor
  EXPECT_EQ(plan.ctas_per_sm, 2);
  ASSERT_EQ(fv::make_plan(g, kSm120, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa256);  // 99 KB: 16-key steps
  ASSERT_EQ(fv::make_plan(g, kA100, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa256);  // sm_80: the large-tile bodies are not compiled for it
  g.profile = FV_PROFILE_SMALL_SMEM;
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa256);
  // a made-up cc 10 device with 164 KB a multiprocessor: one 104 KB CTA fits, so the variants that pay off only
  // with two CTAs a multiprocessor (d256 32-key steps, d128 3 stages) are not chosen
  g.profile = FV_PROFILE_AUTO;
  const fv::DeviceProps one_cta{132, 166912, 167936, 10, 0};
  ASSERT_EQ(fv::make_plan(g, one_cta, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa256);
  fv_problem d128 = gqa_problem(32, 8, 128, 8, 16);
  ASSERT_EQ(fv::make_plan(d128, one_cta, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32);
}

TEST(Plan, OlderPtxOnAnH200TakesNoLargeTiles) {
  // a library built without sm_90 code (an architecture list such as "80"), run on an H200: the driver JIT-compiles
  // the older PTX, in which the large-tile kernels are a trap (verify.cuh), so the device query clears large_kernels
  // (dispatch.cu) and the planner takes the 99 KB tiles, as on an sm_80 device
  fv::DeviceProps jit = kH200;
  jit.large_kernels = false;
  fv::Plan plan;
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), jit, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kMlaSmall);
  for (const fv_problem& g : {gqa_problem(8, 1, 256, 8, 16), gqa_problem(32, 8, 128, 8, 16), gqa_problem(8, 1, 128, 8, 1),
                              gqa_problem(8, 1, 128, 8, 16), gqa_problem(32, 8, 64, 8, 16)}) {
    ASSERT_EQ(fv::make_plan(g, jit, &plan), FV_OK);
    EXPECT_FALSE(plan.cfg->large_smem) << plan.cfg->name << " d" << g.head_dim_qk;
  }
  fv_problem large = mla_problem(16, 8, 1);
  large.profile = FV_PROFILE_LARGE_SMEM;  // asked for explicitly: refused with a reason, not a trap
  EXPECT_EQ(fv::make_plan(large, jit, &plan), FV_ERR_UNSUPPORTED);
  // the same problems with the large kernels present keep them (the query changes nothing then)
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kMlaLarge);
}

TEST(Plan, HugeShapesAreRejectedNotWrapped) {
  // products of batch, drafts, heads and head dim that would wrap int64 (a wrapped count once passed the combine
  // grid's guard and gave a wrapped workspace size)
  fv::Plan plan;
  fv_problem g = mla_problem(1 << 25, 65536, 1 << 20);
  g.num_kv_splits = 2049;
  EXPECT_EQ(fv::make_plan(g, kH200, &plan), FV_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(fv::last_error()).find("more than the fast kernel handles"), std::string::npos) << fv::last_error();
  g = mla_problem(1 << 26, 4096, 1);  // one request: the partial states of 4096 splits exceed 2^60 bytes instead
  g.num_kv_splits = 4096;
  EXPECT_EQ(fv::make_plan(g, kH200, &plan), FV_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(fv::last_error()).find("2^60 bytes"), std::string::npos) << fv::last_error();
}

TEST(Plan, GqaD128BatchOneTakesTwo32RowTiles) {
  // one request on one KV head with 33-64 rows (group x drafts) and 16-bit pools: two 32-row tiles of 2 stages
  // (bench/NOTES.md v16); batches, more KV heads, fp8 pools and more rows keep the 64-row tile (on an sm_90 device
  // whose library holds it: the Hopper kernel), 32 rows or fewer the 32-row tiles as before
  fv::Plan plan;
  fv_problem g = gqa_problem(8, 1, 128, 8, 1);  // GQA 8/1 d128, 8 drafts: 64 rows
  for (const fv::DeviceProps& dev : {kH200, kSm120, kA100}) {
    ASSERT_EQ(fv::make_plan(g, dev, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32);
    EXPECT_EQ(plan.m_tiles, 2);
  }
  g.max_draft = 5;  // 40 rows
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32);
  g.max_draft = 9;  // 72 rows
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128);
  g.max_draft = 8;
  g.batch_size = 2;
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128);
  g.batch_size = 1;
  g.num_q_heads = 16;  // GQA 16/2: 64 rows on each of two KV heads
  g.num_kv_heads = 2;
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128);
  g.num_q_heads = 8;
  g.num_kv_heads = 1;
  g.kv_dtype = FV_DTYPE_FP8_E4M3;
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128);
  fv::DeviceProps h200_wg = kH200;
  h200_wg.wg_kernel = true;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqaWg128S5);  // fp8 pools at batch 1 of one KV head: the 5-stage Hopper kernel
  EXPECT_EQ(plan.ctas_per_sm, 1);
  {
    const fvt::ScopedEnv off("FLASHVERIFY_WGMMA", "0");
    ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kGqa128);
  }
  g.batch_size = 2;  // ... not at batch 2
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqaWg128);
  g.batch_size = 1;
  g.kv_dtype = 0;
  g.max_draft = 4;  // 32 rows: the 3-stage 32-row tile where two CTAs fit
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32S3);
  EXPECT_EQ(plan.m_tiles, 1);
}

TEST(Plan, GqaD128HopperKernelChoice) {
  // the Hopper kernel (gqa128_wg_bm64_bn64_s2) takes the 64-row tile's place on an sm_90 device whose library holds
  // it, for 16-bit and fp8 pools, with the same plan; never for the 32-row tiles' cases (fp8 pools there too), the
  // 99 KB profile, other GPUs, or with FLASHVERIFY_WGMMA=0
  fv::Plan plan, mma;
  fv::DeviceProps h200_wg = kH200;
  h200_wg.wg_kernel = true;
  fv_problem g = gqa_problem(64, 8, 128, 8, 16);  // GQA 64/8, 8 drafts: 64 rows a KV head
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqaWg128);
  EXPECT_EQ(plan.ctas_per_sm, 2);
  ASSERT_EQ(fv::make_plan(g, kH200, &mma), FV_OK);  // a library without it
  EXPECT_EQ(mma.cfg->id, fv::kGqa128);
  EXPECT_EQ(plan.m_tiles, mma.m_tiles);
  EXPECT_EQ(plan.num_parts, mma.num_parts);
  EXPECT_EQ(plan.total, mma.total);
  g.max_draft = 32;  // 256 rows: four row tiles
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqaWg128);
  EXPECT_EQ(plan.m_tiles, 4);
  g.max_draft = 8;
  {
    const fvt::ScopedEnv off("FLASHVERIFY_WGMMA", "0");
    ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kGqa128);
  }
  g.kv_dtype = FV_DTYPE_FP8_E4M3;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqaWg128);
  g.num_q_heads = 32;  // GQA 32/8 with fp8 pools: 32 rows a KV head, the 32-row tile
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32S3);
  g.num_q_heads = 64;
  g.kv_dtype = 0;
  g.profile = FV_PROFILE_SMALL_SMEM;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128);
  g.profile = FV_PROFILE_AUTO;
  fv::DeviceProps sm100 = h200_wg;
  sm100.cc_major = 10;
  for (const fv::DeviceProps& dev : {sm100, kSm120, kA100}) {
    ASSERT_EQ(fv::make_plan(g, dev, &plan), FV_OK);
    EXPECT_NE(plan.cfg->id, fv::kGqaWg128);
  }
  g.batch_size = 1;  // GQA 8/1, one request: the two 32-row tiles
  g.num_q_heads = 8;
  g.num_kv_heads = 1;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32);
  g.num_q_heads = 32;  // GQA 32/8: 32 rows a KV head, the 32-row tile
  g.num_kv_heads = 8;
  g.batch_size = 16;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32S3);
  g.num_q_heads = 64;  // GQA 64/8 at batch 1: 64 rows on each of eight KV heads
  g.batch_size = 1;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqaWg128);
}

TEST(Plan, GqaD256HopperKernelChoice) {
  // the Hopper d256 kernel (gqa256_wg_bm64_bn64_s2, one CTA a multiprocessor) on an sm_90 device whose library holds
  // it, for 16-bit and fp8 pools at any batch; on sm_90 otherwise (FLASHVERIFY_WGMMA=0, a library without it) its
  // fallback, the 64-key mma.sync tile, whose plan is the same; the 99 KB profile and other GPUs keep the 32-key (two
  // CTAs) or 16-key (99 KB) tiles
  fv::Plan plan, mma;
  fv::DeviceProps h200_wg = kH200;
  h200_wg.wg_kernel = true;
  fv_problem g = gqa_problem(8, 1, 256, 8, 16);
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqaWg256);
  EXPECT_EQ(plan.ctas_per_sm, 1);
  {
    const fvt::ScopedEnv forced("FLASHVERIFY_CONFIG", "gqa256_bm64_bn64_s2");
    ASSERT_EQ(fv::make_plan(g, h200_wg, &mma), FV_OK);
    EXPECT_EQ(mma.cfg->id, fv::kGqa256Bn64);
    EXPECT_EQ(plan.num_parts, mma.num_parts);
    EXPECT_EQ(plan.total, mma.total);
  }
  g.batch_size = 1;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqaWg256);
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);  // a library without it
  EXPECT_EQ(plan.cfg->id, fv::kGqa256Bn64);
  {
    const fvt::ScopedEnv off("FLASHVERIFY_WGMMA", "0");
    ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kGqa256Bn64);
  }
  g.kv_dtype = FV_DTYPE_FP8_E4M3;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqaWg256);
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);  // a library without it
  EXPECT_EQ(plan.cfg->id, fv::kGqa256Bn64);
  g.kv_dtype = 0;
  g.profile = FV_PROFILE_SMALL_SMEM;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa256);
  g.profile = FV_PROFILE_AUTO;
  fv::DeviceProps sm100 = h200_wg;
  sm100.cc_major = 10;
  for (const fv::DeviceProps& dev : {sm100, kSm120, kA100}) {
    ASSERT_EQ(fv::make_plan(g, dev, &plan), FV_OK);
    EXPECT_NE(plan.cfg->id, fv::kGqaWg256);
    EXPECT_NE(plan.cfg->id, fv::kGqa256Bn64);
  }
}

TEST(Plan, Fp8ThirtyTwoRowTilesTakeTheNarrowKernelAtSmallBatches) {
  // fp8 pools on the 32-row d128 tiles: 64-key compact steps (verify_kernel_narrow) up to kFp8NarrowMaxBatch
  // requests, wide steps above (bench/NOTES.md v19); FLASHVERIFY_FP8_WIDE=0 / 1 forces either; nothing else changes
  fv::Plan plan;
  fv_problem g = gqa_problem(32, 8, 128, 8, 1);  // 32 rows a KV head
  g.kv_dtype = FV_DTYPE_FP8_E4M3;
  for (const fv::DeviceProps& dev : {kH200, kSm120, kA100})
    for (int b : {1, fv::kFp8NarrowMaxBatch, fv::kFp8NarrowMaxBatch + 1, 16}) {
      g.batch_size = b;
      ASSERT_EQ(fv::make_plan(g, dev, &plan), FV_OK);
      EXPECT_TRUE(fv::has_fp8_narrow_kernel(plan.cfg->id));
      EXPECT_EQ(plan.fp8_narrow, b <= fv::kFp8NarrowMaxBatch) << b;
      const fv::Plan auto_plan = plan;
      {
        const fvt::ScopedEnv wide("FLASHVERIFY_FP8_WIDE", "1");
        ASSERT_EQ(fv::make_plan(g, dev, &plan), FV_OK);
        EXPECT_FALSE(plan.fp8_narrow);
        EXPECT_EQ(plan.cfg, auto_plan.cfg);
        EXPECT_EQ(plan.num_parts, auto_plan.num_parts);
        EXPECT_EQ(plan.total, auto_plan.total);
      }
      const fvt::ScopedEnv narrow("FLASHVERIFY_FP8_WIDE", "0");
      ASSERT_EQ(fv::make_plan(g, dev, &plan), FV_OK);
      EXPECT_TRUE(plan.fp8_narrow);
      EXPECT_EQ(plan.num_parts, auto_plan.num_parts);
    }
  // 16-bit pools and the 64-row tile never take it, whatever the environment says
  const fvt::ScopedEnv narrow("FLASHVERIFY_FP8_WIDE", "0");
  g.batch_size = 1;
  g.kv_dtype = 0;
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_FALSE(plan.fp8_narrow);
  g.kv_dtype = FV_DTYPE_FP8_E4M3;
  g.num_q_heads = 8;  // GQA 8/1 at batch 1 with fp8 pools: 64 rows, the 64-row tile
  g.num_kv_heads = 1;
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128);
  EXPECT_FALSE(plan.fp8_narrow);
  // the Hopper MLA kernel has one fp8 kernel a row alignment (the dispatcher's choice, bench/NOTES.md v21), none by
  // batch: FLASHVERIFY_FP8_WIDE changes nothing there
  fv::DeviceProps h200_wg = kH200;
  h200_wg.wg_kernel = true;
  for (int b : {1, 4, 16}) {
    fv_problem m = mla_problem(16, 64, b);
    m.kv_dtype = FV_DTYPE_FP8_E4M3;
    ASSERT_EQ(fv::make_plan(m, h200_wg, &plan), FV_OK);
    ASSERT_EQ(plan.cfg->id, fv::kMlaWg);
    EXPECT_FALSE(fv::has_fp8_narrow_kernel(plan.cfg->id));
    EXPECT_FALSE(plan.fp8_narrow) << b;
    const fv::Plan auto_plan = plan;
    for (const char* v : {"0", "1"}) {
      const fvt::ScopedEnv forced("FLASHVERIFY_FP8_WIDE", v);
      ASSERT_EQ(fv::make_plan(m, h200_wg, &plan), FV_OK);
      EXPECT_EQ(plan.cfg, auto_plan.cfg);
      EXPECT_FALSE(plan.fp8_narrow) << b << " " << v;
      EXPECT_EQ(plan.num_parts, auto_plan.num_parts);
    }
  }
}

TEST(Plan, Fp8HopperGqaRingKernelsOnlyWhenAskedFor) {
  // fp8 pools on the 2-stage Hopper GQA kernels (d128, d256): the RING kernels only with FLASHVERIFY_GQA8_RING=1 (they
  // win only where every partition is long: bench/NOTES.md v33), which changes nothing else; 16-bit pools, the 5-stage
  // kernel (fp8 at batch 1 of one KV head) and the other tiles never take them
  fv::Plan plan;
  fv::DeviceProps h200_wg = kH200;
  h200_wg.wg_kernel = true;
  for (int d : {128, 256})
    for (int hkv : {1, 2})
      for (int b : {1, 2, 4, 7, 8, 15, 16, 32}) {
        fv_problem g = gqa_problem(8 * hkv, hkv, d, 8, b);
        g.kv_dtype = FV_DTYPE_FP8_E4M3;
        ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
        const bool two_stage = plan.cfg->id == fv::kGqaWg128 || plan.cfg->id == fv::kGqaWg256;
        EXPECT_EQ(two_stage, !(d == 128 && hkv == 1 && b == 1)) << d << " " << hkv << " " << b;
        EXPECT_FALSE(plan.fp8_ring) << d << " " << hkv << " " << b;
        const fv::Plan auto_plan = plan;
        for (const char* v : {"0", "1", "yes"}) {
          const fvt::ScopedEnv forced("FLASHVERIFY_GQA8_RING", v);
          ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
          EXPECT_EQ(plan.fp8_ring, two_stage && std::string(v) == "1") << d << " " << hkv << " " << b << " " << v;
          EXPECT_EQ(plan.cfg, auto_plan.cfg);
          EXPECT_EQ(plan.num_parts, auto_plan.num_parts);
          EXPECT_EQ(plan.total, auto_plan.total);
        }
        g.kv_dtype = 0;
        const fvt::ScopedEnv forced("FLASHVERIFY_GQA8_RING", "1");
        ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
        EXPECT_FALSE(plan.fp8_ring) << "16-bit pools " << d << " " << hkv << " " << b;
      }
  // a library without the Hopper kernels, other GPUs, and 32 rows a KV head (the 32-row tiles)
  const fvt::ScopedEnv forced("FLASHVERIFY_GQA8_RING", "1");
  for (const fv::DeviceProps& dev : {kH200, kSm120, kA100})
    for (int d : {128, 256}) {
      fv_problem g = gqa_problem(8, 1, d, 8, 16);
      g.kv_dtype = FV_DTYPE_FP8_E4M3;
      ASSERT_EQ(fv::make_plan(g, dev, &plan), FV_OK);
      EXPECT_FALSE(plan.fp8_ring) << plan.cfg->name;
    }
  fv_problem g = gqa_problem(32, 8, 128, 8, 16);
  g.kv_dtype = FV_DTYPE_FP8_E4M3;
  ASSERT_EQ(fv::make_plan(g, h200_wg, &plan), FV_OK);
  EXPECT_FALSE(plan.fp8_ring) << plan.cfg->name;
}

TEST(Plan, ProgrammaticDependentLaunchOnlyWhereTheCombineWaits) {
  fv::Plan plan;
  const fv_problem p = mla_problem(16, 8, 1);
  fv::DeviceProps h200 = kH200, sm120 = kSm120, a100 = kA100;
  h200.combine_waits = sm120.combine_waits = a100.combine_waits = true;
  ASSERT_EQ(fv::make_plan(p, h200, &plan), FV_OK);
  EXPECT_TRUE(plan.pdl);
  ASSERT_EQ(fv::make_plan(p, sm120, &plan), FV_OK);
  EXPECT_FALSE(plan.pdl);  // not run on sm_120 yet
  ASSERT_EQ(fv::make_plan(p, a100, &plan), FV_OK);
  EXPECT_FALSE(plan.pdl);
  h200.combine_waits = false;  // e.g. a build with only sm_80 PTX, JIT-compiled on the H200
  ASSERT_EQ(fv::make_plan(p, h200, &plan), FV_OK);
  EXPECT_FALSE(plan.pdl);
}

// The GPU test EveryKernel forces each configuration with FLASHVERIFY_CONFIG on the GPU and asks fv_plan_config which
// one the planner took (since v54; a run that did not take it is counted as not run there); the planner must pick
// exactly the forced one for each of its head layouts, and ignore a name that does not match the head dims or does
// not fit the device.
TEST(Plan, ForcedConfigurationIsTakenForEveryKernelLayout) {
  static_assert(sizeof(fvt::kConfigLayouts) / sizeof(fvt::kConfigLayouts[0]) == fv::kNumConfigs,
                "every configuration");
  fv::Plan plan;
  fv::DeviceProps h200_wg = kH200;  // a library built for sm_90 holds the Hopper MLA kernel
  h200_wg.wg_kernel = true;
  for (const fvt::ConfigLayout& c : fvt::kConfigLayouts) {
    fv_problem p = mla_problem(c.hq, 8, 3);
    p.num_kv_heads = c.hkv;
    p.head_dim_qk = c.d;
    p.head_dim_v = c.mla ? 512 : c.d;
    const fvt::ScopedEnv forced("FLASHVERIFY_CONFIG", c.config);
    ASSERT_EQ(fv::make_plan(p, h200_wg, &plan), FV_OK) << c.config;
    EXPECT_STREQ(plan.cfg->name, c.config);
    // a large-smem tile forced on sm_120 is ignored: the planner's own choice, which fits 99 KB
    ASSERT_EQ(fv::make_plan(p, kSm120, &plan), FV_OK) << c.config;
    EXPECT_LE(plan.cfg->smem_bytes(), fv::kSmallSmemLimit) << c.config;
  }
  {
    // the Hopper MLA kernel needs the library to hold it and an sm_90 device; else the large tile
    const fvt::ScopedEnv forced("FLASHVERIFY_CONFIG", "mla576_wg_bm64_bn64_s2");
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 3), kH200, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kMlaLarge);
    fv::DeviceProps sm100 = h200_wg;
    sm100.cc_major = 10;
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 3), sm100, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kMlaLarge);
    // it shares the large tile's plan
    fv::Plan large;
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 3), h200_wg, &plan), FV_OK);
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 3), kH200, &large), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kMlaWg);
    EXPECT_EQ(plan.m_tiles, large.m_tiles);
    EXPECT_EQ(plan.num_parts, large.num_parts);
    EXPECT_EQ(plan.total, large.total);
  }
  {
    // unforced, the planner takes it wherever it applies: MLA with one KV head on an sm_90 device whose library
    // holds it (the automatic and the large-smem profiles); FLASHVERIFY_WGMMA=0 keeps the mma.sync tile
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 3), h200_wg, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kMlaWg);
    fv_problem large_profile = mla_problem(16, 8, 3);
    large_profile.profile = FV_PROFILE_LARGE_SMEM;
    ASSERT_EQ(fv::make_plan(large_profile, h200_wg, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kMlaWg);
    fv_problem small_profile = mla_problem(16, 8, 3);
    small_profile.profile = FV_PROFILE_SMALL_SMEM;
    ASSERT_EQ(fv::make_plan(small_profile, h200_wg, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kMlaSmall);
    fv_problem two_heads = mla_problem(16, 8, 3);
    two_heads.num_kv_heads = 2;
    ASSERT_EQ(fv::make_plan(two_heads, h200_wg, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kMlaLarge);
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 3), kH200, &plan), FV_OK);  // a library without it
    EXPECT_EQ(plan.cfg->id, fv::kMlaLarge);
    const fvt::ScopedEnv off("FLASHVERIFY_WGMMA", "0");
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 3), h200_wg, &plan), FV_OK);
    EXPECT_EQ(plan.cfg->id, fv::kMlaLarge);
  }
  const fvt::ScopedEnv other_dims("FLASHVERIFY_CONFIG", "gqa64_bm64_bn64_s4");  // ignored for a d128 problem
  fv_problem g = gqa_problem(32, 8, 128, 8, 16);
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.cfg->id, fv::kGqa128Bm32S3);
}

TEST(Plan, CombineSlicesNarrowOnlyWhenRowsLeaveMultiprocessorsIdle) {
  fv::Plan plan;
  fv_problem g = gqa_problem(8, 1, 128, 8, 1);  // GQA 8/1 d128, 8 drafts, batch 1: 64 rows x 1 slice of 128 < 132 SMs
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_cols, 32);
  g.batch_size = 4;  // 256 rows
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_cols, 128);
  g.batch_size = 2;  // 128 rows: narrow on the H200 (132 SMs) and on sm_120 (188)
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_cols, 32);
  ASSERT_EQ(fv::make_plan(g, kSm120, &plan), FV_OK);
  EXPECT_EQ(plan.combine_cols, 32);
  g.head_dim_qk = g.head_dim_v = 64;  // d64 merges 64 columns a block when wide
  g.batch_size = 16;
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_cols, 64);
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), kH200, &plan), FV_OK);  // 128 rows x 4 slices of 512
  EXPECT_EQ(plan.combine_cols, 128);
}

TEST(Plan, CombineWarpsFollowTheExpectedSplitCount) {
  fv::Plan plan;
  fv_problem g = gqa_problem(8, 1, 128, 8, 1);  // GQA 8/1 d128 batch 1: one request takes every partition
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  ASSERT_GT(plan.num_parts, 128);
  EXPECT_EQ(plan.combine_wpr, 16);
  EXPECT_EQ(plan.combine_blocks, 8 * 8 * 4);  // 64 rows x 4 slices of 32 columns, one unit a block
  // MLA Hq16 N8 batch 1: 128 rows x 4 slices of 128 columns = 512 units, more than the 264 combine blocks
  // an H200 holds at once (376 on 188 SMs): 8 warps a unit, one unit a block of 8 warps (v13;
  // FLASHVERIFY_COMBINE_BLOCK8=0: two units a block of 16)
  for (const fv::DeviceProps& props : {kH200, kSm120}) {
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), props, &plan), FV_OK);
    EXPECT_EQ(plan.combine_wpr, 8);
    // the H200 (16 warps by the expected splits, cut to 8 for the second wave): one unit a block of 8 warps;
    // sm_120 (fewer splits a request: 8 warps from the start) keeps two units a block
    const bool h200 = props.num_sms == kH200.num_sms;
    EXPECT_EQ(plan.combine_block8, h200);
    EXPECT_EQ(plan.combine_blocks, h200 ? 512 : 256);
    const fvt::ScopedEnv off("FLASHVERIFY_COMBINE_BLOCK8", "0");
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), props, &plan), FV_OK);
    EXPECT_FALSE(plan.combine_block8);
    EXPECT_EQ(plan.combine_blocks, 256);
  }
  fv::DeviceProps roomy = kH200;  // a device that holds 4 combine blocks a multiprocessor: 528 >= 512, one wave
  roomy.combine_blocks_per_sm = 4;
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), roomy, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 16);
  g = gqa_problem(32, 8, 128, 8, 16);  // GQA 32/8 batch 16: (33 partitions + 15) / 16 = 3 splits a request
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 1);
  EXPECT_EQ(plan.combine_blocks, 16 * 8 * 32 / 16);  // 4096 rows of 128 columns, 16 units a block
  g.batch_size = 4;  // (33 + 3) / 4 = 9 splits: 2 warps
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 2);
  g.num_kv_splits = 1000;  // a forced split count counts the same way: 16 warps a unit, but 4 x 8 x 32 = 1024
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);  // units are more than one wave of blocks (2 x 132): 8
  EXPECT_EQ(plan.combine_wpr, 8);
  EXPECT_EQ(plan.combine_blocks, 1024);  // one 8-warp block a unit
  g.batch_size = 1;  // 256 units fit one wave: a block a unit
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 16);
  EXPECT_EQ(plan.combine_blocks, 8 * 32);
  g.batch_size = 4;
  {
    const fvt::ScopedEnv forced("FLASHVERIFY_COMBINE_WPR", "4");
    ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
    EXPECT_EQ(plan.combine_wpr, 4);
  }
  g.num_kv_splits = 29;  // (29 + 3) / 4 = 8 expected splits: still one warp
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 1);
  g.num_kv_splits = 30;  // 33 / 4 -> 9: two
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 2);
  g.num_kv_splits = 29;
  const fvt::ScopedEnv bad("FLASHVERIFY_COMBINE_WPR", "3");  // not a power of two up to 16: ignored
  ASSERT_EQ(fv::make_plan(g, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 1);
}

// Whatever tile the planner takes fits the device with the kernels' static shared memory (kVerifyStaticSmem), as
// fits() and FLASHVERIFY_CONFIG count it (v59: three checks compared the dynamic bytes alone, so a device 1-384
// bytes short got a tile that failed at launch instead of a clean refusal)
TEST(Plan, ChosenTileFitsWithTheStaticSharedMemory) {
  const fv_problem problems[] = {mla_problem(16, 8, 1), gqa_problem(8, 1, 64, 8, 1), gqa_problem(8, 1, 128, 8, 16),
                                 gqa_problem(8, 1, 256, 8, 16)};
  const int ccs[][2] = {{8, 0}, {8, 9}, {9, 0}, {12, 0}};
  int planned = 0, refused = 0;
  for (const fv_problem& p : problems)
    for (const auto& cc : ccs)
      for (int smem = 40000; smem <= 232448; smem += 64) {
        fv::DeviceProps props{132, smem, 233472, cc[0], cc[1]};
        props.wg_kernel = props.large_kernels = true;
        fv::Plan plan;
        if (fv::make_plan(p, props, &plan) != FV_OK) {
          ++refused;
          continue;
        }
        ++planned;
        ASSERT_NE(plan.cfg, nullptr);
        ASSERT_LE(plan.cfg->smem_bytes() + fv::kVerifyStaticSmem, static_cast<std::size_t>(smem))
            << plan.cfg->name << " on sm_" << cc[0] << cc[1] << " with " << smem << " bytes a block";
      }
  EXPECT_GT(planned, 0);
  EXPECT_GT(refused, 0);  // (the sweep reaches below the smallest tile)
}

// An invalid FLASHVERIFY_COMBINE_WPR changes nothing, the 8-warp blocks included (v59: any value but 8 turned them
// off, MLA Hq16 N8 b1's 512 combine blocks became 256)
TEST(Plan, InvalidCombineWprChangesNothing) {
  fv::Plan ref, plan;
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), kH200, &ref), FV_OK);
  ASSERT_TRUE(ref.combine_block8);
  for (const char* v : {"3", "", "abc", "0", "32"}) {
    const fvt::ScopedEnv bad("FLASHVERIFY_COMBINE_WPR", v);
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), kH200, &plan), FV_OK);
    EXPECT_EQ(plan.combine_wpr, ref.combine_wpr) << v;
    EXPECT_EQ(plan.combine_block8, ref.combine_block8) << v;
    EXPECT_EQ(plan.combine_blocks, ref.combine_blocks) << v;
  }
  const fvt::ScopedEnv valid("FLASHVERIFY_COMBINE_WPR", "4");  // a valid value other than 8: two units a block
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 4);
  EXPECT_FALSE(plan.combine_block8);
}

// 256-column combine units where 128-column units, a warp each, would need a second wave of combine blocks:
// MLA Hq16 N8 B16 has 16 x 8 x 16 rows x 4 slices = 8192 units against 2 x 132 blocks of 16 warps (4224) on the
// H200; 4096 units of 256 columns fit one wave (bench/NOTES.md v26). FLASHVERIFY_COMBINE_COLS=128 keeps 128;
// =256 forces 256 where the kernel has them (Dv 256 or 512, wpr < 16).
TEST(Plan, CombineTakes256ColumnsWhere128NeedASecondWave) {
  fv::Plan plan;
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 16), kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 1);
  EXPECT_EQ(plan.combine_cols, 256);
  EXPECT_FALSE(plan.combine_block8);
  EXPECT_EQ(plan.combine_blocks, 16 * 8 * 16 * 2 / 16);
  {
    const fvt::ScopedEnv keep("FLASHVERIFY_COMBINE_COLS", "128");
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 16), kH200, &plan), FV_OK);
    EXPECT_EQ(plan.combine_cols, 128);
    EXPECT_EQ(plan.combine_blocks, 16 * 8 * 16 * 4 / 16);
  }
  // 4096 units of 128 columns fit one wave (MLA Hq16 N8 B8; GQA 32/8 d128 B16 has no 256-column slices)
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 8), kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_cols, 128);
  ASSERT_EQ(fv::make_plan(gqa_problem(32, 8, 128, 8, 16), kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_cols, 128);
  // sm_120 (188 SMs): 8192 units > 2 x 188 x 16 = 6016 as well
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 16), kSm120, &plan), FV_OK);
  EXPECT_EQ(plan.combine_wpr, 1);
  EXPECT_EQ(plan.combine_cols, 256);
  EXPECT_EQ(plan.combine_blocks, 16 * 8 * 16 * 2 / 16);
  // the batch-1 plan (wpr 8 in 8-warp blocks) keeps 128 columns unless forced; forced, the 8 warps share a
  // 16-warp block with the next unit (combine_kernel: the 256-column units have no block kernels)
  ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), kH200, &plan), FV_OK);
  EXPECT_EQ(plan.combine_cols, 128);
  EXPECT_TRUE(plan.combine_block8);
  {
    const fvt::ScopedEnv force("FLASHVERIFY_COMBINE_COLS", "256");
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), kH200, &plan), FV_OK);
    EXPECT_EQ(plan.combine_cols, 256);
    EXPECT_EQ(plan.combine_wpr, 8);
    EXPECT_FALSE(plan.combine_block8);
    EXPECT_EQ(plan.combine_blocks, 16 * 8 * 2 / 2);
    // Dv 128: no 256-column units, the force is ignored
    ASSERT_EQ(fv::make_plan(gqa_problem(32, 8, 128, 8, 16), kH200, &plan), FV_OK);
    EXPECT_EQ(plan.combine_cols, 128);
    // wpr 16 (one unit a block: combine_block_kernel) keeps 128
    const fvt::ScopedEnv wpr("FLASHVERIFY_COMBINE_WPR", "16");
    ASSERT_EQ(fv::make_plan(mla_problem(16, 8, 1), kH200, &plan), FV_OK);
    EXPECT_EQ(plan.combine_cols, 128);
  }
}

TEST(Plan, GridsBeyondTheLaunchLimitsAreRefused) {
  fv::Plan plan;
  // 8192 requests x 65536 draft rows x 128 heads x 4 column slices, split 2 ways: 2^34 combine blocks
  fv_problem g = mla_problem(128, 65536, 8192);
  g.num_kv_splits = 2;
  EXPECT_EQ(fv::make_plan(g, kH200, &plan), FV_ERR_UNSUPPORTED);
  // (this binary compiles plan.cpp and error.cpp itself: their message is fv::last_error(), not the library's)
  EXPECT_NE(std::string(fv::last_error()).find("combine blocks"), std::string::npos) << fv::last_error();
  g.max_draft = 64;  // the same batch with a tight max_draft fits
  EXPECT_EQ(fv::make_plan(g, kH200, &plan), FV_OK) << fv::last_error();
  fv_problem h = gqa_problem(70000, 70000, 128, 8, 1);  // more KV heads than grid.z holds
  EXPECT_EQ(fv::make_plan(h, kH200, &plan), FV_ERR_UNSUPPORTED);
}

TEST(Plan, SplitCountsFollowTheGrid) {
  EXPECT_EQ(fv::choose_num_parts(2, 132), 66);
  EXPECT_EQ(fv::choose_num_parts(1, 264), 264);
  EXPECT_EQ(fv::choose_num_parts(128, 132), 1);   // one wave of 128 CTAs: 97% full
  EXPECT_EQ(fv::choose_num_parts(16, 132), 8);
  // 100 CTAs a partition: one partition leaves 24% of the GPU idle; 5 fill 4 waves to 95%
  EXPECT_EQ(fv::choose_num_parts(100, 132), 5);
  for (int64_t base = 1; base <= 300; ++base) {
    const int parts = fv::choose_num_parts(base, 132);
    EXPECT_GE(parts, 1);
    EXPECT_LE(parts, 4096);
  }
}

TEST(Plan, ForcedSplitsAndWorkspaceGrowth) {
  fv::Plan a, b;
  fv_problem p = mla_problem(16, 8, 4);
  p.num_kv_splits = 1;
  ASSERT_EQ(fv::make_plan(p, kH200, &a), FV_OK);
  EXPECT_EQ(a.num_parts, 1);
  EXPECT_EQ(a.max_slots, 0);
  p.num_kv_splits = 7;
  ASSERT_EQ(fv::make_plan(p, kH200, &b), FV_OK);
  EXPECT_EQ(b.num_parts, 7);
  EXPECT_EQ(b.max_slots, 10);  // min(2 * 6, 4 + 6)
  EXPECT_GT(b.total, a.total);
  p.mask_kind = FV_MASK_BITS;  // user bits need no conversion buffer
  ASSERT_EQ(fv::make_plan(p, kH200, &b), FV_OK);
  EXPECT_EQ(b.mask_words, 0);
}

TEST(Plan, OracleAndNaiveNeedNoWorkspace) {
  fv::Plan plan;
  fv_problem p = mla_problem(16, 8, 4);
  p.impl = FV_IMPL_NAIVE;
  ASSERT_EQ(fv::make_plan(p, kH200, &plan), FV_OK);
  EXPECT_EQ(plan.total, 0u);
  p.impl = FV_IMPL_AUTO;
  p.device = FV_DEVICE_CPU;
  ASSERT_EQ(fv::make_plan(p, fv::DeviceProps{}, &plan), FV_OK);
  EXPECT_EQ(plan.impl, FV_IMPL_ORACLE);
  EXPECT_EQ(plan.total, 0u);
}

// ---------------------------------------------------------------------------------------------------
// The partition arithmetic, simulated for every CTA exactly as schedule.cuh and verify.cuh run it.

struct Simulated {
  std::vector<int32_t> cum;
  int parts = 0;
  int64_t total = 0;
};

Simulated schedule(const std::vector<int64_t>& drafts, const std::vector<int64_t>& prefixes, int bn, int overhead,
                   int grid_parts, int min_cost) {
  Simulated s;
  s.cum.assign(drafts.size() + 1, 0);
  for (size_t b = 0; b < drafts.size(); ++b)
    s.cum[b + 1] = s.cum[b] + fv::request_cost(drafts[b], prefixes[b], bn, overhead);
  s.total = s.cum.back();
  s.parts = fv::effective_parts(grid_parts, s.total, min_cost);
  return s;
}

TEST(Partition, EveryStepOnceAndSplitsConsistent) {
  std::mt19937_64 rng(1234);
  int max_overhead = 0;  // every configuration's request overhead, and one past the largest
  for (const fv::TileConfig& c : fv::kTileConfigs) max_overhead = std::max(max_overhead, c.overhead);
  for (int trial = 0; trial < 3000; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 12);
    const int bn = (rng() % 2) ? 64 : 16;
    const int overhead = static_cast<int>(rng() % (max_overhead + 2));
    const int grid_parts = 1 + static_cast<int>(rng() % 300);
    const int min_cost = 1 + static_cast<int>(rng() % 8);
    std::vector<int64_t> drafts(batch), prefixes(batch);
    for (int b = 0; b < batch; ++b) {
      drafts[b] = (rng() % 7 == 0) ? 0 : 1 + static_cast<int64_t>(rng() % 64);
      prefixes[b] = (rng() % 5 == 0) ? 0 : static_cast<int64_t>(rng() % 5000);
    }
    const Simulated s = schedule(drafts, prefixes, bn, overhead, grid_parts, min_cost);
    if (s.total == 0) continue;
    ASSERT_LE(s.parts, grid_parts);
    // which partitions computed which steps
    std::vector<std::vector<int>> owner(batch);
    for (int b = 0; b < batch; ++b) {
      // key steps counted here, not by request_cost: ceil((P + N) / bn) for a request with drafts, none without
      const int64_t steps = drafts[b] > 0 ? (prefixes[b] + drafts[b] + bn - 1) / bn : 0;
      ASSERT_EQ(s.cum[b + 1] - s.cum[b], steps > 0 ? steps + overhead : 0) << "request " << b << "'s cost";
      owner[b].assign(steps, -1);
    }
    std::vector<std::set<int>> parts_of(batch);
    for (int part = 0; part < s.parts; ++part) {
      int last_b = -1;
      fv::for_each_segment(part, s.parts, s.total, s.cum.data(), batch, overhead, [&](int b, int k0, int k1) {
        ASSERT_GT(b, last_b) << "segments in request order, one per request";
        last_b = b;
        ASSERT_LT(k0, k1);
        ASSERT_GE(k0, 0);
        ASSERT_LE(size_t(k1), owner[b].size()) << "a segment past request " << b << "'s last step";
        for (int k = k0; k < k1; ++k) {
          ASSERT_EQ(owner[b][k], -1) << "step computed twice";
          owner[b][k] = part;
        }
        parts_of[b].insert(part);
      });
    }
    int64_t slots = 0;
    for (int b = 0; b < batch; ++b) {
      for (size_t k = 0; k < owner[b].size(); ++k) ASSERT_NE(owner[b][k], -1) << "step never computed";
      int first = -1, splits = -1;
      fv::request_splits(s.cum[b], s.cum[b + 1], overhead, s.parts, s.total, &first, &splits);
      if (owner[b].empty()) {
        EXPECT_EQ(splits, 0);
        continue;
      }
      // the partitions of a request are consecutive, start at first_part, and number num_splits
      ASSERT_EQ(static_cast<int>(parts_of[b].size()), splits);
      ASSERT_EQ(*parts_of[b].begin(), first);
      ASSERT_EQ(*parts_of[b].rbegin(), first + splits - 1);
      if (splits > 1) slots += splits;
    }
    // the workspace bound the planner uses
    const int64_t bound = s.parts > 1 ? std::min<int64_t>(2 * (s.parts - 1), batch + s.parts - 1) : 0;
    ASSERT_LE(slots, bound);
  }
}

// The GPU test Layouts.SplitCountsAgree reads the device planner's words back and expects forced 1 and 2 to be taken
// as given, and 4096 to give more than 2 partitions with request 0 split: true of its problem (fixed_case: drafts
// {8, 5, 8}, prefixes {5000, 777, padded 1}, and with layout 5's window of 700 keys) under every configuration's
// block_n, overhead and min_part_cost. If a configuration change breaks that, this fails here, in CI, first.
TEST(Partition, SplitTestShapesTakeTheForcedCounts) {
  for (const fv::TileConfig& c : fv::kTileConfigs) {
    for (const int window : {0, 700}) {
      std::vector<int64_t> prefixes = {5000, 777, 1};
      for (int64_t& p : prefixes) p -= int64_t(fv::window_skip_steps(p, window, c.bn)) * c.bn;
      for (const int forced : {1, 2, 4096}) {
        const Simulated s = schedule({8, 5, 8}, prefixes, c.bn, c.overhead, forced, c.min_part_cost);
        int most = 0;
        for (int b = 0; b < 3; ++b) {
          int first = -1, splits = -1;
          fv::request_splits(s.cum[b], s.cum[b + 1], c.overhead, s.parts, s.total, &first, &splits);
          most = std::max(most, splits);
        }
        if (forced <= 2) EXPECT_EQ(s.parts, forced) << c.name << " window " << window;
        if (forced == 1) EXPECT_EQ(most, 1) << c.name;
        if (forced == 4096) {
          EXPECT_GT(s.parts, 2) << c.name << " window " << window;
          EXPECT_GT(most, 1) << c.name << " window " << window;
        }
      }
    }
  }
}

// fvt::planned_partitions / planned_total_cost / planned_splits read SchedLayout's words (the GPU tests' view of the plan)
TEST(Partition, PlanWordsReadBackThroughTheTestkit) {
  const int batch = 3;
  fvt::GpuRun r;
  EXPECT_EQ(fvt::planned_partitions(r), -1);
  EXPECT_EQ(fvt::planned_splits(r, 0), -1);
  r.plan_words.assign(static_cast<size_t>(fv::SchedLayout::words(batch)), -1);
  r.plan_words[0] = 7;
  r.plan_words[1] = 123;
  for (int b = 0; b < batch; ++b) r.plan_words[static_cast<size_t>(fv::SchedLayout::num_splits(batch) + b)] = 10 + b;
  EXPECT_EQ(fvt::planned_partitions(r), 7);
  EXPECT_EQ(fvt::planned_total_cost(r), 123);
  for (int b = 0; b < batch; ++b) EXPECT_EQ(fvt::planned_splits(r, b), 10 + b);
  EXPECT_EQ(fvt::planned_splits(r, batch), -1);
  EXPECT_EQ(fvt::planned_splits(r, -1), -1);
}

TEST(Partition, BalancedWork) {
  // one long request over 132 partitions: no partition gets more than its share plus one step
  const Simulated s = schedule({8}, {32768}, 64, 2, 66, 3);
  EXPECT_EQ(s.parts, 66);
  std::vector<int> steps(s.parts, 0);
  for (int part = 0; part < s.parts; ++part)
    fv::for_each_segment(part, s.parts, s.total, s.cum.data(), 1, 2,
                         [&](int, int k0, int k1) { steps[part] += k1 - k0; });
  const int share = static_cast<int>(s.total / s.parts);
  for (int part = 0; part < s.parts; ++part) EXPECT_LE(steps[part], share + 1) << part;
}

}  // namespace

// The CUDA path's token limit (check mode's): the sum of P_b + N_b from the indptr ends, without overflow
TEST(Partition, BatchTokensFromTheIndptrEnds) {
  const int64_t lim = fv::kMaxBatchTokens;
  EXPECT_EQ(lim, int64_t(1) << 30);
  EXPECT_EQ(fv::batch_tokens(0, 17, 0, lim - 18), lim - 1);
  EXPECT_EQ(fv::batch_tokens(0, 17, 0, lim - 17), lim);
  EXPECT_EQ(fv::batch_tokens(5, 22, 100, 100 + lim - 18), lim - 1);  // (arrays that do not start at 0)
  EXPECT_EQ(fv::batch_tokens(0, 8, 0, INT64_MAX), INT64_MAX);        // saturated, no overflow
  EXPECT_EQ(fv::batch_tokens(0, INT64_MAX, 0, INT64_MAX), INT64_MAX);
  EXPECT_EQ(fv::batch_tokens(3, INT64_MIN, 0, 10), 0);                // a decreasing array: the length checks name it
  EXPECT_EQ(fv::batch_tokens(-3, 5, 0, 10), 0);
  EXPECT_EQ(fv::batch_tokens(0, 0, 0, 0), 0);
}

// The planner's bound on batch_size keeps the device planner's int32 cost sums in range (partition.h): the largest
// batch it takes for a configuration, with every request's cost at its bound, sums below 2^31
TEST(Plan, BatchSizeBoundKeepsTheCostSumsInInt32) {
  for (const fv_problem& base : {gqa_problem(1, 1, 64, 1, 16), gqa_problem(8, 1, 128, 8, 16), mla_problem(16, 8, 16)}) {
    fv::Plan plan;
    ASSERT_EQ(fv::make_plan(base, kH200, &plan), FV_OK) << fv::last_error();
    const fv::TileConfig& c = *plan.cfg;
    SCOPED_TRACE(c.name);
    const int64_t largest = (INT32_MAX - fv::kMaxBatchTokens / c.bn) / (c.overhead + 1);
    // every request at its cost bound (ceil(tokens / bn) <= tokens / bn + 1, plus the overhead) still sums below 2^31
    EXPECT_LE(fv::kMaxBatchTokens / c.bn + largest * (c.overhead + 1), INT32_MAX);
    fv_problem p = base;
    p.batch_size = static_cast<int32_t>(largest + 1);
    EXPECT_EQ(fv::make_plan(p, kH200, &plan), FV_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(fv::last_error()).find("sums their costs in int32"), std::string::npos) << fv::last_error();
    p.batch_size = static_cast<int32_t>(largest);  // (may fail for another limit, not this one)
    if (fv::make_plan(p, kH200, &plan) != FV_OK)
      EXPECT_EQ(std::string(fv::last_error()).find("sums their costs in int32"), std::string::npos) << fv::last_error();
  }
}

// FLASHVERIFY_OVERHEAD / FLASHVERIFY_MIN_PART_COST reach the plan (the launcher passes the plan's values to the device
// planner), values outside 1..kMaxTuningEnv are ignored, and the batch_size bound uses the overhead the device will use.
TEST(Plan, PartitionKnobsFromTheEnvironment) {
  const fv_problem base = gqa_problem(8, 1, 128, 8, 16);
  fv::Plan plan;
  ASSERT_EQ(fv::make_plan(base, kH200, &plan), FV_OK) << fv::last_error();
  const fv::TileConfig& c = *plan.cfg;
  EXPECT_EQ(plan.overhead, c.overhead);
  EXPECT_EQ(plan.min_part_cost, c.min_part_cost);
  for (const char* ignored : {"0", "-3", "4x", "", "65537", "99999999999"}) {
    SCOPED_TRACE(ignored);
    const fvt::ScopedEnv o("FLASHVERIFY_OVERHEAD", ignored), m("FLASHVERIFY_MIN_PART_COST", ignored);
    ASSERT_EQ(fv::make_plan(base, kH200, &plan), FV_OK) << fv::last_error();
    EXPECT_EQ(plan.overhead, c.overhead);
    EXPECT_EQ(plan.min_part_cost, c.min_part_cost);
  }
  {
    const fvt::ScopedEnv o("FLASHVERIFY_OVERHEAD", "65536"), m("FLASHVERIFY_MIN_PART_COST", "7");
    ASSERT_EQ(fv::make_plan(base, kH200, &plan), FV_OK) << fv::last_error();
    EXPECT_EQ(plan.overhead, fv::kMaxTuningEnv);
    EXPECT_EQ(plan.min_part_cost, 7);
    // the bound with overhead 65536: a batch the configuration's own overhead allows is refused
    const int64_t largest = (INT32_MAX - fv::kMaxBatchTokens / c.bn) / (fv::kMaxTuningEnv + 1);
    fv_problem p = base;
    p.batch_size = static_cast<int32_t>(largest + 1);
    EXPECT_EQ(fv::make_plan(p, kH200, &plan), FV_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(fv::last_error()).find("request overhead 65536"), std::string::npos) << fv::last_error();
    p.batch_size = static_cast<int32_t>(largest);
    EXPECT_EQ(fv::make_plan(p, kH200, &plan), FV_OK) << fv::last_error();
  }
}
