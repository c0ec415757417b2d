// Every ABI misuse gets its own status and a message that names the argument and its value.
#include <cstring>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "testkit.h"

namespace {

using fvt::CaseSpec;
using fvt::HostProblem;

CaseSpec small_spec(bool mla = false) {
  CaseSpec s;
  if (mla) {
    s.hq = 4; s.hkv = 1; s.dqk = 576; s.dv = 512;
  } else {
    s.hq = 4; s.hkv = 2; s.dqk = 64; s.dv = 64;
  }
  s.max_draft = 4;
  s.draft = {3, 4};
  s.prefix = {5, 9};
  s.seed = 11;
  return s;
}

// A valid CPU call on host buffers; each test breaks one thing.
struct AbiFixture : ::testing::Test {
  HostProblem hp = fvt::make_problem(small_spec());
  fvt::IndexStore store;
  std::vector<double> out = std::vector<double>(hp.out_elems());
  std::vector<float> lse = std::vector<float>(hp.total_q * hp.spec.hq);
  fv_args a{};
  void SetUp() override {
    fvt::Pointers p = fvt::host_pointers(hp, store, out.data(), lse.data());
    a = fvt::make_args(hp, p, FV_DEVICE_CPU, FV_IMPL_ORACLE, FV_DTYPE_FP64);
  }
  fv_status run() { return fv_run(&a, nullptr, 0, nullptr); }
};

#define EXPECT_REJECTED(call, status, ...)                                                       \
  do {                                                                                           \
    const fv_status st_ = (call);                                                                \
    EXPECT_EQ(st_, status) << fv_status_string(st_) << ": " << fv_last_error();                  \
    const std::string msg_ = fv_last_error();                                                    \
    const std::vector<std::string> needles_{__VA_ARGS__};                                        \
    for (const std::string& needle : needles_)                                                   \
      EXPECT_NE(msg_.find(needle), std::string::npos) << "message '" << msg_ << "' lacks '" << needle << "'"; \
  } while (0)

TEST_F(AbiFixture, ValidCallSucceeds) { EXPECT_EQ(run(), FV_OK) << fv_last_error(); }

TEST_F(AbiFixture, NullArgs) { EXPECT_REJECTED(fv_run(nullptr, nullptr, 0, nullptr), FV_ERR_NULL_POINTER, "args"); }

TEST_F(AbiFixture, NullTensorPointers) {
  const fv_args good = a;
  struct Case { const char* name; void (*breakit)(fv_args&); };
  const Case cases[] = {
      {"q", [](fv_args& x) { x.q = nullptr; }},
      {"out", [](fv_args& x) { x.out = nullptr; }},
      {"k_draft", [](fv_args& x) { x.k_draft = nullptr; }},
      {"v_draft", [](fv_args& x) { x.v_draft = nullptr; }},
      {"k_pool", [](fv_args& x) { x.k_pool = nullptr; }},
      {"v_pool", [](fv_args& x) { x.v_pool = nullptr; }},
      {"qo_indptr", [](fv_args& x) { x.qo_indptr.data = nullptr; }},
      {"kv_indptr", [](fv_args& x) { x.kv_indptr.data = nullptr; }},
      {"kv_indices", [](fv_args& x) { x.kv_indices.data = nullptr; }},
      {"custom_mask", [](fv_args& x) { x.custom_mask = nullptr; }},
      {"mask_indptr", [](fv_args& x) { x.mask_indptr.data = nullptr; }},
  };
  for (const Case& c : cases) {
    a = good;
    c.breakit(a);
    SCOPED_TRACE(c.name);
    EXPECT_REJECTED(run(), FV_ERR_NULL_POINTER, c.name, "NULL");
  }
  a = good;
  a.problem.mask_kind = FV_MASK_BITS;
  a.mask_bits = nullptr;
  EXPECT_REJECTED(run(), FV_ERR_NULL_POINTER, "mask_bits");
  a = good;
  a.problem.mask_kind = FV_MASK_PARENTS;
  a.parents = nullptr;
  EXPECT_REJECTED(run(), FV_ERR_NULL_POINTER, "parents");
  a = good;
  a.problem.kv_addressing = FV_KV_PAGE_TABLE;
  a.page_table = nullptr;
  EXPECT_REJECTED(run(), FV_ERR_NULL_POINTER, "page_table");
}

TEST_F(AbiFixture, HeadCountNotMultiple) {
  a.problem.num_q_heads = 5;  // kv heads 2
  EXPECT_REJECTED(run(), FV_ERR_HEAD_COUNT, "num_q_heads (5)", "num_kv_heads (2)");
  a.problem.num_q_heads = 4;
  a.problem.num_kv_heads = 0;
  EXPECT_REJECTED(run(), FV_ERR_HEAD_COUNT, "num_kv_heads (0)");
}

TEST_F(AbiFixture, UnsupportedHeadDims) {
  a.problem.head_dim_qk = 100;
  a.problem.head_dim_v = 100;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED_HEAD_DIM, "head_dim_qk", "(100, 100)");
  a.problem.head_dim_qk = 576;
  a.problem.head_dim_v = 576;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED_HEAD_DIM, "(576, 576)");
  a.problem.head_dim_qk = 128;
  a.problem.head_dim_v = 64;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED_HEAD_DIM, "(128, 64)");
}

TEST_F(AbiFixture, UnsupportedDtypes) {
  a.problem.dtype = 0;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED_DTYPE, "problem.dtype (0");
  a.problem.dtype = 99;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED_DTYPE, "problem.dtype (99");
  a.problem.dtype = FV_DTYPE_FP64;  // an output-only type
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED_DTYPE, "problem.dtype (4, fp64)");
  a.problem.dtype = FV_DTYPE_BF16;
  a.problem.out_dtype = FV_DTYPE_FP16;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED_DTYPE, "out_dtype (2, fp16)");
  // fp32 inputs and fp64 outputs are the oracle's; CUDA refuses them before touching any device
  a.problem.out_dtype = 0;
  a.problem.device = FV_DEVICE_CUDA;
  a.problem.impl = FV_IMPL_AUTO;
  a.problem.dtype = FV_DTYPE_FP32;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED_DTYPE, "problem.dtype (3, fp32)", "CUDA");
  a.problem.dtype = FV_DTYPE_BF16;
  a.problem.out_dtype = FV_DTYPE_FP64;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED_DTYPE, "out_dtype (4, fp64)");
}

TEST_F(AbiFixture, NegativeLengths) {
  a.problem.batch_size = -1;
  EXPECT_REJECTED(run(), FV_ERR_BAD_LENGTH, "batch_size (-1)");
  a.problem.batch_size = 2;
  a.problem.max_draft = 0;
  EXPECT_REJECTED(run(), FV_ERR_BAD_LENGTH, "max_draft (0)");
  a.problem.max_draft = 4;
  a.num_slots = 0;
  EXPECT_REJECTED(run(), FV_ERR_BAD_LENGTH, "num_slots (0)");
}

TEST_F(AbiFixture, NegativeIndptrEntries) {
  store.qo32[0] = -3;
  EXPECT_REJECTED(run(), FV_ERR_BAD_LENGTH, "qo_indptr[0] (-3)");
  store.qo32[0] = 0;
  store.kv32[1] = -1;
  EXPECT_REJECTED(run(), FV_ERR_BAD_LENGTH, "kv_indptr[1] (-1)");
}

TEST_F(AbiFixture, InconsistentLengths) {
  store.qo32[1] = 5;  // request 0 has 5 draft tokens > max_draft 4
  EXPECT_REJECTED(run(), FV_ERR_INCONSISTENT_LENGTHS, "request 0", "max_draft (4)");
  store.qo32[1] = 3;
  store.qo32[2] = 2;  // request 1 would have 2 - 3 < 0 draft tokens
  EXPECT_REJECTED(run(), FV_ERR_INCONSISTENT_LENGTHS, "qo_indptr decreases at request 1");
  store.qo32[2] = 7;
  store.kv32[1] = 20;  // kv_indptr[2] = 14 < 20
  EXPECT_REJECTED(run(), FV_ERR_INCONSISTENT_LENGTHS, "kv_indptr decreases");
}

TEST_F(AbiFixture, MaskIndptrDisagreesWithLengths) {
  store.m64[1] += 1;
  EXPECT_REJECTED(run(), FV_ERR_MASK_INDPTR, "mask_indptr[0..1]", "request 0", "N*(off+P+N)");
}

TEST_F(AbiFixture, BadIndices) {
  store.idx64[3] = hp.num_slots;  // one past the pool
  EXPECT_REJECTED(run(), FV_ERR_BAD_INDEX, "kv_indices[3]", std::to_string(hp.num_slots).c_str());
  store.idx64[3] = -1;
  EXPECT_REJECTED(run(), FV_ERR_BAD_INDEX, "kv_indices[3]", "= -1");
}

TEST_F(AbiFixture, PageTableRowTooShort) {
  const HostProblem paged = fvt::relayout(hp, FV_KV_PAGE_TABLE, 4, true, 3);  // prefixes 5 and 9: 2 and 3 pages
  std::vector<int32_t> table = paged.page_table;
  fv_args b = a;
  b.problem.kv_addressing = FV_KV_PAGE_TABLE;
  b.problem.page_size = 4;
  b.page_table = table.data();
  b.page_table_stride = paged.page_table_stride;
  b.k_pool = paged.k_pool.data();
  b.v_pool = paged.v_pool.data();
  b.num_slots = paged.num_slots;
  ASSERT_GE(paged.page_table_stride, 3);
  EXPECT_EQ(fv_run(&b, nullptr, 0, nullptr), FV_OK) << fv_last_error();
  b.page_table_stride = 2;  // request 1 needs 3 pages
  EXPECT_REJECTED(fv_run(&b, nullptr, 0, nullptr), FV_ERR_BAD_INDEX, "request 1", "3 pages", "page_table_stride 2");
  // a prefix length near INT64_MAX: its page count must not overflow into a negative that passes the check (and
  // then reads the table past its end)
  const int64_t huge = INT64_MAX;
  std::vector<int64_t> kv_indptr = {0, huge, huge};
  b.page_table_stride = paged.page_table_stride;
  b.kv_indptr = fv_index{kv_indptr.data(), FV_INDEX_INT64};
  b.problem.page_size = 2;
  EXPECT_REJECTED(fv_run(&b, nullptr, 0, nullptr), FV_ERR_BAD_INDEX, "request 0", "4611686018427387904 pages");
}

TEST_F(AbiFixture, BadParents) {
  a.problem.mask_kind = FV_MASK_PARENTS;
  std::vector<int32_t> parents = hp.parents;
  a.parents = parents.data();
  ASSERT_EQ(run(), FV_OK) << fv_last_error();
  parents[1] = 7;  // request 0 has 3 drafts
  EXPECT_REJECTED(run(), FV_ERR_BAD_INDEX, "parents[1]", "= 7");
  parents[1] = 2;
  parents[2] = 1;  // 1 -> 2 -> 1
  EXPECT_REJECTED(run(), FV_ERR_BAD_MASK, "cycle");
  parents[1] = 1;  // its own parent
  EXPECT_REJECTED(run(), FV_ERR_BAD_MASK, "cycle");
}

TEST_F(AbiFixture, BadStrides) {
  const fv_args good = a;
  a.q_stride_head = 32;  // < head dim 64
  EXPECT_REJECTED(run(), FV_ERR_BAD_STRIDE, "q_stride_head (32)");
  a = good;
  a.k_pool_stride_slot = -128;
  EXPECT_REJECTED(run(), FV_ERR_BAD_STRIDE, "k_pool", "-128");
  a = good;
  a.out_stride_token = 64;  // 4 heads of 64 need 256
  EXPECT_REJECTED(run(), FV_ERR_BAD_STRIDE, "out row stride (64)", "(256)");
  a = good;
  a.q_stride_token = 64;  // a head-major view [heads, tokens, 64] (the header: rows outermost)
  a.q_stride_head = 64 * 1024;
  EXPECT_REJECTED(run(), FV_ERR_BAD_STRIDE, "q row stride (64)");
  a = good;
  a.q_stride_head = int64_t(3.5e18);  // 3 x that wraps 64 bits: must be rejected, not wrapped into a "fit"
  EXPECT_REJECTED(run(), FV_ERR_BAD_STRIDE, "q_stride_head", "overflows");
  a = good;
  a.q_stride_head = int64_t(1) << 62;
  EXPECT_REJECTED(run(), FV_ERR_BAD_STRIDE, "q_stride_head", "overflows");
  a = good;
  a.problem.mask_kind = FV_MASK_BITS;
  a.mask_bits_stride = 0;
  EXPECT_REJECTED(run(), FV_ERR_BAD_STRIDE, "mask_bits_stride (0)");
  a = good;
  a.lse_stride_token = 2;
  EXPECT_REJECTED(run(), FV_ERR_BAD_STRIDE, "lse_stride_token (2)");
  a = good;
  a.problem.kv_addressing = FV_KV_PAGE_TABLE;
  a.page_table = hp.parents.data();  // any pointer: the stride is checked first
  a.page_table_stride = 0;
  EXPECT_REJECTED(run(), FV_ERR_BAD_STRIDE, "page_table_stride (0)");
}

TEST_F(AbiFixture, InvalidEnumsAndScalars) {
  const fv_args good = a;
  a.problem.device = 7;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "problem.device (7)");
  a = good;
  a.problem.impl = 9;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "problem.impl (9)");
  a = good;
  a.problem.mask_kind = 4;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "problem.mask_kind (4)");
  a = good;
  a.problem.kv_addressing = 2;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "problem.kv_addressing (2)");
  a = good;
  a.problem.kv_addressing = FV_KV_PAGE_TABLE;
  a.problem.page_size = 0;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "problem.page_size (0)");
  a = good;
  a.problem.page_size = 0;  // ignored with token slots (flashverify.h): not a divisor anywhere
  EXPECT_EQ(run(), FV_OK) << fv_last_error();
  a = good;
  a.problem.num_kv_splits = -2;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "num_kv_splits (-2)");
  a = good;
  a.problem.profile = 3;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "problem.profile (3)");
  a = good;
  a.problem.flags = 2;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "problem.flags (0x2)", "FV_FLAG_CHECK_INDICES");
  a = good;
  a.problem.flags = FV_FLAG_CHECK_INDICES;  // the CPU path checks every index anyway
  EXPECT_EQ(run(), FV_OK) << fv_last_error();
  a = good;
  a.sm_scale = std::nanf("");
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "sm_scale");
  a = good;
  a.qo_indptr.dtype = 5;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "qo_indptr.dtype (5)");
}

TEST_F(AbiFixture, ScoreModifierArguments) {
  const fv_args good = a;
  a.logit_cap = -1.f;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "logit_cap (-1)");
  a = good;
  a.logit_cap = INFINITY;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "logit_cap (inf)");
  a = good;
  a.xai_temperature_len = 1;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "xai_temperature_len (1)");
  a = good;
  a.k_scale = NAN;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "k_scale");
  a = good;
  const int32_t offsets[2] = {0, 0};
  a.window_kv_offsets = offsets;
  a.problem.mask_kind = FV_MASK_PARENTS;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED, "window_kv_offsets", "FV_MASK_BYTES");
  a = good;
  const int32_t negative[2] = {0, -2};
  a.window_kv_offsets = negative;
  EXPECT_EQ(run(), FV_OK) << fv_last_error();  // without a sliding window the offsets are not read (SGLang's rule)
  a.sliding_window = 1 << 30;
  EXPECT_REJECTED(run(), FV_ERR_BAD_LENGTH, "window_kv_offsets[1] (-2)");
  a = good;
  a.sm_scale = 1e20f;  // the kernels fold sm_scale x k_scale x log2(e) into one float
  a.k_scale = 1e20f;
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "overflows float");
  a.k_scale = 1.f;
  a.sm_scale = 3e38f;  // x log2(e) alone
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "overflows float");
  a.sm_scale = -1e20f;  // large but representable: accepted
  a.k_scale = 1e-3f;
  EXPECT_EQ(run(), FV_OK) << fv_last_error();
  a = good;
  std::vector<float> sinks(hp.spec.hq, 0.5f);
  sinks[3] = NAN;
  a.sinks = sinks.data();
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "sinks[3]");
  sinks[3] = 3e38f;  // finite, but x log2(e) overflows float in the kernels
  EXPECT_REJECTED(run(), FV_ERR_INVALID_VALUE, "sinks[3]");
  sinks[3] = 2.35e38f;  // the largest valid sink, and a very negative one
  sinks[2] = -3e38f;
  EXPECT_EQ(run(), FV_OK) << fv_last_error();
  a = good;
  a.sliding_window = -5;  // <= 0: off
  a.xai_temperature_len = -1;
  EXPECT_EQ(run(), FV_OK) << fv_last_error();
}

TEST_F(AbiFixture, ImplementationDeviceMismatch) {
  a.problem.impl = FV_IMPL_NAIVE;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED, "FV_DEVICE_CUDA only");
  a.problem.impl = FV_IMPL_ORACLE;
  a.problem.device = FV_DEVICE_CUDA;
  a.problem.out_dtype = 0;
  EXPECT_REJECTED(run(), FV_ERR_UNSUPPORTED, "FV_IMPL_ORACLE");
}

// A valid problem for the CPU oracle: 3 requests of up to 8 drafts, 8 q heads on one KV head, head dim 128, bf16
fv_problem cpu_problem() {
  fv_problem p;
  fv_problem_init(&p);
  p.device = FV_DEVICE_CPU;
  p.dtype = FV_DTYPE_BF16;
  p.batch_size = 3;
  p.max_draft = 8;
  p.num_q_heads = 8;
  p.num_kv_heads = 1;
  p.head_dim_qk = 128;
  p.head_dim_v = 128;
  return p;
}

TEST(Abi, WorkspaceSizeArguments) {
  fv_problem p;
  fv_problem_init(&p);
  size_t bytes = 1;
  EXPECT_REJECTED(fv_workspace_size(nullptr, &bytes), FV_ERR_NULL_POINTER, "problem");
  EXPECT_REJECTED(fv_workspace_size(&p, nullptr), FV_ERR_NULL_POINTER, "bytes");
  EXPECT_REJECTED(fv_workspace_size(&p, &bytes), FV_ERR_UNSUPPORTED_DTYPE, "dtype (0");  // init leaves it unset
  EXPECT_EQ(bytes, 0u);
  p = cpu_problem();
  EXPECT_EQ(fv_workspace_size(&p, &bytes), FV_OK) << fv_last_error();
  EXPECT_EQ(bytes, 0u);  // the oracle needs none
  // query rows past 2^24 (the planner's and the row tiles' int32 counts would wrap): refused, not planned
  p.num_q_heads = 32768;
  p.max_draft = 65536;
  EXPECT_REJECTED(fv_workspace_size(&p, &bytes), FV_ERR_UNSUPPORTED, "num_q_heads x max_draft (32768 x 65536)");
  p.device = FV_DEVICE_CUDA;
  EXPECT_REJECTED(fv_workspace_size(&p, &bytes), FV_ERR_UNSUPPORTED, "2^24");
  p.num_q_heads = 128;  // MLA's largest head count at the largest max_draft: within the bound
  p.device = FV_DEVICE_CPU;
  EXPECT_EQ(fv_workspace_size(&p, &bytes), FV_OK) << fv_last_error();
}

// fv_plan_config (v54): which kernel a problem takes, for diagnostics and the GPU tests that force a configuration
TEST(Abi, PlanConfigArguments) {
  fv_problem p = cpu_problem();
  char name[32];
  std::memset(name, 'x', sizeof name);
  EXPECT_REJECTED(fv_plan_config(nullptr, name, sizeof name), FV_ERR_NULL_POINTER, "problem");
  EXPECT_REJECTED(fv_plan_config(&p, nullptr, sizeof name), FV_ERR_NULL_POINTER, "name");
  EXPECT_REJECTED(fv_plan_config(&p, name, 0), FV_ERR_INVALID_VALUE, "size is 0");
  ASSERT_EQ(fv_plan_config(&p, name, sizeof name), FV_OK) << fv_last_error();
  EXPECT_STREQ(name, "oracle");
  EXPECT_REJECTED(fv_plan_config(&p, name, 6), FV_ERR_INVALID_VALUE, "needs 7 bytes");  // "oracle" + NUL
  EXPECT_STREQ(name, "");  // cleared, not left half-written
  fv_problem bad;
  fv_problem_init(&bad);  // the same checks as fv_workspace_size
  EXPECT_REJECTED(fv_plan_config(&bad, name, sizeof name), FV_ERR_UNSUPPORTED_DTYPE, "dtype (0");
  EXPECT_STREQ(name, "");
}

// fv_last_error()'s pointer stays valid, and keeps pointing at the latest message, when a later failure on the thread
// stores a longer one (it was a std::string's buffer, which that reallocated)
TEST(Abi, LastErrorPointerSurvivesLongerMessages) {
  size_t bytes = 0;
  ASSERT_EQ(fv_workspace_size(nullptr, &bytes), FV_ERR_NULL_POINTER);
  const char* first = fv_last_error();
  const std::string short_msg = first;
  fv_problem p = cpu_problem();
  p.head_dim_qk = p.head_dim_v = 96;  // no such layout: a message that names the supported ones, longer than the first
  ASSERT_NE(fv_workspace_size(&p, &bytes), FV_OK);
  const std::string long_msg = fv_last_error();
  ASSERT_GT(long_msg.size(), short_msg.size() + 16) << long_msg;
  EXPECT_EQ(first, fv_last_error());
  EXPECT_EQ(std::string(first), long_msg);
}

// Why the fake-H200 tests below skip on a GPU machine (the fake device is honoured only where no GPU is present)
constexpr const char* kFakeH200Skip =
    "a GPU is present: the fake H200 (FLASHVERIFY_PLAN_DEVICE) is used only without one; CPU CI runs this";

// The CUDA path, planned for a fake H200 through FLASHVERIFY_PLAN_DEVICE (honoured only when no GPU is
// present): the exact workspace is accepted up to the launch, one byte less is rejected, and a missing
// GPU is reported as such.
TEST(Abi, WorkspaceOneByteShortOnCuda) {
  if (fvt::gpu_unavailable_reason().empty()) GTEST_SKIP() << kFakeH200Skip;
  setenv("FLASHVERIFY_PLAN_DEVICE", "132,232448,233472,9,0", 1);
  HostProblem hp = fvt::make_problem(small_spec(true));
  fvt::IndexStore store;
  std::vector<uint16_t> out(hp.out_elems());
  std::vector<float> lse(hp.total_q * hp.spec.hq);
  fvt::Pointers p = fvt::host_pointers(hp, store, out.data(), lse.data());
  // host buffers are 16-byte aligned enough for validation; the launch itself never happens
  fv_args a = fvt::make_args(hp, p, FV_DEVICE_CUDA, FV_IMPL_FAST, 0);
  size_t bytes = 0;
  ASSERT_EQ(fv_workspace_size(&a.problem, &bytes), FV_OK) << fv_last_error();
  ASSERT_GT(bytes, 0u);
  std::vector<uint8_t> ws(bytes + 16);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 15) & ~uintptr_t(15));
  EXPECT_REJECTED(fv_run(&a, aligned, bytes - 1, nullptr), FV_ERR_WORKSPACE_TOO_SMALL,
                  std::to_string(bytes - 1).c_str(), std::to_string(bytes).c_str());
  EXPECT_REJECTED(fv_run(&a, nullptr, bytes, nullptr), FV_ERR_NULL_POINTER, "workspace");
  // the kernels use 16-byte vectors in it
  EXPECT_REJECTED(fv_run(&a, static_cast<uint8_t*>(aligned) + 8, bytes, nullptr), FV_ERR_BAD_STRIDE, "workspace",
                  "16-byte aligned");
  EXPECT_REJECTED(fv_run(&a, aligned, bytes, nullptr), FV_ERR_NO_DEVICE, "no CUDA device");
  unsetenv("FLASHVERIFY_PLAN_DEVICE");
}

TEST(Abi, FastPathArgumentChecksOnCuda) {
  if (fvt::gpu_unavailable_reason().empty()) GTEST_SKIP() << kFakeH200Skip;
  setenv("FLASHVERIFY_PLAN_DEVICE", "132,232448,233472,9,0", 1);
  HostProblem hp = fvt::make_problem(small_spec(true));
  fvt::IndexStore store;
  std::vector<uint16_t> out(hp.out_elems());
  fvt::Pointers p = fvt::host_pointers(hp, store, out.data(), nullptr);
  fv_args a = fvt::make_args(hp, p, FV_DEVICE_CUDA, FV_IMPL_FAST, 0);
  const fv_args good = a;
  // MLA's V must be the first 512 columns of K for the fast kernel
  std::vector<uint16_t> other(hp.k_pool.size());
  a.v_pool = other.data();
  EXPECT_REJECTED(fv_run(&a, nullptr, 0, nullptr), FV_ERR_UNSUPPORTED, "v_pool", "first 512 columns of k_pool");
  a = good;
  a.q_stride_token += 4;  // not a multiple of 8 elements
  EXPECT_REJECTED(fv_run(&a, nullptr, 0, nullptr), FV_ERR_BAD_STRIDE, "q strides", "multiples of 8");
  a = good;
  a.q = static_cast<const uint8_t*>(a.q) + 2;
  EXPECT_REJECTED(fv_run(&a, nullptr, 0, nullptr), FV_ERR_BAD_STRIDE, "args->q", "16-byte aligned");
  // a head stride is constrained only where the tensor has more than one head (the header): MLA's one KV head may
  // give any (v59: the fast path asked multiples of 8 of it), q's four heads may not
  a = good;
  a.k_pool_stride_head = a.v_pool_stride_head = a.k_draft_stride_head = a.v_draft_stride_head = 1;
  const fv_status one_head = fv_run(&a, nullptr, 0, nullptr);
  EXPECT_NE(one_head, FV_ERR_BAD_STRIDE) << fv_last_error();
  EXPECT_NE(one_head, FV_OK);  // (no GPU here: refused later, for the device)
  a = good;
  a.q_stride_head += 4;  // 4 heads: still a multiple of 8 elements asked
  a.q_stride_token += 16;
  EXPECT_REJECTED(fv_run(&a, nullptr, 0, nullptr), FV_ERR_BAD_STRIDE, "q strides", "multiples of 8");
  // an sm_120-class device has no room for the large MLA tiles
  a = good;
  setenv("FLASHVERIFY_PLAN_DEVICE", "188,101376,102400,12,0", 1);
  a.problem.profile = FV_PROFILE_LARGE_SMEM;
  size_t bytes = 0;
  EXPECT_REJECTED(fv_workspace_size(&a.problem, &bytes), FV_ERR_UNSUPPORTED, "FV_PROFILE_LARGE_SMEM", "sm_120");
  a.problem.profile = FV_PROFILE_AUTO;
  EXPECT_EQ(fv_workspace_size(&a.problem, &bytes), FV_OK) << fv_last_error();
  unsetenv("FLASHVERIFY_PLAN_DEVICE");
}

// The naive kernel's grid is batch_size x max_draft blocks by num_q_heads: past CUDA's limits (2^31 - 1, 65535) it
// is refused up front (a wrapped x once left rows unwritten with FV_OK)
TEST(Abi, NaiveKernelGridLimits) {
  if (fvt::gpu_unavailable_reason().empty()) GTEST_SKIP() << kFakeH200Skip;
  setenv("FLASHVERIFY_PLAN_DEVICE", "132,232448,233472,9,0", 1);
  fv_problem p;
  fv_problem_init(&p);
  p.impl = FV_IMPL_NAIVE;
  p.dtype = FV_DTYPE_BF16;
  p.num_kv_heads = 1;
  p.head_dim_qk = 128;
  p.head_dim_v = 128;
  size_t bytes = 1;
  p.batch_size = 70000;  // x 65536 = 4.6e9 blocks
  p.max_draft = 65536;
  p.num_q_heads = 8;
  EXPECT_REJECTED(fv_workspace_size(&p, &bytes), FV_ERR_UNSUPPORTED, "naive kernel", "70000 x 65536");
  p.batch_size = 32767;  // 2^31 - 65536 blocks: within the limit
  EXPECT_EQ(fv_workspace_size(&p, &bytes), FV_OK) << fv_last_error();
  EXPECT_EQ(bytes, 0u);
  p.batch_size = 1;
  p.max_draft = 8;
  p.num_q_heads = 65536;
  EXPECT_REJECTED(fv_workspace_size(&p, &bytes), FV_ERR_UNSUPPORTED, "naive kernel", "num_q_heads (65536)");
  unsetenv("FLASHVERIFY_PLAN_DEVICE");
}

TEST(Abi, NoDeviceIsReportedPlainly) {
  if (fvt::gpu_unavailable_reason().empty()) GTEST_SKIP() << "a GPU is present";
  fv_problem p;
  fv_problem_init(&p);
  p.dtype = FV_DTYPE_BF16;
  p.batch_size = 1;
  p.max_draft = 4;
  p.num_q_heads = 8;
  p.num_kv_heads = 8;
  p.head_dim_qk = 64;
  p.head_dim_v = 64;
  size_t bytes = 0;
  EXPECT_REJECTED(fv_workspace_size(&p, &bytes), FV_ERR_NO_DEVICE, "no usable CUDA device");
}

TEST(Abi, StatusStringsAreDistinct) {
  std::set<std::string> seen;
  for (int s = FV_OK; s <= FV_ERR_INTERNAL; ++s) {
    const std::string str = fv_status_string(static_cast<fv_status>(s));
    EXPECT_FALSE(str.empty());
    EXPECT_NE(str, "unknown status") << s;
    EXPECT_TRUE(seen.insert(str).second) << "duplicate: " << str;
  }
  EXPECT_STREQ(fv_status_string(static_cast<fv_status>(1234)), "unknown status");
}

TEST(Abi, VersionAndBuildInfo) {
  EXPECT_EQ(fv_version(), (FLASHVERIFY_VERSION_MAJOR << 16) | (FLASHVERIFY_VERSION_MINOR << 8) | FLASHVERIFY_VERSION_PATCH);
  const std::string info = fv_build_info();
  EXPECT_NE(info.find("flashverify"), std::string::npos);
  // the architectures this build was configured with (CMAKE_CUDA_ARCHITECTURES)
  EXPECT_NE(info.find("sm " FV_EXPECTED_ARCHS), std::string::npos) << info << " vs " << FV_EXPECTED_ARCHS;
}

TEST(Abi, EmptyBatchIsValid) {
  fv_args a;
  fv_args_init(&a);
  CaseSpec s = small_spec();
  s.draft = {};
  s.prefix = {};
  HostProblem hp = fvt::make_problem(s);
  fvt::IndexStore store;
  double dummy = 0;
  fvt::Pointers p = fvt::host_pointers(hp, store, &dummy, nullptr);
  p.q = p.k_draft = p.v_draft = p.k_pool = p.v_pool = &dummy;  // no tokens: any valid pointer
  a = fvt::make_args(hp, p, FV_DEVICE_CPU, FV_IMPL_ORACLE, FV_DTYPE_FP64);
  uint8_t no_mask = 0;
  a.custom_mask = &no_mask;  // pointers are still required; nothing is read
  EXPECT_EQ(fv_run(&a, nullptr, 0, nullptr), FV_OK) << fv_last_error();
}

}  // namespace
