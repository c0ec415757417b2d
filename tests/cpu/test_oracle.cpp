// The float64 oracle: a tree worked out by hand, then invariances (slot order, page size, mask form,
// index width, MLA's V view) and edge cases. Every output is compared element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "round16.h"
#include "testkit.h"

namespace {

using fvt::CaseSpec;
using fvt::HostProblem;

// ---------------------------------------------------------------------------------------------------
// One request, prefix of 2 tokens, 3 draft tokens in a star: 0 is the root, 1 and 2 its children.
// Head dim 64, one head, fp32, sm_scale 1. Only dims 0 and 1 are nonzero:
//   keys (dim 0):   p0 = 0, p1 = ln 3, d0 = ln 2, d1 = 0, d2 = ln 4
//   values:         dim 0 = 1, 2, 3, 4, 5 (p0, p1, d0, d1, d2); dim 1 = 1 everywhere
//   queries:        draft 0 and 1: dim 0 = 1; draft 2: dim 0 = 2
// draft 0 sees p0 p1 d0     weights 1 3 2      out = (1 + 6 + 6) / 6          = 13/6,  lse = ln 6
// draft 1 sees p0 p1 d0 d1  weights 1 3 2 1    out = (1 + 6 + 6 + 4) / 7      = 17/7,  lse = ln 7
// draft 2 sees p0 p1 d0 d2  weights 1 9 4 16   out = (1 + 18 + 12 + 80) / 30  = 111/30, lse = ln 30
// dim 1 of every output is 1 (the weights are normalised); every other dim is 0.
struct HandTree {
  static constexpr int D = 64, N = 3, P = 2;
  std::vector<float> q = std::vector<float>(N * D, 0.f), kd = std::vector<float>(N * D, 0.f),
                     vd = std::vector<float>(N * D, 0.f);
  std::vector<float> pool = std::vector<float>(8 * D, 0.f), vpool = std::vector<float>(8 * D, 0.f);
  std::vector<int32_t> qo = {0, N}, kv = {0, P}, slots = {5, 2}, parents = {-1, 0, 0};
  std::vector<int64_t> mask_indptr = {0, N * (P + N)};
  std::vector<uint8_t> mask = std::vector<uint8_t>(N * (P + N), 0);
  std::vector<uint32_t> bits = {0b001, 0b011, 0b101};
  std::vector<int32_t> page_table = {3};  // page size 2: page 3 holds slots 6 and 7
  std::vector<double> out = std::vector<double>(N * D, std::nan(""));
  std::vector<float> lse = std::vector<float>(N, std::nanf(""));
  // NaN again before a further run on the same buffers (a run that writes nothing must not pass on the last one's)
  void poison() {
    std::fill(out.begin(), out.end(), std::nan(""));
    std::fill(lse.begin(), lse.end(), std::nanf(""));
  }

  HandTree() {
    q[0 * D] = 1.f;
    q[1 * D] = 1.f;
    q[2 * D] = 2.f;
    const float pk[P] = {0.f, std::log(3.f)}, dk[N] = {std::log(2.f), 0.f, std::log(4.f)};
    for (int j = 0; j < N; ++j) {
      kd[j * D] = dk[j];
      vd[j * D] = 3.f + j;
      vd[j * D + 1] = 1.f;
    }
    for (int k = 0; k < P; ++k) {
      pool[slots[k] * D] = pk[k];
      vpool[slots[k] * D] = 1.f + k;
      vpool[slots[k] * D + 1] = 1.f;
      // the same tokens again at page 3 (slots 6, 7) for the page-table run
      pool[(6 + k) * D] = pk[k];
      vpool[(6 + k) * D] = 1.f + k;
      vpool[(6 + k) * D + 1] = 1.f;
    }
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) mask[i * (P + N) + P + j] = (bits[i] >> j) & 1u;
  }

  fv_args args(int mask_kind, int addressing) {
    fv_args a;
    fv_args_init(&a);
    fv_problem& p = a.problem;
    p.device = FV_DEVICE_CPU;
    p.dtype = FV_DTYPE_FP32;
    p.out_dtype = FV_DTYPE_FP64;
    p.batch_size = 1;
    p.max_draft = N;
    p.num_q_heads = p.num_kv_heads = 1;
    p.head_dim_qk = p.head_dim_v = D;
    p.mask_kind = mask_kind;
    p.kv_addressing = addressing;
    p.page_size = 2;
    a.q = q.data();
    a.q_stride_token = a.q_stride_head = D;
    a.out = out.data();
    a.out_stride_token = a.out_stride_head = D;
    a.lse = lse.data();
    a.lse_stride_token = 1;
    a.k_draft = kd.data();
    a.v_draft = vd.data();
    a.k_draft_stride_token = a.k_draft_stride_head = a.v_draft_stride_token = a.v_draft_stride_head = D;
    a.k_pool = pool.data();
    a.v_pool = vpool.data();
    a.k_pool_stride_slot = a.k_pool_stride_head = a.v_pool_stride_slot = a.v_pool_stride_head = D;
    a.num_slots = 8;
    a.qo_indptr = {qo.data(), FV_INDEX_INT32, 0};
    a.kv_indptr = {kv.data(), FV_INDEX_INT32, 0};
    a.kv_indices = {slots.data(), FV_INDEX_INT32, 0};
    a.page_table = page_table.data();
    a.page_table_stride = 1;
    a.custom_mask = mask.data();
    a.mask_indptr = {mask_indptr.data(), FV_INDEX_INT64, 0};
    a.mask_bits = bits.data();
    a.mask_bits_stride = 1;
    a.parents = parents.data();
    a.sm_scale = 1.f;
    return a;
  }
};

TEST(Oracle, HandCheckedTree) {
  const double want[3] = {13.0 / 6, 17.0 / 7, 111.0 / 30};
  const double want_lse[3] = {std::log(6.0), std::log(7.0), std::log(30.0)};
  struct Form { int mask, addressing; const char* name; };
  const Form forms[] = {{FV_MASK_BYTES, FV_KV_TOKEN_SLOTS, "bytes"},
                        {FV_MASK_BITS, FV_KV_TOKEN_SLOTS, "bits"},
                        {FV_MASK_PARENTS, FV_KV_TOKEN_SLOTS, "parents"},
                        {FV_MASK_BYTES, FV_KV_PAGE_TABLE, "bytes, page table"}};
  for (const Form& f : forms) {
    SCOPED_TRACE(f.name);
    HandTree h;
    // the copy of the prefix the other addressing reads is poisoned: slots 5, 2 for the page table, 6, 7 for slots
    for (int slot : f.addressing == FV_KV_PAGE_TABLE ? std::vector<int>{5, 2} : std::vector<int>{6, 7})
      for (int d = 0; d < HandTree::D; ++d)
        h.pool[slot * HandTree::D + d] = h.vpool[slot * HandTree::D + d] = std::nanf("");
    fv_args a = h.args(f.mask, f.addressing);
    ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
    for (int i = 0; i < 3; ++i) {
      // fp32 inputs: ln 3 etc. are rounded to float, so exp() of them is exact to ~1e-7
      EXPECT_NEAR(h.out[i * HandTree::D], want[i], 1e-6) << "draft " << i;
      EXPECT_NEAR(h.out[i * HandTree::D + 1], 1.0, 1e-12) << "draft " << i;
      for (int d = 2; d < HandTree::D; ++d) ASSERT_EQ(h.out[i * HandTree::D + d], 0.0) << "draft " << i << " d " << d;
      EXPECT_NEAR(h.lse[i], want_lse[i], 1e-6) << "draft " << i;
    }
  }
}

TEST(Oracle, RowThatSeesNothingIsZeroWithMinusInfLse) {
  HandTree h;
  h.kv = {0, 0};        // empty prefix
  h.bits[1] = 0b000;    // draft 1 hides even itself
  fv_args a = h.args(FV_MASK_BITS, FV_KV_TOKEN_SLOTS);
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  for (int d = 0; d < HandTree::D; ++d) EXPECT_EQ(h.out[1 * HandTree::D + d], 0.0);
  EXPECT_TRUE(std::isinf(h.lse[1]) && h.lse[1] < 0);
  EXPECT_NEAR(h.out[0], 3.0, 1e-12);  // draft 0 sees only itself: its own value
}

TEST(Oracle, ZeroScaleIsUniformAverage) {
  HandTree h;
  fv_args a = h.args(FV_MASK_PARENTS, FV_KV_TOKEN_SLOTS);
  a.sm_scale = 0.f;
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  EXPECT_NEAR(h.out[0], (1 + 2 + 3) / 3.0, 1e-12);
  EXPECT_NEAR(h.out[HandTree::D], (1 + 2 + 3 + 4) / 4.0, 1e-12);
  EXPECT_NEAR(h.out[2 * HandTree::D], (1 + 2 + 3 + 5) / 4.0, 1e-12);
  EXPECT_NEAR(h.lse[2], std::log(4.0), 1e-6);
}

// SGLang's score modifiers on the same hand-made tree (scores of drafts 0 and 1: p0 0, p1 ln 3, d0 ln 2,
// d1 0; draft 2 doubles them: weights 1 9 4 16).
TEST(Oracle, SinksJoinTheDenominator) {
  HandTree h;
  fv_args a = h.args(FV_MASK_PARENTS, FV_KV_TOKEN_SLOTS);
  const float sinks[1] = {std::log(4.f)};
  a.sinks = sinks;
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  EXPECT_NEAR(h.out[0], 13.0 / 10, 1e-6);
  EXPECT_NEAR(h.out[HandTree::D], 17.0 / 11, 1e-6);
  EXPECT_NEAR(h.out[2 * HandTree::D], 111.0 / 34, 1e-6);
  EXPECT_NEAR(h.out[1], 6.0 / 10, 1e-6);  // dim 1: the weights no longer sum to 1
  EXPECT_NEAR(h.lse[0], std::log(10.0), 1e-6);
  EXPECT_NEAR(h.lse[2], std::log(34.0), 1e-6);
}

// A sink far above every score (by more than exp's float64 range, ~709) joins the maximum: lse is the sink and the
// output ~0, not an infinite denominator (lse = +inf, out = 0 before)
TEST(Oracle, SinkFarAboveTheScores) {
  HandTree h;
  fv_args a = h.args(FV_MASK_PARENTS, FV_KV_TOKEN_SLOTS);
  const float sinks[1] = {800.f};
  a.sinks = sinks;
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  for (int i = 0; i < HandTree::N; ++i) {
    EXPECT_FLOAT_EQ(h.lse[i], 800.f) << i;
    EXPECT_TRUE(std::isfinite(h.out[i * HandTree::D]) && std::fabs(h.out[i * HandTree::D]) < 1e-300) << i;
  }
}

// The oracle's 16-bit outputs are the float64 result rounded once (round16.h): a value just above a 16-bit midpoint
// by less than half a float ulp rounds up; through float it would land on the midpoint and round down to even
TEST(Oracle, SixteenBitOutputsAreRoundedOnce) {
  // bf16: 1 and 1 + 2^-7 are neighbours, 1 + 2^-8 their midpoint; fp16: 1, 1 + 2^-10, midpoint 1 + 2^-11
  EXPECT_EQ(fv::bf16_bits_via_float(1.0 + 0x1p-8 + 0x1p-40), 0x3f80);  // the double rounding the oracle avoids
  EXPECT_EQ(fv::round_to_bf16(1.0 + 0x1p-8 + 0x1p-40), 0x3f81);
  EXPECT_EQ(fv::round_to_bf16(1.0 + 0x1p-8), 0x3f80);                // an exact tie: to even
  EXPECT_EQ(fv::round_to_bf16(1.0 + 0x1p-7 + 0x1p-8), 0x3f82);       // the next tie: to even, upwards
  EXPECT_EQ(fv::round_to_bf16(-(1.0 + 0x1p-8 + 0x1p-40)), 0xbf81);
  EXPECT_EQ(fv::round_to_fp16(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
  EXPECT_EQ(fv::round_to_fp16(1.0 + 0x1p-11), 0x3c00);
  EXPECT_EQ(fv::round_to_fp16(65504.0), 0x7bff);                     // the largest fp16
  EXPECT_EQ(fv::round_to_fp16(65519.99), 0x7bff);                    // below the overflow threshold 65520
  EXPECT_EQ(fv::round_to_fp16(65520.0), 0x7c00);                     // at it: inf
  EXPECT_EQ(fv::round_to_bf16(0x1p128 * (1 - 0x1p-9) * 0.99999), 0x7f7f);
  EXPECT_EQ(fv::round_to_fp16(0.0), 0x0000);
  EXPECT_EQ(fv::round_to_fp16(0x1p-25 + 0x1p-40), 0x0001);           // above half the smallest subnormal
  // and against a brute-force nearest over random doubles near 1 and across exponents
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-8.0, 8.0);
  for (int t = 0; t < 200000; ++t) {
    const double x = std::ldexp(1.0 + u(rng) / 16, static_cast<int>(rng() % 40) - 20);
    for (bool bf16 : {true, false}) {
      if (!bf16 && std::fabs(x) >= 65520.0) continue;  // fp16 overflows to inf there (checked above)
      const uint16_t got = bf16 ? fv::round_to_bf16(x) : fv::round_to_fp16(x);
      const double d = std::fabs(fv::value16(got, bf16) - x);
      for (int step : {-1, 1}) {
        const uint16_t n = static_cast<uint16_t>((got & 0x8000u) | ((got & 0x7fffu) + step));
        if ((got & 0x7fffu) == 0 && step < 0) continue;
        ASSERT_LE(d, std::fabs(fv::value16(n, bf16) - x)) << x << (bf16 ? " bf16" : " fp16");
      }
    }
  }
}

TEST(Oracle, KvScalesApplyToThePrefixOnly) {
  HandTree h;
  fv_args a = h.args(FV_MASK_BYTES, FV_KV_TOKEN_SLOTS);
  a.k_scale = 2.f;  // prefix scores x2: p1 weighs 9
  a.v_scale = 3.f;  // prefix values x3
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  EXPECT_NEAR(h.out[0], (3.0 * 1 + 3.0 * 2 * 9 + 3 * 2) / 12.0, 1e-5);
  EXPECT_NEAR(h.out[1], (3.0 + 27 + 2) / 12.0, 1e-5);
  EXPECT_NEAR(h.lse[0], std::log(12.0), 1e-6);
}

TEST(Oracle, SlidingWindow) {
  // W = 1: draft i sits at position 2 + i and sees prefix token k iff k >= 1 + i, draft j iff j >= i - 1
  HandTree h;
  fv_args a = h.args(FV_MASK_BITS, FV_KV_TOKEN_SLOTS);
  a.sliding_window = 1;
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  EXPECT_NEAR(h.out[0], (2.0 * 3 + 3 * 2) / 5, 1e-6);           // p1, d0
  EXPECT_NEAR(h.out[HandTree::D], (3.0 * 2 + 4) / 3, 1e-6);      // d0, d1
  EXPECT_NEAR(h.out[2 * HandTree::D], 5.0, 1e-6);                // d2 only (d0 is out of the window)
  EXPECT_NEAR(h.lse[2], std::log(16.0), 1e-6);
}

TEST(Oracle, LogitCap) {
  HandTree h;
  fv_args a = h.args(FV_MASK_BYTES, FV_KV_TOKEN_SLOTS);
  a.logit_cap = 1.f;  // tanh(ln 3) = 0.8, tanh(ln 2) = 0.6
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  const double w1 = std::exp(0.8), w2 = std::exp(0.6);
  EXPECT_NEAR(h.out[0], (1 + 2 * w1 + 3 * w2) / (1 + w1 + w2), 1e-6);
  EXPECT_NEAR(h.lse[0], std::log(1 + w1 + w2), 1e-6);
}

TEST(Oracle, XaiTemperature) {
  // L = 2: draft 0 (position 2) unchanged, draft 1 (position 3) scores x log2 3, draft 2 (4) x 2
  HandTree h;
  fv_args a = h.args(FV_MASK_PARENTS, FV_KV_TOKEN_SLOTS);
  a.xai_temperature_len = 2;
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  EXPECT_NEAR(h.out[0], 13.0 / 6, 1e-6);
  const double t = std::log2(3.0), w1 = std::pow(3.0, t), w2 = std::pow(2.0, t);
  EXPECT_NEAR(h.out[HandTree::D], (1 + 2 * w1 + 3 * w2 + 4) / (1 + w1 + w2 + 1), 1e-5);
  // draft 2: scores 0, 2 ln 3, 2 ln 2, 2 ln 4 doubled again: weights 1, 81, 16, 256
  EXPECT_NEAR(h.out[2 * HandTree::D], (1 + 2 * 81 + 3 * 16 + 5 * 256) / 354.0, 1e-5);
}

TEST(Oracle, WindowKvOffsetsShiftTheByteMask) {
  HandTree h;
  const int off = 3, W = off + HandTree::P + HandTree::N;
  std::vector<uint8_t> mask(HandTree::N * W, 0);
  for (int i = 0; i < HandTree::N; ++i)
    for (int j = 0; j < HandTree::N; ++j) mask[i * W + off + HandTree::P + j] = (h.bits[i] >> j) & 1u;
  std::vector<int64_t> mask_indptr = {0, HandTree::N * W};
  const int32_t offsets[1] = {off};
  fv_args a = h.args(FV_MASK_BYTES, FV_KV_TOKEN_SLOTS);
  a.custom_mask = mask.data();
  a.mask_indptr = {mask_indptr.data(), FV_INDEX_INT64, 0};
  a.window_kv_offsets = offsets;
  a.sliding_window = 100;  // SGLang reads the offsets with a sliding window only; this one hides no key
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  EXPECT_NEAR(h.out[0], 13.0 / 6, 1e-6);
  EXPECT_NEAR(h.out[2 * HandTree::D], 111.0 / 30, 1e-6);
  a.sliding_window = 1 << 30;  // a window of 2^30 or more hides nothing either
  h.poison();
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  EXPECT_NEAR(h.out[2 * HandTree::D], 111.0 / 30, 1e-6);
  a.window_kv_offsets = nullptr;  // the same bytes read without the offset: wrong span
  EXPECT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_ERR_MASK_INDPTR);
  a.window_kv_offsets = offsets;
  a.sliding_window = 0;  // no window: the offsets are ignored, as SGLang ignores them (rows are P + N wide)
  EXPECT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_ERR_MASK_INDPTR);
  std::vector<uint8_t> plain(HandTree::N * (HandTree::P + HandTree::N), 0);
  for (int i = 0; i < HandTree::N; ++i)
    for (int j = 0; j < HandTree::N; ++j) plain[i * (HandTree::P + HandTree::N) + HandTree::P + j] = (h.bits[i] >> j) & 1u;
  std::vector<int64_t> plain_indptr = {0, HandTree::N * (HandTree::P + HandTree::N)};
  a.custom_mask = plain.data();
  a.mask_indptr = {plain_indptr.data(), FV_INDEX_INT64, 0};
  h.poison();
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  EXPECT_NEAR(h.out[0], 13.0 / 6, 1e-6);
  EXPECT_NEAR(h.out[2 * HandTree::D], 111.0 / 30, 1e-6);
}

// ---------------------------------------------------------------------------------------------------
// invariances on random bf16 problems

CaseSpec random_spec(bool mla, uint64_t seed) {
  CaseSpec s;
  if (mla) {
    s.hq = 4; s.hkv = 1; s.dqk = 576; s.dv = 512;
  } else {
    s.hq = 8; s.hkv = 2; s.dqk = 128; s.dv = 128;
  }
  s.max_draft = 9;
  s.draft = {9, 1, 6};
  s.prefix = {37, 0, -1};  // a normal prefix, an empty one, a padded request (slot 0)
  s.tree = fvt::Tree::RandomPerm;
  s.shuffle_slots = false;
  s.seed = seed;
  return s;
}

fvt::Reference oracle(const HostProblem& hp) {
  fvt::Reference r;
  const fv_status st = fvt::run_oracle(hp, &r);
  EXPECT_EQ(st, FV_OK) << fv_last_error();
  for (double x : r.out) EXPECT_FALSE(std::isnan(x));
  return r;
}

void expect_identical(const fvt::Reference& x, const fvt::Reference& y) {
  ASSERT_EQ(x.out.size(), y.out.size());
  for (size_t e = 0; e < x.out.size(); ++e) ASSERT_EQ(x.out[e], y.out[e]) << "element " << e;
  for (size_t e = 0; e < x.lse.size(); ++e) ASSERT_EQ(x.lse[e], y.lse[e]) << "lse " << e;
}

class OracleInvariance : public ::testing::TestWithParam<bool> {};

TEST_P(OracleInvariance, ShuffledSlotsAndPageSizes) {
  const HostProblem base = fvt::make_problem(random_spec(GetParam(), 21));
  const fvt::Reference ref = oracle(base);
  expect_identical(ref, oracle(fvt::relayout(base, FV_KV_TOKEN_SLOTS, 1, true, 5)));
  expect_identical(ref, oracle(fvt::relayout(base, FV_KV_PAGE_TABLE, 1, true, 6)));
  expect_identical(ref, oracle(fvt::relayout(base, FV_KV_PAGE_TABLE, 16, true, 7)));
  expect_identical(ref, oracle(fvt::relayout(base, FV_KV_PAGE_TABLE, 16, false, 8)));
}

TEST_P(OracleInvariance, MaskFormsAgree) {
  HostProblem hp = fvt::make_problem(random_spec(GetParam(), 22));
  const fvt::Reference bytes = oracle(hp);
  hp.spec.mask_kind = FV_MASK_BITS;
  expect_identical(bytes, oracle(hp));
  hp.spec.mask_kind = FV_MASK_PARENTS;
  expect_identical(bytes, oracle(hp));
}

TEST_P(OracleInvariance, CausalEqualsChain) {
  CaseSpec s = random_spec(GetParam(), 23);
  s.tree = fvt::Tree::Chain;
  HostProblem hp = fvt::make_problem(s);
  const fvt::Reference chain = oracle(hp);
  hp.spec.mask_kind = FV_MASK_CAUSAL;
  expect_identical(chain, oracle(hp));
}

TEST_P(OracleInvariance, IndexWidths) {
  HostProblem hp = fvt::make_problem(random_spec(GetParam(), 24));
  const fvt::Reference ref = oracle(hp);
  hp.spec.indices_i64 = !hp.spec.indices_i64;
  hp.spec.qo_i64 = !hp.spec.qo_i64;
  expect_identical(ref, oracle(hp));
}

TEST_P(OracleInvariance, DifferentTreesGiveDifferentOutputs) {
  // guards against a mask that is ignored: a chain and a star over the same tokens must differ
  CaseSpec s = random_spec(GetParam(), 25);
  s.tree = fvt::Tree::Chain;
  const fvt::Reference chain = oracle(fvt::make_problem(s));
  s.tree = fvt::Tree::Star;
  const fvt::Reference star = oracle(fvt::make_problem(s));
  double diff = 0;
  for (size_t e = 0; e < chain.out.size(); ++e) diff += std::fabs(chain.out[e] - star.out[e]);
  EXPECT_GT(diff, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Layouts, OracleInvariance, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "mla" : "gqa"; });

TEST(Oracle, MlaViewEqualsSeparateV) {
  // MLA's V is the first 512 columns of the 576-wide K row; copying them to a separate pool changes nothing
  HostProblem hp = fvt::make_problem(random_spec(true, 26));
  const fvt::Reference view = oracle(hp);
  fvt::IndexStore st;
  std::vector<double> out(hp.total_q * hp.spec.hq * 512);
  std::vector<float> lse(hp.total_q * hp.spec.hq);
  fvt::Pointers p = fvt::host_pointers(hp, st, out.data(), lse.data());
  std::vector<uint16_t> vpool(hp.num_slots * 512), vdraft(hp.total_q * 512);
  for (int64_t r = 0; r < hp.num_slots; ++r) std::memcpy(&vpool[r * 512], &hp.k_pool[r * 576], 1024);
  for (int64_t r = 0; r < hp.total_q; ++r) std::memcpy(&vdraft[r * 512], &hp.k_draft[r * 576], 1024);
  p.v_pool = vpool.data();
  p.v_draft = vdraft.data();
  fv_args a = fvt::make_args(hp, p, FV_DEVICE_CPU, FV_IMPL_ORACLE, FV_DTYPE_FP64);
  a.v_pool_stride_slot = a.v_pool_stride_head = a.v_draft_stride_token = a.v_draft_stride_head = 512;
  a.out_stride_token = int64_t(hp.spec.hq) * 512;
  a.out_stride_head = 512;
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  for (size_t e = 0; e < out.size(); ++e) ASSERT_EQ(out[e], view.out[e]) << e;
}

TEST(Oracle, StridedQueryRows) {
  // q rows padded by 8 poisoned elements give the same result as packed rows
  HostProblem hp = fvt::make_problem(random_spec(false, 27));
  const fvt::Reference ref = oracle(hp);
  const int64_t row = int64_t(hp.spec.hq) * hp.spec.dqk, padded = row + 8;
  std::vector<uint16_t> q(hp.total_q * padded, 0xFFFF);
  for (int64_t t = 0; t < hp.total_q; ++t) std::memcpy(&q[t * padded], &hp.q[t * row], row * 2);
  fvt::IndexStore st;
  std::vector<double> out(ref.out.size());
  fvt::Pointers p = fvt::host_pointers(hp, st, out.data(), nullptr);
  p.q = q.data();
  fv_args a = fvt::make_args(hp, p, FV_DEVICE_CPU, FV_IMPL_ORACLE, FV_DTYPE_FP64);
  a.q_stride_token = padded;
  a.out_stride_token = int64_t(hp.spec.hq) * hp.spec.dv;
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  for (size_t e = 0; e < out.size(); ++e) ASSERT_EQ(out[e], ref.out[e]) << e;
}

TEST(Oracle, PoisonedUnusedSlotsNeverLeak) {
  // make_problem fills every unreferenced pool row with NaN; a finite output proves none was read
  CaseSpec s = random_spec(false, 28);
  s.shuffle_slots = true;
  const fvt::Reference r = oracle(fvt::make_problem(s));
  for (double x : r.out) ASSERT_TRUE(std::isfinite(x));
}

std::vector<float> as_floats(const std::vector<uint16_t>& bits) {
  std::vector<float> f(bits.size());
  for (size_t e = 0; e < bits.size(); ++e) f[e] = float(fvt::bits_to_float(bits[e], FV_DTYPE_BF16));
  return f;
}

TEST(Oracle, OutputDtypesRoundTheSameValues) {
  HostProblem hp = fvt::make_problem(random_spec(false, 29));
  const fvt::Reference ref = oracle(hp);
  fvt::IndexStore st;
  std::vector<uint16_t> out(hp.out_elems());
  fvt::Pointers p = fvt::host_pointers(hp, st, out.data(), nullptr);
  fv_args a = fvt::make_args(hp, p, FV_DEVICE_CPU, FV_IMPL_ORACLE, 0);  // bf16 out
  ASSERT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  // the float64 result rounded once to nearest (even on ties), not merely a neighbouring bf16 value
  for (size_t e = 0; e < out.size(); ++e) ASSERT_EQ(out[e], fv::round_to_bf16(ref.out[e])) << e << ": " << ref.out[e];
  const fvt::Comparison c = fvt::compare(hp, as_floats(out), {}, ref);
  EXPECT_LE(c.rel_l2, 1.0 / 256);
}

// fvt::compare's per-request error: a request whose rows are all wrong is found even where the batch's relative L2
// error stays under the tests' 1e-2 bound (the long request's outputs are small beside the short ones')
TEST(Comparison, OneWrongRequestIsNotHiddenByTheBatch) {
  CaseSpec s = fvt::uniform_spec(false, 4, 1, 64, 2, 1, 2);
  s.prefix = {-1, 20000};  // a padded request (prefix 1 at slot 0) and a long one
  s.draft = {2, 1};
  const HostProblem hp = fvt::make_problem(s);
  const fvt::Reference ref = oracle(hp);
  std::vector<float> got(ref.out.begin(), ref.out.end());
  fvt::Comparison c = fvt::compare(hp, got, {}, ref);
  EXPECT_LT(c.req_rel_l2, 1e-6);  // float rounding only
  const int64_t row = int64_t(hp.spec.hq) * hp.spec.dv;
  for (int64_t e = hp.qo_indptr[1] * row; e < hp.qo_indptr[2] * row; ++e) got[e] = 0.f;  // request 1: all zero
  c = fvt::compare(hp, got, {}, ref);
  EXPECT_EQ(c.worst_req, 1);
  EXPECT_DOUBLE_EQ(c.req_rel_l2, 1.0);
  EXPECT_LT(c.rel_l2, 1e-2) << "the batch figure alone would have passed this";
  got[0] = std::numeric_limits<float>::quiet_NaN();  // a NaN in request 0
  c = fvt::compare(hp, got, {}, ref);
  EXPECT_EQ(c.worst_req, 0);
  EXPECT_TRUE(std::isinf(c.req_rel_l2));
}

// fvt::compare's LSE check: an infinity must match in sign, and a NaN on either side is a failure
TEST(Comparison, LseInfinitiesMatchInSign) {
  CaseSpec s = fvt::uniform_spec(false, 2, 1, 64, 2, 5, 1);
  s.want_lse = true;
  const HostProblem hp = fvt::make_problem(s);
  fvt::Reference ref = oracle(hp);
  ASSERT_EQ(ref.lse.size(), size_t(4));
  const std::vector<float> out(ref.out.begin(), ref.out.end());
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  ref.lse[1] = -inf;  // as a row that sees nothing
  std::vector<float> lse = ref.lse;
  EXPECT_EQ(fvt::compare(hp, out, lse, ref).lse_bad, 0);
  lse[1] = inf;
  EXPECT_EQ(fvt::compare(hp, out, lse, ref).lse_bad, 1) << "+inf for -inf";
  lse[1] = 0.f;
  EXPECT_EQ(fvt::compare(hp, out, lse, ref).lse_bad, 1) << "a finite value for -inf";
  lse = ref.lse;
  lse[0] = nan;
  EXPECT_EQ(fvt::compare(hp, out, lse, ref).lse_bad, 1) << "NaN";
  lse = ref.lse;
  ref.lse[2] = nan;
  EXPECT_EQ(fvt::compare(hp, out, lse, ref).lse_bad, 1) << "a NaN reference";
}

// The LSE bound (fvt::lse_allowed): kLseAbs for every problem; relative to |lse| (kLseRelE4m3) only where scores may
// come from e4m3 wgmma (the S8 kernels: GQA d128 / d256 with fp8 pools and a bf16 model), so any other problem is held
// to kLseAbs at any |lse|
TEST(Comparison, LseBoundIsRelativeOnlyForE4m3Scores) {
  struct Kind {
    bool mla;
    int d, dtype;
    bool fp8, rel;
  };
  const Kind kinds[] = {
      {false, 128, FV_DTYPE_BF16, false, false},  // 16-bit pools
      {false, 128, FV_DTYPE_FP16, true, false},   // fp8 pools, fp16 model
      {false, 128, FV_DTYPE_BF16, true, true},    // fp8 pools, bf16 model: GQA d128
      {false, 256, FV_DTYPE_BF16, true, true},    // ... d256
      {false, 64, FV_DTYPE_BF16, true, false},    // ... d64 (no S8 kernel)
      {true, 0, FV_DTYPE_BF16, true, false},      // ... MLA (exact products)
  };
  for (const Kind& k : kinds) {
    CaseSpec s = fvt::uniform_spec(k.mla, 2, 1, k.d, 2, 5, 1);
    s.want_lse = true;
    s.dtype = k.dtype;
    s.kv_fp8 = k.fp8;
    if (s.kv_fp8) s.k_scale = s.v_scale = 1.f;
    const HostProblem hp = fvt::make_problem(s);
    const std::string what = "mla " + std::to_string(k.mla) + " d " + std::to_string(k.d) + " dtype " +
                             std::to_string(k.dtype) + " fp8 " + std::to_string(k.fp8);
    EXPECT_EQ(fvt::lse_allowed(hp, 60.0), k.rel ? 60.0 / 512 : fvt::kLseAbs) << what;
    fvt::Reference ref = oracle(hp);
    ASSERT_EQ(ref.lse.size(), size_t(4));
    const std::vector<float> out(ref.out.begin(), ref.out.end());
    ref.lse = {60.f, -60.f, 1.f, 0.f};
    std::vector<float> lse = ref.lse;
    EXPECT_EQ(fvt::compare(hp, out, lse, ref).lse_worst_ratio, 0.0);
    lse[0] = 60.06f;  // 0.06 at |lse| 60: 0.51 of 60 / 512
    const fvt::Comparison c = fvt::compare(hp, out, lse, ref);
    EXPECT_NEAR(c.lse_max_abs, 0.06, 1e-5);
    EXPECT_NEAR(c.lse_worst_ratio, k.rel ? 0.06 / (60.0 / 512) : 0.06 / fvt::kLseAbs, 1e-3) << what;
    lse[0] = 60.f;
    lse[1] = -60.13f;  // past 60 / 512 = 0.117: fails in every kind
    EXPECT_GT(fvt::compare(hp, out, lse, ref).lse_worst_ratio, 1.0) << what;
    lse[1] = -60.f;
    lse[2] = 1.006f;  // at |lse| 1 the absolute bound holds everywhere
    EXPECT_GT(fvt::compare(hp, out, lse, ref).lse_worst_ratio, 1.0) << what;
    lse[2] = 1.004f;
    EXPECT_LE(fvt::compare(hp, out, lse, ref).lse_worst_ratio, 1.0) << what;
  }
}

}  // namespace

namespace {
// fp8 e4m3 KV pools: the oracle on the bytes equals the oracle on a bf16 pool holding the decoded values
// (every e4m3 value is exact in bf16), decoded here independently of the library.
uint16_t e4m3_to_bf16_bits(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xf, mant = b & 7;
  const float v = exp == 0 ? std::ldexp(float(mant), -9) : std::ldexp(float(8 | mant), exp - 10);
  uint32_t w;
  const float sv = sign ? -v : v;
  std::memcpy(&w, &sv, 4);
  return static_cast<uint16_t>(w >> 16);  // exact: at most 4 significant bits
}

TEST(Oracle, Fp8PoolEqualsItsDecodedBf16Pool) {
  EXPECT_EQ(e4m3_to_bf16_bits(0x38), 0x3f80);  // 1.0
  EXPECT_EQ(e4m3_to_bf16_bits(0x7e), 0x43e0);  // 448, the largest
  EXPECT_EQ(e4m3_to_bf16_bits(0x01), 0x3b00);  // 2^-9, the smallest subnormal
  for (bool mla : {true, false}) {
    CaseSpec s = random_spec(mla, 77 + mla);
    s.kv_fp8 = true;
    s.k_scale = 0.5f;
    s.v_scale = 1.25f;
    HostProblem h8 = fvt::make_problem(s);
    HostProblem h16 = h8;
    h16.spec.kv_fp8 = false;
    h16.k_pool.resize(h8.k_pool8.size());
    for (size_t e = 0; e < h8.k_pool8.size(); ++e)
      h16.k_pool[e] = h8.k_pool8[e] == 0x7f ? 0xffff : e4m3_to_bf16_bits(h8.k_pool8[e]);
    h16.v_pool.resize(h8.v_pool8.size());
    for (size_t e = 0; e < h8.v_pool8.size(); ++e)
      h16.v_pool[e] = h8.v_pool8[e] == 0x7f ? 0xffff : e4m3_to_bf16_bits(h8.v_pool8[e]);
    h16.k_pool8.clear();
    h16.v_pool8.clear();
    const fvt::Reference r8 = oracle(h8), r16 = oracle(h16);
    expect_identical(r8, r16);
  }
}

// run_oracle_heads's output for request r and heads [h0, h0 + nh) against the whole oracle's: the request's rows
// equal, bit for bit, and the rows before it unwritten (NaN). label: what the failure messages name
void expect_head_slice(const HostProblem& hp, const fvt::Reference& whole, int r, int h0, int nh,
                       const std::vector<double>& part, const std::string& label) {
  const int64_t r0 = hp.qo_indptr[r], r1 = hp.qo_indptr[r + 1], dv = hp.spec.dv, hq = hp.spec.hq;
  ASSERT_EQ(part.size(), size_t(r1 * nh * dv)) << label;
  for (int64_t t = 0; t < r1; ++t)
    for (int h = 0; h < nh; ++h)
      for (int64_t d = 0; d < dv; ++d) {
        const double got = part[(t * nh + h) * dv + d];
        if (t < r0)
          ASSERT_TRUE(std::isnan(got)) << label << ": row " << t << " written";
        else
          ASSERT_EQ(got, whole.out[(t * hq + h0 + h) * dv + d]) << label << ": t " << t << " h " << h << " d " << d;
      }
}

// run_oracle_heads (the bench's check of problems too large for the whole oracle) gives request 0's rows of the
// chosen heads exactly as the whole oracle does: MLA with sinks, GQA whole groups on a page table with window
// offsets, fp8 pools; and refuses a range that splits a GQA group
TEST(Oracle, HeadSlicesOfRequestZeroEqualTheWholeProblem) {
  struct Slice {
    int h0, nh;
  };
  for (int variant = 0; variant < 3; ++variant) {
    CaseSpec s = random_spec(variant != 1, 91 + variant);
    if (variant == 0) {
      s.hq = 8;
      s.sinks = true;
    }
    if (variant == 1) {  // GQA 8/2: groups of 4
      s.addressing = FV_KV_PAGE_TABLE;
      s.page_size = 4;
      s.sliding_window = 20;
      s.window_offsets = true;
      s.logit_cap = 3.f;
    }
    if (variant == 2) {
      s.kv_fp8 = true;
      s.k_scale = 0.75f;
      s.v_scale = 1.5f;
    }
    const HostProblem hp = fvt::make_problem(s);
    const fvt::Reference whole = oracle(hp);
    ASSERT_GT(hp.qo_indptr[1] - hp.qo_indptr[0], 1);
    const std::vector<Slice> slices = variant == 1 ? std::vector<Slice>{{0, 4}, {4, 4}, {0, 8}}
                                                   : std::vector<Slice>{{0, 1}, {s.hq - 1, 1}, {1, 2}, {0, s.hq}};
    for (const Slice& sl : slices) {
      std::vector<double> part;
      ASSERT_EQ(fvt::run_oracle_heads(hp, sl.h0, sl.nh, &part), FV_OK) << fv_last_error();
      ASSERT_NO_FATAL_FAILURE(expect_head_slice(hp, whole, 0, sl.h0, sl.nh, part,
                                                "variant " + std::to_string(variant) + " heads " +
                                                    std::to_string(sl.h0) + "+" + std::to_string(sl.nh)));
    }
    if (variant == 1) {
      std::vector<double> part;
      EXPECT_EQ(fvt::run_oracle_heads(hp, 2, 4, &part), FV_ERR_INVALID_VALUE);  // splits both groups
      EXPECT_EQ(fvt::run_oracle_heads(hp, 0, 2, &part), FV_ERR_INVALID_VALUE);
      EXPECT_EQ(fvt::run_oracle_heads(hp, 4, 8, &part), FV_ERR_INVALID_VALUE);  // past the last head
    }
  }
}

// run_oracle_heads on any request (the bench checks the last request besides request 0): its rows of the chosen
// heads exactly as the whole oracle gives them, for each mask form, token slots and page tables, window offsets,
// sinks, fp8 pools; other requests' rows stay NaN; a request past the batch is refused
TEST(Oracle, HeadSlicesOfEveryRequestEqualTheWholeProblem) {
  for (int variant = 0; variant < 6; ++variant) {
    CaseSpec s = random_spec(variant % 2 == 0, 131 + variant);
    s.draft = {5, 0, 7, 3};
    s.prefix = {40, 77, 0, 120};
    s.max_draft = 7;
    s.mask_kind = variant % 3;  // bytes, bits, parents
    if (variant == 1 || variant == 4) {
      s.addressing = FV_KV_PAGE_TABLE;
      s.page_size = 8;
    }
    if (variant == 3) {
      s.mask_kind = FV_MASK_BYTES;
      s.sliding_window = 30;
      s.window_offsets = true;
    }
    if (variant == 2) s.sinks = true;
    if (variant == 5) {
      s.kv_fp8 = true;
      s.k_scale = 0.5f;
      s.v_scale = 3.f;
    }
    const HostProblem hp = fvt::make_problem(s);
    const fvt::Reference whole = oracle(hp);
    const int unit = s.hkv == 1 ? 1 : s.hq / s.hkv;
    const int B = static_cast<int>(hp.qo_indptr.size()) - 1;
    for (int r = 0; r < B; ++r) {
      for (int h0 : {0, s.hq - unit}) {
        std::vector<double> part;
        ASSERT_EQ(fvt::run_oracle_heads(hp, h0, unit, &part, r), FV_OK) << "variant " << variant << " request " << r
                                                                       << ": " << fv_last_error();
        ASSERT_NO_FATAL_FAILURE(expect_head_slice(hp, whole, r, h0, unit, part,
                                                  "variant " + std::to_string(variant) + " request " +
                                                      std::to_string(r) + " heads " + std::to_string(h0)));
      }
    }
    std::vector<double> part;
    EXPECT_EQ(fvt::run_oracle_heads(hp, 0, unit, &part, B), FV_ERR_INVALID_VALUE);
    EXPECT_EQ(fvt::run_oracle_heads(hp, 0, unit, &part, -1), FV_ERR_INVALID_VALUE);
  }
}

}  // namespace
