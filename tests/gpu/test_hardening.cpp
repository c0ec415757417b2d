// GPU suite, hostile inputs and numerics (issue: hostile inputs, faults and long runs):
//  - index-checking mode: every kind of bad length / slot / page / parent is reported as a status with the
//    CPU validator's message, nothing is read out of bounds (run under compute-sanitizer memcheck too),
//    valid inputs pass and give the right answer, and the mode refuses CUDA-graph capture;
//  - 64-bit offsets: pool rows and query/output rows whose element offsets pass 2^31, byte-mask rows that start past
//    2^31 bytes (a large window offset), and 1024 requests;
//  - numerics: very large logits, NaN/Inf in pool rows nobody references, sm_scale 0 and negative, batches
//    of padded requests; each against the float64 oracle;
//  - every kernel instantiation (each tile configuration in bf16 and fp16, the naive kernel, the check
//    kernel) on a small problem, so that the sanitizer runs cover all of them.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_common.h"
#include "testkit.h"

namespace {

using fvt::CaseSpec;
using fvt::HostProblem;
using fvt::ScopedEnv;
using fvg::DevBuf;

CaseSpec base_case(bool mla, uint64_t seed) {
  CaseSpec s;
  if (mla) {
    s.hq = 16; s.hkv = 1; s.dqk = 576; s.dv = 512;
  } else {
    s.hq = 8; s.hkv = 2; s.dqk = 128; s.dv = 128;
  }
  s.max_draft = 8;
  s.draft = {8, 3, 6};
  s.prefix = {1200, 333, 70};
  s.tree = fvt::Tree::Random;
  s.seed = seed;
  return s;
}

// base_case's GQA problem read through a page table of `page_size`-token pages, with a parent-array tree mask
CaseSpec paged_parents_case(uint64_t seed, int page_size) {
  CaseSpec s = base_case(false, seed);
  s.addressing = FV_KV_PAGE_TABLE;
  s.page_size = page_size;
  s.mask_kind = FV_MASK_PARENTS;
  return s;
}

template <class T>
bool put_device(const void* dst, int64_t index, T value) {
  return cudaMemcpy(static_cast<T*>(const_cast<void*>(dst)) + index, &value, sizeof(T), cudaMemcpyHostToDevice) ==
         cudaSuccess;
}

template <class T>
T get_device(const void* src, int64_t index) {
  T v{};
  cudaMemcpy(&v, static_cast<const T*>(src) + index, sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

// Writes `value` into a device index array of either width at `index`; returns the old value.
int64_t poke_index(const fv_index& ix, int64_t index, int64_t value) {
  if (ix.dtype == FV_INDEX_INT64) {
    const int64_t old = get_device<int64_t>(ix.data, index);
    EXPECT_TRUE(put_device<int64_t>(ix.data, index, value));
    return old;
  }
  const int64_t old = get_device<int32_t>(ix.data, index);
  EXPECT_TRUE(put_device<int32_t>(ix.data, index, static_cast<int32_t>(value)));
  return old;
}

fv_status run_checked(fvt::DeviceProblem& dp, fv_args a) {
  a.problem.flags |= FV_FLAG_CHECK_INDICES;
  return fv_run(&a, dp.workspace(), dp.workspace_bytes(), nullptr);
}

// ------------------------------------------------------------------------------------------------------
// index-checking mode

TEST(CheckMode, ValidInputsPassAndAreComputedNormally) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 21;
  for (int variant = 0; variant < 3; ++variant) {
    CaseSpec s = base_case(variant != 1, seed + variant);
    if (variant == 1) {
      s.addressing = FV_KV_PAGE_TABLE;
      s.page_size = 16;
      s.mask_kind = FV_MASK_PARENTS;
      s.indices_i64 = false;
    }
    if (variant == 2) s.prefix = {0, -1, 5};  // an empty prefix and a padded request
    SCOPED_TRACE(s.describe());
    const HostProblem hp = fvt::make_problem(s);
    for (int impl : {FV_IMPL_FAST, FV_IMPL_NAIVE}) {
      fvt::DeviceProblem dp(hp, impl);
      ASSERT_TRUE(dp.ok()) << dp.error();
      ASSERT_EQ(run_checked(dp, dp.args()), FV_OK) << fv_last_error();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      fvt::Comparison c;
      ASSERT_NO_FATAL_FAILURE(fvg::check_device_outputs(hp, dp, impl == FV_IMPL_FAST ? "fast+check" : "naive+check", &c));
    }
  }
}

struct Corruption {
  const char* what;
  fv_status want;
  std::vector<std::string> needles;
};

// One bad entry at a time, written into the device copy of a valid problem; the checked call must name it
// and return its status; the unchecked kernels must never have run on it (memcheck covers this test).
TEST(CheckMode, EveryKindOfBadEntryIsReported) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 22;
  int tried = 0, reported = 0;
  // a refused call left the output and LSE as poison() wrote them: no kernel computed on the bad entry
  auto expect_untouched = [&](const fvt::DeviceProblem& dp, const char* what) {
    std::vector<uint8_t> raw;
    std::vector<float> lse;
    ASSERT_TRUE(dp.download(nullptr, &lse, &raw)) << what;
    size_t written = 0;
    for (uint8_t b : raw) written += b != 0xFF;
    for (float x : lse) {
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      written += bits != 0xFFFFFFFFu;
    }
    EXPECT_EQ(written, 0u) << what << ": the refused call wrote " << written << " output / LSE bytes or words";
  };
  auto expect_reported = [&](fvt::DeviceProblem& dp, const Corruption& c) {
    ++tried;
    dp.poison();
    const fv_status st = run_checked(dp, dp.args());
    const std::string msg = fv_last_error();
    EXPECT_EQ(st, c.want) << c.what << ": " << fv_status_string(st) << ": " << msg;
    bool named = st == c.want;
    for (const std::string& n : c.needles) {
      EXPECT_NE(msg.find(n), std::string::npos) << c.what << ": message '" << msg << "' lacks '" << n << "'";
      named &= msg.find(n) != std::string::npos;
    }
    reported += named;
    std::printf("[ check    ] %-40s -> %s: %s\n", c.what, fv_status_string(st), msg.c_str());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (st != FV_OK) expect_untouched(dp, c.what);
  };

  // arguments other than the problem's own (a shorter page-table row, an int64 kv_indptr, sinks, a batch of 2^30
  // tokens): the call's status must be `want` and its message must hold `needle`
  auto expect_args_reported = [&](fvt::DeviceProblem& dp, const char* what, const fv_args& bad, fv_status want,
                                  const std::string& needle) {
    ++tried;
    dp.poison();
    const fv_status st = run_checked(dp, bad);
    const std::string msg = fv_last_error();
    EXPECT_EQ(st, want) << what << ": " << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << what << ": message '" << msg << "' lacks '" << needle << "'";
    reported += st == want && msg.find(needle) != std::string::npos;
    std::printf("[ check    ] %-40s -> %s: %s\n", what, fv_status_string(st), msg.c_str());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    if (st != FV_OK && bad.out == dp.args().out) expect_untouched(dp, what);
  };

  {  // token slots (int64 and int32), byte mask
    for (bool i64 : {true, false}) {
      CaseSpec s = base_case(true, seed);
      s.indices_i64 = i64;
      const HostProblem hp = fvt::make_problem(s);
      fvt::DeviceProblem dp(hp);
      ASSERT_TRUE(dp.ok()) << dp.error();
      const fv_args& a = dp.args();
      const int64_t k = hp.kv_indptr[1] + 17;  // request 1, prefix token 17
      int64_t old = poke_index(a.kv_indices, k, hp.num_slots);
      expect_reported(dp, {"slot one past the pool", FV_ERR_BAD_INDEX,
                           {"kv_indices[" + std::to_string(k) + "]", "request 1", std::to_string(hp.num_slots)}});
      poke_index(a.kv_indices, k, -1);
      expect_reported(dp, {"negative slot", FV_ERR_BAD_INDEX, {"kv_indices[" + std::to_string(k) + "]", "= -1"}});
      if (i64) {
        poke_index(a.kv_indices, k, int64_t(1) << 40);
        expect_reported(dp, {"slot 2^40", FV_ERR_BAD_INDEX, {std::to_string(int64_t(1) << 40)}});
      }
      poke_index(a.kv_indices, k, old);
      ASSERT_EQ(run_checked(dp, a), FV_OK) << "restored: " << fv_last_error();

      old = poke_index(a.kv_indptr, 2, hp.kv_indptr[1] - 5);  // request 1's prefix would be negative
      expect_reported(dp, {"kv_indptr decreasing", FV_ERR_INCONSISTENT_LENGTHS, {"kv_indptr decreases", "request 1"}});
      poke_index(a.kv_indptr, 2, old);

      old = poke_index(a.qo_indptr, 1, hp.qo_indptr[1] + s.max_draft + 1);  // more drafts than max_draft
      expect_reported(dp, {"draft count above max_draft", FV_ERR_INCONSISTENT_LENGTHS, {"max_draft"}});
      poke_index(a.qo_indptr, 1, old);

      old = poke_index(a.qo_indptr, 0, -3);
      expect_reported(dp, {"negative qo_indptr[0]", FV_ERR_BAD_LENGTH, {"qo_indptr[0]", "-3"}});
      poke_index(a.qo_indptr, 0, old);

      old = poke_index(a.mask_indptr, 2, hp.mask_indptr[2] + 1);
      expect_reported(dp, {"mask_indptr off by one", FV_ERR_MASK_INDPTR, {"mask_indptr[1..2]", "request 1"}});
      poke_index(a.mask_indptr, 2, old);
      ASSERT_EQ(run_checked(dp, a), FV_OK) << "restored: " << fv_last_error();
    }
  }
  {  // page table, parents
    const CaseSpec s = paged_parents_case(seed + 1, 16);
    const HostProblem hp = fvt::make_problem(s);
    fvt::DeviceProblem dp(hp);
    ASSERT_TRUE(dp.ok()) << dp.error();
    const fv_args& a = dp.args();
    const int64_t cell = hp.page_table_stride * 0 + 5;  // request 0, page 5
    const int32_t old_page = get_device<int32_t>(a.page_table, cell);
    put_device<int32_t>(a.page_table, cell, static_cast<int32_t>(hp.num_slots / 16 + 3));
    expect_reported(dp, {"page past the pool", FV_ERR_BAD_INDEX, {"page_table[0, 5]"}});
    put_device<int32_t>(a.page_table, cell, -7);
    expect_reported(dp, {"negative page", FV_ERR_BAD_INDEX, {"page_table[0, 5]", "-7"}});
    put_device<int32_t>(a.page_table, cell, old_page);

    fv_args short_rows = a;  // request 0 (1200 tokens) needs 75 pages of 16
    short_rows.page_table_stride = 40;
    expect_args_reported(dp, "page_table row too short", short_rows, FV_ERR_BAD_INDEX, "75 pages of 16");

    // a prefix length near INT64_MAX (an int64 kv_indptr): its page count must not overflow into a small number
    // that passes the check and sends the check kernel past the table's end
    const int B = static_cast<int>(hp.kv_indptr.size()) - 1;
    std::vector<int64_t> huge(B + 1, INT64_MAX);
    huge[0] = 0;
    const DevBuf huge_dev(huge.size() * sizeof(int64_t));
    ASSERT_NE(huge_dev.p, nullptr);
    ASSERT_EQ(cudaMemcpy(huge_dev.p, huge.data(), huge.size() * sizeof(int64_t), cudaMemcpyHostToDevice), cudaSuccess);
    fv_args huge_prefix = a;
    huge_prefix.kv_indptr = fv_index{huge_dev.p, FV_INDEX_INT64, 0};
    expect_args_reported(dp, "prefix of INT64_MAX tokens", huge_prefix, FV_ERR_BAD_INDEX, "576460752303423488 pages");

    // sinks: NaN, +inf and values above 2.35e38 are invalid (flashverify.h); -inf (no sink) and large finite values
    // below that are valid
    std::vector<float> sinks(s.hq, 0.25f);
    float* sinks_dev = nullptr;
    ASSERT_EQ(cudaMalloc(&sinks_dev, sinks.size() * sizeof(float)), cudaSuccess);
    fv_args with_sinks = a;
    with_sinks.sinks = sinks_dev;
    for (float bad : {NAN, INFINITY, 3e38f}) {
      sinks[s.hq - 1] = bad;
      ASSERT_EQ(cudaMemcpy(sinks_dev, sinks.data(), sinks.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      expect_args_reported(dp, std::isnan(bad) ? "NaN sink" : std::isinf(bad) ? "+inf sink" : "sink of 3e38", with_sinks,
                           FV_ERR_INVALID_VALUE, "sinks[" + std::to_string(s.hq - 1) + "]");
    }
    sinks[s.hq - 1] = -INFINITY;
    sinks[0] = 1e30f;
    ASSERT_EQ(cudaMemcpy(sinks_dev, sinks.data(), sinks.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(run_checked(dp, with_sinks), FV_OK) << "valid sinks: " << fv_last_error();
    cudaFree(sinks_dev);

    const int64_t q1 = hp.qo_indptr[2];  // request 2 has 6 drafts
    const int32_t old_par = get_device<int32_t>(a.parents, q1 + 3);
    put_device<int32_t>(a.parents, q1 + 3, 6);
    expect_reported(dp, {"parent out of range", FV_ERR_BAD_INDEX, {"parents[" + std::to_string(q1 + 3) + "]", "= 6"}});
    put_device<int32_t>(a.parents, q1 + 3, 3);  // its own parent
    expect_reported(dp, {"self-parent", FV_ERR_BAD_MASK, {"cycle", "request 2"}});
    const int32_t old_par4 = get_device<int32_t>(a.parents, q1 + 4);
    put_device<int32_t>(a.parents, q1 + 3, 4);
    put_device<int32_t>(a.parents, q1 + 4, 3);  // 3 -> 4 -> 3
    expect_reported(dp, {"two-node cycle", FV_ERR_BAD_MASK, {"cycle", "request 2"}});
    put_device<int32_t>(a.parents, q1 + 3, old_par);
    put_device<int32_t>(a.parents, q1 + 4, old_par4);
    ASSERT_EQ(run_checked(dp, a), FV_OK) << "restored: " << fv_last_error();
  }
  {  // a batch of 2^30 tokens (flashverify.h, kv_indptr: the CUDA kernels count a call's tokens in int32 and take
     // fewer): request 0's prefix brings the sum of P_b + N_b to exactly 2^30, read through a page table of 128-token
     // pages that all name page 0 (valid, and inside the pool even if the check ever let the call through), so
     // nothing but the sum is wrong
    const CaseSpec s = paged_parents_case(seed + 2, 128);
    const HostProblem hp = fvt::make_problem(s);
    fvt::DeviceProblem dp(hp);
    ASSERT_TRUE(dp.ok()) << dp.error();
    const int B = static_cast<int>(hp.kv_indptr.size()) - 1;
    const int64_t limit = int64_t(1) << 30, drafts = hp.qo_indptr[B] - hp.qo_indptr[0];
    const int64_t p0 = limit - drafts, pages = (p0 + 127) / 128;
    std::vector<int64_t> kv(B + 1, p0);
    kv[0] = 0;
    const std::vector<int32_t> table(static_cast<size_t>(B * pages), 0);
    const DevBuf kv_dev(kv.size() * sizeof(int64_t)), table_dev(table.size() * sizeof(int32_t));
    ASSERT_NE(kv_dev.p, nullptr);
    ASSERT_NE(table_dev.p, nullptr);
    ASSERT_EQ(cudaMemcpy(kv_dev.p, kv.data(), kv.size() * sizeof(int64_t), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(table_dev.p, table.data(), table.size() * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
    fv_args big = dp.args();
    big.kv_indptr = fv_index{kv_dev.p, FV_INDEX_INT64, 0};
    big.page_table = static_cast<const int32_t*>(table_dev.p);
    big.page_table_stride = pages;
    expect_args_reported(dp, "a batch of 2^30 tokens", big, FV_ERR_UNSUPPORTED, "1073741824");
  }
  {  // a batch of 2^40 prefix tokens through token slots (v54): the kernel and the host refuse it without walking
     // them (each walked all of them first: minutes on the device, hours on the host) and without reading kv_indices,
     // whose 2^40 entries this test does not have
    CaseSpec s = base_case(false, seed + 3);
    s.mask_kind = FV_MASK_PARENTS;
    const HostProblem hp = fvt::make_problem(s);
    fvt::DeviceProblem dp(hp);
    ASSERT_TRUE(dp.ok()) << dp.error();
    const int B = static_cast<int>(hp.kv_indptr.size()) - 1;
    std::vector<int64_t> kv(B + 1, int64_t(1) << 40);
    kv[0] = 0;
    const DevBuf kv_dev(kv.size() * sizeof(int64_t));
    ASSERT_NE(kv_dev.p, nullptr);
    ASSERT_EQ(cudaMemcpy(kv_dev.p, kv.data(), kv.size() * sizeof(int64_t), cudaMemcpyHostToDevice), cudaSuccess);
    fv_args vast = dp.args();
    vast.kv_indptr = fv_index{kv_dev.p, FV_INDEX_INT64, 0};
    expect_args_reported(dp, "a batch of 2^40 prefix tokens", vast, FV_ERR_UNSUPPORTED, "1099511627");
  }
  std::printf("[ check    ] %d bad inputs tried, %d reported with their status and position\n", tried, reported);
  EXPECT_EQ(tried, reported);
}

TEST(CheckMode, RefusedUnderGraphCapture) {
  REQUIRE_GPU();
  const HostProblem hp = fvt::make_problem(base_case(false, fvt::session_seed() + 23));
  fvt::DeviceProblem dp(hp);
  ASSERT_TRUE(dp.ok()) << dp.error();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  fv_args a = dp.args();
  a.problem.flags |= FV_FLAG_CHECK_INDICES;
  const fv_status st = fv_run(&a, dp.workspace(), dp.workspace_bytes(), stream);
  const std::string msg = fv_last_error();
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(st, FV_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("capture"), std::string::npos) << msg;
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// ------------------------------------------------------------------------------------------------------
// 64-bit offsets

// The problem's pool moved up by `shift` rows in a larger pool, and q / out / LSE rows spread `stride`
// elements apart, so that pool offsets (slot x row stride) and token offsets (token x row stride) pass 2^31
// elements while only a few MB are touched. Indices stay int32 where the spec says so: the products must be
// formed in 64 bits regardless.
void run_far_offsets(const HostProblem& hp, int impl, int64_t shift, int64_t q_stride, int64_t out_stride,
                     int64_t lse_stride) {
  const CaseSpec& s = hp.spec;
  fvt::DeviceProblem dp(hp, impl);
  ASSERT_TRUE(dp.ok()) << dp.error();
  fv_args a = dp.args();
  const int64_t T = hp.total_q;
  const int64_t krow = int64_t(s.hkv) * s.dqk, vrow = int64_t(s.hkv) * s.dv;
  const int64_t slots = shift + hp.num_slots;
  DevBuf kpool(size_t(slots * krow) * 2), vpool(s.mla() ? 0 : size_t(slots * vrow) * 2);
  DevBuf q(size_t(T * q_stride) * 2), out(size_t(T * out_stride) * 2), lse(size_t(T * lse_stride) * 4);
  ASSERT_TRUE(kpool.p && (s.mla() || vpool.p) && q.p && out.p && lse.p) << "device allocation failed";
  uint16_t* kp = static_cast<uint16_t*>(kpool.p);
  ASSERT_EQ(cudaMemset(kp, 0xFF, size_t(shift * krow) * 2), cudaSuccess);  // NaN below the moved pool
  ASSERT_EQ(cudaMemcpy(kp + shift * krow, hp.k_pool.data(), hp.k_pool.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  a.k_pool = kp;
  if (s.mla()) {
    a.v_pool = kp;
  } else {
    uint16_t* vp = static_cast<uint16_t*>(vpool.p);
    ASSERT_EQ(cudaMemset(vp, 0xFF, size_t(shift * vrow) * 2), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(vp + shift * vrow, hp.v_pool.data(), hp.v_pool.size() * 2, cudaMemcpyHostToDevice),
              cudaSuccess);
    a.v_pool = vp;
  }
  a.num_slots = slots;
  std::vector<int32_t> idx32, pages;
  std::vector<int64_t> idx64;
  DevBuf didx(std::max<size_t>(8, hp.kv_indices.size() * 8)), dpt(std::max<size_t>(4, hp.page_table.size() * 4));
  if (s.addressing == FV_KV_TOKEN_SLOTS) {
    for (int64_t v : hp.kv_indices) {
      idx32.push_back(static_cast<int32_t>(v + shift));
      idx64.push_back(v + shift);
    }
    if (s.indices_i64) cudaMemcpy(didx.p, idx64.data(), idx64.size() * 8, cudaMemcpyHostToDevice);
    else cudaMemcpy(didx.p, idx32.data(), idx32.size() * 4, cudaMemcpyHostToDevice);
    a.kv_indices.data = didx.p;
  } else {
    ASSERT_EQ(shift % s.page_size, 0);
    // (only real pages move: the generator's negative "never read" entries stay out of range, so that a read past
    // the prefix still lands on an invalid page instead of a shifted real one)
    for (int32_t v : hp.page_table) pages.push_back(v < 0 ? v : static_cast<int32_t>(v + shift / s.page_size));
    cudaMemcpy(dpt.p, pages.data(), pages.size() * 4, cudaMemcpyHostToDevice);
    a.page_table = static_cast<const int32_t*>(dpt.p);
  }
  ASSERT_EQ(cudaMemcpy2D(q.p, size_t(q_stride) * 2, hp.q.data(), size_t(hp.q_stride_token) * 2,
                         size_t(s.hq) * s.dqk * 2, size_t(T), cudaMemcpyHostToDevice), cudaSuccess);
  a.q = q.p;
  a.q_stride_token = q_stride;
  ASSERT_EQ(cudaMemset(out.p, 0xFF, size_t(T * out_stride) * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(lse.p, 0xFF, size_t(T * lse_stride) * 4), cudaSuccess);
  a.out = out.p;
  a.out_stride_token = out_stride;
  a.lse = static_cast<float*>(lse.p);
  a.lse_stride_token = lse_stride;
  ASSERT_EQ(fv_run(&a, dp.workspace(), dp.workspace_bytes(), nullptr), FV_OK) << fv_last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  fvt::GpuRun r;
  std::vector<uint16_t> raw(size_t(T) * s.hq * s.dv);
  ASSERT_EQ(cudaMemcpy2D(raw.data(), size_t(s.hq) * s.dv * 2, out.p, size_t(out_stride) * 2, size_t(s.hq) * s.dv * 2,
                         size_t(T), cudaMemcpyDeviceToHost), cudaSuccess);
  r.out.resize(raw.size());
  for (size_t e = 0; e < raw.size(); ++e) r.out[e] = fvt::bits_to_float(raw[e], s.dtype);
  r.lse.resize(size_t(T) * s.hq);
  ASSERT_EQ(cudaMemcpy2D(r.lse.data(), size_t(s.hq) * 4, lse.p, size_t(lse_stride) * 4, size_t(s.hq) * 4, size_t(T),
                         cudaMemcpyDeviceToHost), cudaSuccess);
  fvt::Reference ref;
  ASSERT_EQ(fvt::run_oracle(hp, &ref), FV_OK);
  fvt::Comparison c;
  fvg::check_against_oracle(hp, ref, r, impl == FV_IMPL_NAIVE ? "naive" : "fast", &c);
  std::printf("[ offsets  ] %-70s %s: last pool row at element %lld, last q row at %lld: rel L2 %.2e\n",
              s.describe().c_str(), impl == FV_IMPL_NAIVE ? "naive" : "fast",
              static_cast<long long>((slots - 1) * krow), static_cast<long long>((T - 1) * q_stride), c.rel_l2);
}

TEST(Offsets64, PoolAndTokenRowsPast2To31Elements) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 31;
  const int64_t two31 = int64_t(1) << 31;
  {  // MLA, int32 slots: slot x 576 passes 2^31 from slot 3,728,271 on
    CaseSpec s = base_case(true, seed);
    s.indices_i64 = false;
    const HostProblem hp = fvt::make_problem(s);
    const int64_t shift = 4'000'000;
    const int64_t T = hp.total_q;
    const int64_t qs = ((two31 / (T - 1)) / 8 + 1) * 8 + 8 * 16;  // multiple of 8, (T-1) x qs > 2^31
    for (int impl : {FV_IMPL_FAST, FV_IMPL_NAIVE}) {
      SCOPED_TRACE(impl);
      run_far_offsets(hp, impl, shift, qs, qs, qs);
    }
  }
  {  // GQA d256 with two KV heads, page table of 16: page x 16 x 512 passes 2^31
    CaseSpec s = base_case(false, seed + 1);
    s.hq = 8; s.hkv = 2; s.dqk = s.dv = 256;
    s.addressing = FV_KV_PAGE_TABLE;
    s.page_size = 16;
    const HostProblem hp = fvt::make_problem(s);
    const int64_t shift = 4'300'800;  // 268,800 pages of 16
    const int64_t T = hp.total_q;
    const int64_t qs = ((two31 / (T - 1)) / 8 + 1) * 8;
    for (int impl : {FV_IMPL_FAST, FV_IMPL_NAIVE}) {
      SCOPED_TRACE(impl);
      run_far_offsets(hp, impl, shift, qs, qs, qs / 2);
    }
  }
}

// SGLang's byte mask under a sliding window: request b's rows are off_b + P_b + N_b wide, so with a window offset near
// 2^31 a request's second row starts past 2^31 bytes into its block and the column offsets must be formed in 64 bits
// (the verify kernels' in-place read formed the row width in int32 until v53: row 1 read row 0's columns). Two
// requests (the in-place read; batches above 16 convert the mask on the device first), the first 3 rows of 2^31 + 11
// bytes. The oracle runs the same tree in the compact layout: the offsets shape the layout only, and a window of 2^29
// hides no key of these prefixes. Fast (also in check mode) and naive.
TEST(Offsets64, WindowOffsetRowsPast2To31Bytes) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 33;
  for (bool mla : {true, false}) {
    CaseSpec s = base_case(mla, seed + mla);
    s.draft = {3, 8};
    s.prefix = {17, 333};
    s.sliding_window = 1 << 29;
    SCOPED_TRACE(s.describe());
    const HostProblem hp = fvt::make_problem(s);
    ASSERT_EQ(s.mask_kind, FV_MASK_BYTES);
    ASSERT_TRUE(hp.window_kv_offsets.empty());  // the compact layout, for the oracle
    const int B = s.batch();
    const std::vector<int64_t> off = {(int64_t(1) << 31) - 9, 5};
    std::vector<int64_t> mi(B + 1, 0), plen(B), n(B);
    std::vector<int32_t> woff(B);
    for (int b = 0; b < B; ++b) {
      plen[b] = hp.kv_indptr[b + 1] - hp.kv_indptr[b];
      n[b] = hp.qo_indptr[b + 1] - hp.qo_indptr[b];
      woff[b] = static_cast<int32_t>(off[b]);
      mi[b + 1] = mi[b] + n[b] * (off[b] + plen[b] + n[b]);
    }
    const size_t mask_bytes = static_cast<size_t>(mi[B]);
    DevBuf mask(mask_bytes), dmi(mi.size() * 8), dwoff(woff.size() * 4);
    ASSERT_TRUE(mask.p && dmi.p && dwoff.p) << "device allocation failed (" << mi[B] << " mask bytes)";
    uint8_t* m = static_cast<uint8_t*>(mask.p);
    ASSERT_EQ(cudaMemset(m, 0, mask_bytes), cudaSuccess);  // the prefix columns: never read
    for (int b = 0; b < B; ++b) {
      for (int64_t i = 0; i < n[b]; ++i) {
        const uint8_t* src = hp.custom_mask.data() + hp.mask_indptr[b] + i * (plen[b] + n[b]) + plen[b];
        ASSERT_EQ(cudaMemcpy(m + mi[b] + i * (off[b] + plen[b] + n[b]) + off[b] + plen[b], src, size_t(n[b]),
                             cudaMemcpyHostToDevice), cudaSuccess);
      }
    }
    ASSERT_EQ(cudaMemcpy(dmi.p, mi.data(), mi.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dwoff.p, woff.data(), woff.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    for (int run = 0; run < 3; ++run) {
      const int impl = run == 2 ? FV_IMPL_NAIVE : FV_IMPL_FAST;
      const char* label = run == 0 ? "fast" : run == 1 ? "fast, check mode" : "naive";
      SCOPED_TRACE(label);
      fvt::DeviceProblem dp(hp, impl);
      ASSERT_TRUE(dp.ok()) << dp.error();
      fv_args a = dp.args();
      a.custom_mask = m;
      a.mask_indptr.data = dmi.p;
      a.mask_indptr.dtype = FV_INDEX_INT64;
      a.window_kv_offsets = static_cast<const int32_t*>(dwoff.p);
      if (run == 1) a.problem.flags |= FV_FLAG_CHECK_INDICES;
      dp.poison();
      ASSERT_EQ(fv_run(&a, dp.workspace(), dp.workspace_bytes(), nullptr), FV_OK) << fv_last_error();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      fvt::Comparison c;
      ASSERT_NO_FATAL_FAILURE(fvg::check_device_outputs(hp, dp, label, &c));
      std::printf("[ offsets  ] %-70s %-16s window offset %lld, mask %lld bytes: rel L2 %.2e\n", s.describe().c_str(),
                  label, static_cast<long long>(off[0]), static_cast<long long>(mi[B]), c.rel_l2);
    }
  }
}

TEST(Offsets64, ThousandRequests) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 32;
  for (bool mla : {true, false}) {
    CaseSpec s = base_case(mla, seed + mla);
    s.hq = 8;
    s.max_draft = 4;
    s.draft.clear();
    s.prefix.clear();
    uint64_t x = seed;
    for (int b = 0; b < 1024; ++b) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      s.draft.push_back(1 + static_cast<int>((x >> 33) % 4));
      s.prefix.push_back(b % 97 == 5 ? -1 : static_cast<int>((x >> 17) % 200));
    }
    SCOPED_TRACE(s.describe());
    const HostProblem hp = fvt::make_problem(s);
    fvt::Reference ref;
    ASSERT_EQ(fvt::run_oracle(hp, &ref), FV_OK);
    fvt::Comparison cf, cn;
    fvg::check_against_oracle(hp, ref, fvt::run_gpu(hp, FV_IMPL_FAST), "fast", &cf);
    fvg::check_against_oracle(hp, ref, fvt::run_gpu(hp, FV_IMPL_NAIVE), "naive", &cn);
    EXPECT_LE(cf.rel_l2, fvg::fast_vs_naive_bound(hp, cn.rel_l2)) << "fast vs naive";
    std::printf("[ batch1024] %s fast %.2e naive %.2e\n", mla ? "MLA" : "GQA", cf.rel_l2, cn.rel_l2);
  }
}

// ------------------------------------------------------------------------------------------------------
// numerics

void expect_matches_oracle(const HostProblem& hp, const char* label) {
  fvt::Reference ref;
  ASSERT_EQ(fvt::run_oracle(hp, &ref), FV_OK) << fv_last_error();
  fvt::Comparison cf, cn;
  fvg::check_against_oracle(hp, ref, fvt::run_gpu(hp, FV_IMPL_FAST), "fast", &cf);
  fvg::check_against_oracle(hp, ref, fvt::run_gpu(hp, FV_IMPL_NAIVE), "naive", &cn);
  EXPECT_LE(cf.rel_l2, fvg::fast_vs_naive_bound(hp, cn.rel_l2)) << label << ": fast vs naive";
  std::printf("[ numerics ] %-28s %-70s fast %.2e naive %.2e\n", label, hp.spec.describe().c_str(), cf.rel_l2,
              cn.rel_l2);
}

// MLA head dims with more than one KV head (not an MLA model's layout, but the ABI accepts it: the mma.sync tiles
// serve it, the Hopper MLA kernel takes one KV head only), 16-bit and fp8 pools, against the oracle
TEST(Numerics, MlaDimsWithSeveralKvHeads) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 41;
  for (int hkv : {2, 4}) {
    for (bool fp8 : {false, true}) {
      CaseSpec s = base_case(true, seed + hkv + fp8);
      s.hq = 16;
      s.hkv = hkv;
      s.kv_fp8 = fp8;
      ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(fvt::make_problem(s), fp8 ? "mla hkv>1 fp8" : "mla hkv>1"));
    }
  }
}

// An fp16 model takes P in fp16 (finite to 65504, normal from 2^-14), and v_scale used to be folded into it as it
// stood: |v_scale| >= 65520 made the top key's P Inf (Inf / NaN outputs) and |v_scale| = 1e-4 left most prefix P in
// fp16's subnormals (v60, found by a review and confirmed on an H100: fast rel L2 inf at 7e4, naive 1.7e-6). Every
// kernel that folds v_scale into an fp16 P now takes it as a power-of-two split (dispatch.cu). Each layout family
// (the Hopper MLA, GQA d128 and d256 kernels, the mma.sync MLA tile, the 32-row GQA tile, 16-bit pools with the
// scales on the mma.sync modifiers tile) with v_scale far out of [2^-2, 2^15) and near its edges, against the oracle
// and the naive kernel (fp32 outputs where 448 |v_scale| would pass fp16's range).
TEST(Numerics, Fp16ModelWithExtremeVScales) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 71;
  struct Layout {
    bool mla;
    int hq, hkv, d;
    bool fp8;
    const char* wgmma;  // FLASHVERIFY_WGMMA ("0": the mma.sync tiles on sm_90 too)
    const char* label;
  };
  const Layout layouts[] = {
      {true, 16, 1, 576, true, "1", "mla fp8"},
      {true, 16, 1, 576, true, "0", "mla fp8, mma.sync tile"},
      {false, 8, 1, 128, true, "1", "gqa 8/1 d128 fp8"},
      {false, 8, 2, 128, true, "1", "gqa 8/2 d128 fp8 (32 rows)"},
      {false, 8, 1, 256, true, "1", "gqa 8/1 d256 fp8"},
      {false, 8, 2, 128, false, "1", "gqa 8/2 d128 16-bit pools"},
      {true, 16, 1, 576, false, "1", "mla 16-bit pools"}};
  const float scales[] = {7e4f, 5e6f, -4e4f, 0x1p15f, 1e-4f, -3e-5f, 0x1p-3f, 2e-7f};
  int k = 0;
  for (const Layout& l : layouts) {
    const ScopedEnv wg("FLASHVERIFY_WGMMA", l.wgmma);
    for (float vs : scales) {
      CaseSpec s = base_case(l.mla, seed + k++);
      s.hq = l.hq;
      s.hkv = l.hkv;
      if (!l.mla) s.dqk = s.dv = l.d;
      s.dtype = FV_DTYPE_FP16;
      s.kv_fp8 = l.fp8;
      s.k_scale = 0.75f;
      s.v_scale = vs;
      // (prefix values of 448 |v_scale| and more: past fp16's range as outputs)
      if (std::fabs(vs) > 64.f) s.out_dtype = FV_DTYPE_FP32;
      char label[96];
      std::snprintf(label, sizeof label, "%s, v_scale %g", l.label, static_cast<double>(vs));
      ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(fvt::make_problem(s), label));
    }
  }
}

TEST(Numerics, VeryLargeLogits) {
  REQUIRE_GPU();
  // inputs in [-4, 4] and scale 1: scores with a spread of hundreds (exp would overflow float32 many
  // times over without the running maximum)
  for (bool mla : {true, false}) {
    CaseSpec s = base_case(mla, fvt::session_seed() + 41 + mla);
    s.value_scale = 4.f;
    s.sm_scale = 1.f;
    expect_matches_oracle(fvt::make_problem(s), "large logits");
  }
}

TEST(Numerics, NanAndInfInUnreferencedSlotsDoNotLeak) {
  REQUIRE_GPU();
  for (bool mla : {true, false}) {
    CaseSpec s = base_case(mla, fvt::session_seed() + 43 + mla);
    s.prefix = {1200, 333, -1};
    HostProblem hp = fvt::make_problem(s);
    // make_problem fills unreferenced rows with NaN; turn every other one into +Inf / -Inf
    const uint16_t pinf = s.dtype == FV_DTYPE_BF16 ? 0x7F80 : 0x7C00, ninf = pinf | 0x8000;
    const int64_t krow = int64_t(s.hkv) * s.dqk;
    int64_t rows = 0;
    for (int64_t slot = 0; slot < hp.num_slots; ++slot) {
      if (hp.k_pool[slot * krow] != 0xFFFF) continue;
      ++rows;
      if (slot % 3 == 0) continue;  // stays NaN
      std::fill_n(hp.k_pool.begin() + slot * krow, krow, slot % 3 == 1 ? pinf : ninf);
      if (!mla) std::fill_n(hp.v_pool.begin() + slot * int64_t(s.hkv) * s.dv, int64_t(s.hkv) * s.dv, pinf);
    }
    ASSERT_GT(rows, 0) << "the generator left no unreferenced pool rows";
    // SGLang over-allocates kv_indices: entries past kv_indptr[B] point anywhere, including out of range
    for (int e = 0; e < 64; ++e) hp.kv_indices.push_back(e % 2 ? hp.num_slots + 1000 + e : -1 - e);
    expect_matches_oracle(hp, "NaN/Inf in unused rows");
  }
}

// A sink far above every score of its row (the scores here stay within ~20 of 0): exp(sink - max) overflows
// fp32 unless the sink joins the row maximum (it did not before v17: out 0 and lse +inf). Even heads get a
// sink 300 above (out ~0, lse = the sink), odd heads an ordinary one; unsplit (the verify epilogue forms the
// row) and split (the combine does), on the Hopper MLA tile, the mma.sync MLA tile and a GQA tile.
TEST(Numerics, SinkFarAboveTheScores) {
  REQUIRE_GPU();
  for (int layout = 0; layout < 3; ++layout) {
    for (int splits : {1, 4096}) {
      CaseSpec s = base_case(layout < 2, fvt::session_seed() + 47 + layout);
      if (layout == 1) s.profile = FV_PROFILE_SMALL_SMEM;
      s.sinks = true;
      s.num_kv_splits = splits;
      HostProblem hp = fvt::make_problem(s);
      for (int h = 0; h < s.hq; h += 2) hp.sinks[h] = 300.f + static_cast<float>(h);
      const std::string label = std::string(layout == 0 ? "mla" : layout == 1 ? "mla small-smem" : "gqa") +
                                (splits == 1 ? " sink +300, 1 split" : " sink +300, split");
      ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(hp, label.c_str()));
    }
  }
}

TEST(Numerics, ZeroAndNegativeScale) {
  REQUIRE_GPU();
  for (float scale : {0.f, -0.06f}) {
    for (bool mla : {true, false}) {
      HostProblem hp = fvt::make_problem(base_case(mla, fvt::session_seed() + 45 + mla));
      hp.spec.sm_scale = scale;  // 0: every visible key weighs the same, LSE = log(count)
      expect_matches_oracle(hp, scale == 0.f ? "sm_scale 0" : "negative sm_scale");
    }
  }
}

TEST(Numerics, MostlyPaddedBatch) {
  REQUIRE_GPU();
  for (bool mla : {true, false}) {
    CaseSpec s = base_case(mla, fvt::session_seed() + 47 + mla);
    s.draft = {1, 1, 8, 1, 2};
    s.prefix = {-1, -1, 2000, -1, 0};
    expect_matches_oracle(fvt::make_problem(s), "padded requests");
  }
}

// ------------------------------------------------------------------------------------------------------
// SGLang's score modifiers, one at a time and all together, MLA and GQA, fast and naive vs the oracle

TEST(Modifiers, EachAloneAndAllTogether) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 61;
  for (bool mla : {true, false}) {
    for (int which = 0; which < 8; ++which) {
      CaseSpec s = base_case(mla, seed + which + 10 * mla);
      s.prefix = {3000, 333, -1};
      if (which == 0 || which == 7) s.logit_cap = 1.5f;
      if (which == 1 || which == 7) s.sliding_window = which == 1 ? 700 : 5;  // long and very short windows
      if (which == 2 || which == 7) s.xai_temperature_len = 300;
      if (which == 3 || which == 7) s.sinks = true;
      if (which == 4 || which == 7) { s.k_scale = 0.5f; s.v_scale = 1.75f; }
      if (which == 5 || which == 7) s.window_offsets = true;
      if (which == 5) s.sliding_window = 1 << 30;  // the offsets are read with a window; this one hides no key
      if (which == 6) { s.sliding_window = 1; s.num_kv_splits = 4096; }  // every split but the last masked
      const HostProblem hp = fvt::make_problem(s);
      expect_matches_oracle(hp, "modifier");
      // the same with an fp8 e4m3 KV cache
      s.kv_fp8 = true;
      expect_matches_oracle(fvt::make_problem(s), "modifier, fp8 KV");
    }
  }
  // window offsets in a batch of 20 (over the inline plan's 16: the prepare kernel converts the byte mask and reads the
  // offsets in schedule.cuh, a read no test reached before v54; FLASHVERIFY_INLINE_PLAN is read once a process, so
  // the batch size is the way there), ragged, some requests padded or without a prefix, a window that hides part of
  // most prefixes
  for (bool mla : {true, false}) {
    CaseSpec s = base_case(mla, seed + 90 + mla);
    s.draft.clear();
    s.prefix.clear();
    for (int b = 0; b < 20; ++b) {
      s.draft.push_back(1 + (b * 5) % 8);
      s.prefix.push_back(b % 7 == 3 ? -1 : b % 7 == 5 ? 0 : 40 + 37 * b);
    }
    s.window_offsets = true;
    s.sliding_window = 120;
    expect_matches_oracle(fvt::make_problem(s), "window offsets, 20 requests");
  }
}

// ------------------------------------------------------------------------------------------------------
// every kernel instantiation on a small problem (the sanitizer runs use this test)

bool hopper_mla_kernel_here();  // (below, with the Hopper suites)

// The tile configuration the planner takes for `hp` on this device (fv_plan_config, on the problem alone: no device
// buffers needed); "" with a test failure where it cannot say
std::string planned_config(const HostProblem& hp) {
  const fv_args a = fvt::make_args(hp, fvt::Pointers{}, FV_DEVICE_CUDA, FV_IMPL_FAST, hp.spec.out_dtype);
  char name[64];
  const fv_status st = fv_plan_config(&a.problem, name, sizeof name);
  EXPECT_EQ(st, FV_OK) << hp.spec.describe() << ": " << fv_last_error();
  return st == FV_OK ? std::string(name) : std::string();
}

TEST(EveryKernel, EachConfigurationDtypeAndImplementation) {
  REQUIRE_GPU();
  using C = fvt::ConfigLayout;
  const auto& configs = fvt::kConfigLayouts;
  const uint64_t seed = fvt::session_seed() + 51;
  int runs = 0;
  // FV_KERNEL_DTYPES=bf16 halves the run (racecheck: both dtypes share every shared-memory access pattern)
  const char* dt_env = std::getenv("FV_KERNEL_DTYPES");
  const bool only_bf16 = dt_env != nullptr && std::string(dt_env) == "bf16";
  // a small problem with configuration c's head layout, and the fast kernel forced onto c against the oracle
  auto spec_for = [](const C& c, uint64_t case_seed) {
    CaseSpec s = base_case(c.mla, case_seed);
    s.hq = c.hq; s.hkv = c.hkv; s.dqk = c.d; s.dv = c.mla ? 512 : c.d;
    s.prefix = {300, 40, -1};
    return s;
  };
  // (the planner ignores a forced name that does not fit the device or the library: fv_plan_config says what it took,
  // and such a run is counted as not run here, not as a pass; on sm_90 with the Hopper kernels built, none may be)
  std::vector<std::string> not_here;
  auto check_forced = [&not_here](const C& c, const CaseSpec& s, const std::string& label) {
    const HostProblem hp = fvt::make_problem(s);
    const ScopedEnv forced("FLASHVERIFY_CONFIG", c.config);
    if (const std::string planned = planned_config(hp); planned != c.config) {
      std::printf("[ kernels  ] %s: not on this GPU / library (the planner takes %s): not run\n", label.c_str(),
                  planned.c_str());
      not_here.push_back(label);
      return;
    }
    fvt::Reference ref;
    ASSERT_EQ(fvt::run_oracle(hp, &ref), FV_OK);
    fvt::Comparison cmp;
    fvg::check_against_oracle(hp, ref, fvt::run_gpu(hp, FV_IMPL_FAST), label.c_str(), &cmp);
  };
  // Each configuration in each dtype with and without the modifiers (the kernels are instantiated per
  // configuration x dtype x modifiers x pool type; until v53 the modifiers followed the run's parity, so bf16 never
  // had them and fp16 always did). With modifiers, a Hopper configuration runs its mma.sync tile of the same plan
  // (dispatch.cu), which the label says.
  for (const C& c : configs) {
    const bool hopper = std::strstr(c.config, "_wg_") != nullptr;
    for (int dtype : {FV_DTYPE_BF16, FV_DTYPE_FP16}) {
      if (only_bf16 && dtype != FV_DTYPE_BF16) continue;
      for (bool mods : {false, true}) {
        CaseSpec s = spec_for(c, seed + runs);
        s.dtype = dtype;
        s.num_kv_splits = runs % 2 ? 0 : 3;
        s.mask_kind = runs % 3;
        if (mods) {  // the modifiers' scoring path
          s.logit_cap = 2.f;
          s.sliding_window = 200;
          s.sinks = true;
          s.k_scale = 0.75f;
          s.v_scale = 1.25f;
        }
        const std::string label =
            std::string(c.config) + (mods ? (hopper ? ", modifiers (its mma.sync tile)" : ", modifiers") : "");
        ASSERT_NO_FATAL_FAILURE(check_forced(c, s, label));
        ++runs;
      }
    }
  }
  // the naive kernel and the check kernel, in both dtypes
  for (int dtype : {FV_DTYPE_BF16, FV_DTYPE_FP16}) {
    CaseSpec s = base_case(true, seed + 99);
    s.dtype = dtype;
    const HostProblem hp = fvt::make_problem(s);
    fvt::Reference ref;
    ASSERT_EQ(fvt::run_oracle(hp, &ref), FV_OK);
    fvt::Comparison cmp;
    fvg::check_against_oracle(hp, ref, fvt::run_gpu(hp, FV_IMPL_NAIVE), "naive", &cmp);
    fvt::DeviceProblem dp(hp);
    ASSERT_TRUE(dp.ok());
    EXPECT_EQ(run_checked(dp, dp.args()), FV_OK) << fv_last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  // the fp8-KV instantiation of every configuration (bf16 model dtype), paged and not; the 32-row d128 tiles have
  // two fp8 kernels (plan.cpp: 64-key compact steps up to kFp8NarrowMaxBatch requests, wide steps above): both run.
  // (The Hopper MLA kernel's fp8 rows here are 16-byte aligned: its producer-warpgroup kernel; HopperMla runs its
  // kernel for 8-byte aligned rows with padded rows.)
  int fp8_runs = 0;
  auto fp8_kernels = [](const C& c) -> std::vector<const char*> {
    if (std::string(c.config).rfind("gqa128_bm32", 0) == 0) return {"0", "1"};
    return {nullptr};
  };
  for (const C& c : configs) {
    CaseSpec s = spec_for(c, seed + 200 + fp8_runs);
    s.kv_fp8 = true;
    s.k_scale = 0.5f;
    s.v_scale = 2.f;
    if (fp8_runs % 3 == 1) {  // configs 1, 4, 7 paged: the two 32-row GQA tiles (5, 7) see both addressings
      s.addressing = FV_KV_PAGE_TABLE;
      s.page_size = 16;
    }
    for (const char* wide : fp8_kernels(c)) {
      const ScopedEnv kernel("FLASHVERIFY_FP8_WIDE", wide ? wide : "auto");  // ("auto": the planner's choice)
      const std::string kind = wide ? (*wide == '1' ? " wide" : " narrow") : "";
      ASSERT_NO_FATAL_FAILURE(check_forced(c, s, std::string(c.config) + " fp8" + kind));
    }
    ++fp8_runs;
  }
  // the tiles that widen fp8 in registers (the 32-row d128 ones) with an fp16 model and the modifiers'
  // per-element scoring path (cap, window, sinks) on their compact steps
  for (const C& c : configs) {
    if (std::string(c.config).rfind("gqa128_bm32", 0) != 0) continue;
    CaseSpec s = spec_for(c, seed + 300 + fp8_runs);
    s.dtype = FV_DTYPE_FP16;
    s.kv_fp8 = true;
    s.k_scale = 0.5f;
    s.v_scale = 2.f;
    s.logit_cap = 2.f;
    s.sliding_window = 200;
    s.sinks = true;
    for (const char* wide : fp8_kernels(c)) {
      const ScopedEnv kernel("FLASHVERIFY_FP8_WIDE", wide);
      ASSERT_NO_FATAL_FAILURE(check_forced(
          c, s, std::string(c.config) + " fp8, fp16 model, modifiers" + (*wide == '1' ? ", wide" : ", narrow")));
    }
    ++fp8_runs;
  }
  std::printf("[ kernels  ] %d configuration x dtype runs and %d fp8-KV runs, %zu of them not available here (not "
              "run)\n", runs, fp8_runs, not_here.size());
  if (hopper_mla_kernel_here()) {  // sm_90 and a library built for it: every configuration fits, so every one ran
    EXPECT_TRUE(not_here.empty()) << not_here.size() << " forced runs did not take their configuration, the first: "
                                  << not_here.front();
  } else if (!not_here.empty()) {  // (elsewhere: what ran passed, and what could not run is a skip, not a pass)
    GTEST_SKIP() << not_here.size() << " forced runs are not available on this GPU / library (not run), the first: "
                 << not_here.front();
  }
}

// fp8 pools whose head rows are `pad` bytes longer than the head and whose slot rows carry `pad` more bytes. pad 8
// (every stride a multiple of 8 bytes, none of 16): the 16-byte fp8 copies (the in-register widening's compact
// rows, FLASHVERIFY_FP8_PAIRS=1 in the other tiles, the Hopper MLA kernel's producer-warpgroup kernel) must fall back
// to 8-byte copies. pad 16: strides that are multiples of 16 bytes but not the rows' size.
// Padding bytes hold NaN (0x7f).
void run_padded_fp8(const CaseSpec& spec, const char* config, int pad = 8) {
  const ScopedEnv forced("FLASHVERIFY_CONFIG", config);
  const HostProblem hp = fvt::make_problem(spec);
  // (the planner takes its own choice where a forced name does not fit; on sm_90 with the Hopper kernels every one
  // fits, so there the forced configuration must be the one that ran)
  if (hopper_mla_kernel_here())
    ASSERT_EQ(planned_config(hp), config) << "padded fp8 rows: the planner did not take the forced configuration";
  const CaseSpec& s = hp.spec;
  fvt::DeviceProblem dp(hp, FV_IMPL_FAST);
  ASSERT_TRUE(dp.ok()) << dp.error();
  fv_args a = dp.args();
  const int64_t slots = hp.num_slots, kh = s.dqk + pad, vh = s.dv + pad;
  const int64_t kslot = s.hkv * kh + pad, vslot = s.hkv * vh + pad;
  DevBuf kp(size_t(slots * kslot)), vp(s.mla() ? 16 : size_t(slots * vslot));
  ASSERT_TRUE(kp.p && vp.p) << "device allocation failed";
  // one strided copy per head: slot rows kslot bytes apart, that head's bytes at h * kh
  auto upload = [&](void* dst, const std::vector<uint8_t>& src, int64_t d, int64_t head, int64_t slot) {
    ASSERT_EQ(cudaMemset(dst, 0x7f, size_t(slots * slot)), cudaSuccess);
    for (int h = 0; h < s.hkv; ++h)
      ASSERT_EQ(cudaMemcpy2D(static_cast<uint8_t*>(dst) + h * head, size_t(slot), src.data() + h * d,
                             size_t(s.hkv * d), size_t(d), size_t(slots), cudaMemcpyHostToDevice), cudaSuccess);
  };
  ASSERT_NO_FATAL_FAILURE(upload(kp.p, hp.k_pool8, s.dqk, kh, kslot));
  a.k_pool = kp.p;
  a.k_pool_stride_head = kh;
  a.k_pool_stride_slot = kslot;
  if (s.mla()) {
    a.v_pool = kp.p;
    a.v_pool_stride_head = kh;
    a.v_pool_stride_slot = kslot;
  } else {
    ASSERT_NO_FATAL_FAILURE(upload(vp.p, hp.v_pool8, s.dv, vh, vslot));
    a.v_pool = vp.p;
    a.v_pool_stride_head = vh;
    a.v_pool_stride_slot = vslot;
  }
  dp.poison();
  ASSERT_EQ(fv_run(&a, dp.workspace(), dp.workspace_bytes(), nullptr), FV_OK) << fv_last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  fvt::Comparison c;
  ASSERT_NO_FATAL_FAILURE(fvg::check_device_outputs(
      hp, dp, std::string(config) + " fp8, pool rows +" + std::to_string(pad) + " bytes", &c));
}

TEST(Fp8, PoolStridesNotMultiplesOf16Bytes) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 61;
  CaseSpec g = base_case(false, seed);
  g.hq = 8; g.hkv = 2; g.dqk = g.dv = 128;
  g.prefix = {300, 40, -1};
  g.kv_fp8 = true;
  g.k_scale = 0.5f;
  g.v_scale = 2.f;
  ASSERT_NO_FATAL_FAILURE(run_padded_fp8(g, "gqa128_bm32_bn64_s2"));
  ASSERT_NO_FATAL_FAILURE(run_padded_fp8(g, "gqa128_bm32_bn64_s3"));
  CaseSpec m = base_case(true, seed + 1);
  m.prefix = {300, 40, -1};
  m.kv_fp8 = true;
  m.k_scale = 0.5f;
  m.v_scale = 2.f;
  ASSERT_NO_FATAL_FAILURE(run_padded_fp8(m, "mla576_bm64_bn64_s2"));
  // the Hopper GQA kernels' fp8 path (rows widened in shared memory) and their RING kernels (16-byte raw copies where
  // the rows allow them, two 8-byte ones otherwise), d128 and d256, rows 8- and 16-byte aligned
  for (const char* ring : {"0", "1"}) {
    const ScopedEnv kernel("FLASHVERIFY_GQA8_RING", ring);
    for (int pad : {8, 16}) {
      ASSERT_NO_FATAL_FAILURE(run_padded_fp8(g, "gqa128_wg_bm64_bn64_s2", pad));
      CaseSpec g256 = g;
      g256.dqk = g256.dv = 256;
      ASSERT_NO_FATAL_FAILURE(run_padded_fp8(g256, "gqa256_wg_bm64_bn64_s2", pad));
    }
  }
  if (!hopper_mla_kernel_here())
    GTEST_SKIP() << "not an sm_90 device with the library's Hopper kernels: their forced configurations ran as the "
                    "planner's own choice (checked against the oracle), not as themselves";
}

// A tensor with one head may give any head stride (the header constrains it only for H > 1; the kernels multiply it by
// head 0): every head stride 1 on one KV head (MLA, GQA 8/1, 16-bit and fp8 pools, where the fp8 rows' 16-byte copies
// now ignore it) and on one query head too (v59: the fast path refused them as strides not multiples of 8)
TEST(Numerics, OneHeadTensorsTakeAnyHeadStride) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 67;
  int runs = 0;
  for (int kind = 0; kind < 6; ++kind) {
    CaseSpec s = base_case(kind % 2 == 0, seed + kind);
    if (kind % 2) s.hkv = 1;     // GQA 8/1 d128
    if (kind >= 4) s.hq = 1;     // one query head as well
    s.kv_fp8 = kind == 2 || kind == 3;
    const HostProblem hp = fvt::make_problem(s);
    fvt::DeviceProblem dp(hp, FV_IMPL_FAST);
    ASSERT_TRUE(dp.ok()) << dp.error();
    fv_args a = dp.args();
    a.k_pool_stride_head = a.v_pool_stride_head = a.k_draft_stride_head = a.v_draft_stride_head = 1;
    if (hp.spec.hq == 1) a.q_stride_head = a.out_stride_head = 1;
    dp.poison();
    ASSERT_EQ(fv_run(&a, dp.workspace(), dp.workspace_bytes(), nullptr), FV_OK) << fv_last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    fvt::Comparison c;
    ASSERT_NO_FATAL_FAILURE(fvg::check_device_outputs(hp, dp, "one-head strides 1, kind " + std::to_string(kind), &c));
    ++runs;
  }
  EXPECT_EQ(runs, 6);
}

// The 32-row d128 fp8 tiles multiply their compact steps in fp16 (bf16 models too: verify.cuh kF16), two planned
// steps at a time (kWide); a segment whose count of prefix-only steps is odd, or whose partition starts or ends
// between the two steps of a pair, takes one step the 16-bit way. Prefixes around multiples of 64 and 128,
// partitions cut at many places, several segments a partition, a page table, the modifiers' per-element path on
// wide steps (a window whose edge falls inside the prefix, a cap, sinks), v_scale far from 1 (1e4, 1e-38) and
// negative; each in both model dtypes.
TEST(Fp8, WideStepsAtEveryAlignment) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 81;
  int runs = 0;
  const ScopedEnv wide("FLASHVERIFY_FP8_WIDE", "1");  // (batch 5: the narrow kernel unless forced, plan.cpp)
  for (const char* cfg : {"gqa128_bm32_bn64_s2", "gqa128_bm32_bn64_s3"}) {
    const ScopedEnv forced("FLASHVERIFY_CONFIG", cfg);
    for (int variant = 0; variant < 20; ++variant) {
      CaseSpec s = base_case(false, seed + runs);
      s.kv_fp8 = true;
      s.k_scale = 0.5f;
      s.v_scale = 2.f;
      s.draft = {8, 3, 6, 1, 8};
      s.dtype = variant % 2 ? FV_DTYPE_FP16 : FV_DTYPE_BF16;
      switch (variant / 2) {
        case 0: s.prefix = {64, 128, 192, 127, 129}; s.num_kv_splits = 1; break;
        case 1: s.prefix = {1000, 320, 63, 65, 256}; s.num_kv_splits = 3; break;
        case 2: s.prefix = {4097, 0, 1, 191, 255}; s.num_kv_splits = 5; break;
        case 3: s.prefix = {2048, 2047, 2049, 640, 1}; s.num_kv_splits = 4096; break;
        case 4:
          s.prefix = {3000, 700, 129, 64, 4};
          s.num_kv_splits = 7;
          s.addressing = FV_KV_PAGE_TABLE;
          s.page_size = 16;
          break;
        case 5:
          s.prefix = {3000, 1025, 513, 200, 77};
          s.num_kv_splits = 2;
          s.sliding_window = 1500;
          s.logit_cap = 2.f;
          s.sinks = true;
          break;
        case 6: s.prefix = {5000, 5000, 383, 384, 385}; s.num_kv_splits = 0; break;
        // v_scale far from 1 either way, and negative: bf16 models keep it out of their fp16 P (kF16)
        case 7: s.prefix = {3000, 700, 129, 64, 4}; s.num_kv_splits = 3; s.k_scale = 0.25f; s.v_scale = 1e4f; break;
        case 8: s.prefix = {1000, 320, 63, 65, 256}; s.num_kv_splits = 0; s.v_scale = -0.75f; break;
        default: s.prefix = {2048, 2047, 2049, 640, 1}; s.num_kv_splits = 5; s.v_scale = 1e-38f; break;
      }
      ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(fvt::make_problem(s), (std::string(cfg) + " fp8 wide").c_str()));
      ++runs;
    }
  }
}

// The 32-row fp8 tiles' two kernels (plan.cpp: verify_kernel_narrow, 64-key compact steps, for small batches; the
// wide one above them) on the same problems: batch 1 split across the GPU, a small batch through a page table, one
// with every modifier and v_scale far from 1; both model dtypes, both 32-row configurations.
TEST(Fp8, NarrowAndWideKernels) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 83;
  int runs = 0;
  for (const char* cfg : {"gqa128_bm32_bn64_s2", "gqa128_bm32_bn64_s3"})
    for (int variant = 0; variant < 6; ++variant) {
      CaseSpec s = base_case(false, seed + runs);
      s.kv_fp8 = true;
      s.k_scale = 0.5f;
      s.v_scale = 2.f;
      s.dtype = variant % 2 ? FV_DTYPE_FP16 : FV_DTYPE_BF16;
      switch (variant / 2) {
        case 0: s.prefix = {9000}; s.draft = {8}; s.num_kv_splits = 0; break;
        case 1:
          s.prefix = {3000, 129, 700};
          s.draft = {8, 1, 5};
          s.addressing = FV_KV_PAGE_TABLE;
          s.page_size = 16;
          s.num_kv_splits = 7;
          break;
        default:
          s.prefix = {4097, 1000};
          s.draft = {8, 3};
          s.num_kv_splits = 3;
          s.sliding_window = 2500;
          s.logit_cap = 2.f;
          s.sinks = true;
          s.v_scale = -300.f;
          break;
      }
      const fvt::HostProblem hp = fvt::make_problem(s);
      for (const char* wide : {"0", "1"}) {
        const ScopedEnv forced("FLASHVERIFY_CONFIG", cfg), kernel("FLASHVERIFY_FP8_WIDE", wide);
        ASSERT_NO_FATAL_FAILURE(
            expect_matches_oracle(hp, (std::string(cfg) + (wide[0] == '1' ? " fp8 wide" : " fp8 narrow")).c_str()));
      }
      ++runs;
    }
}

// fp8 pools under a sharp softmax. The suites' random fp8 problems have scores spread ~0.3-0.6 (inputs in [-1, 1],
// pool codes of magnitude <= 1.875), where an error in S barely moves P. e4m3 wgmma keeps ~14 bits of its
// accumulation (v56: Wgmma.Fp8MlaProductsWithoutWideningMatchFloat64's S, 7.15e-4 on an H200, and the model in
// bench/probes/p3_error_sim.py, which reproduces it), and the GQA S8 steps take S from it, so their error grows with
// the scores' spread. Here the planner's own kernels for fp8 pools (at B=8: GQA 8/1 d128 and d256, S8 with a bf16
// model; the producer MLA kernel; GQA 32/8's 32-row tile; batch 1's 5-stage GQA kernel) with inputs in [-4, 4] and
// k_scale 3 (prefix scores spread ~5-8), in both model dtypes, against the oracle and the naive kernel. First run
// (v57, H100): every output within 2x naive once S8 sums Q's lo term first (d128 1.76e-3, d256 2.04e-3 against naive
// 1.58e-3 / 1.64e-3); the LSE of the S8 rows 0.0057 / 0.0133 off, over the 5e-3 that exact scores meet, within the
// bound for e4m3 scores (fvt::lse_allowed: 2^-9 of |lse|; |lse| 8.2-23.2 in that run's problems, by the oracle).
TEST(Fp8, SharpSoftmaxRows) {
  REQUIRE_GPU();
  const uint64_t seed = fvt::session_seed() + 87;
  int runs = 0;
  for (int dtype : {FV_DTYPE_BF16, FV_DTYPE_FP16})
    for (int layout = 0; layout < 5; ++layout) {
      CaseSpec s = base_case(layout == 2, seed + runs);
      s.dtype = dtype;
      s.kv_fp8 = true;
      s.value_scale = 4.f;
      s.k_scale = 3.f;
      s.v_scale = 0.5f;
      s.draft = {8, 8, 8, 8, 8, 8, 8, 8};
      s.prefix = {2000, 1500, 999, 3000, 700, 64, 129, 2500};
      const char* label = "fp8 sharp softmax";
      switch (layout) {
        case 0: s.hq = 8; s.hkv = 1; label = "fp8 sharp gqa8/1 d128"; break;
        case 1: s.hq = 8; s.hkv = 1; s.dqk = s.dv = 256; label = "fp8 sharp gqa8/1 d256"; break;
        case 2: label = "fp8 sharp mla h16"; break;
        case 3: s.hq = 32; s.hkv = 8; label = "fp8 sharp gqa32/8 d128"; break;
        default: s.hq = 8; s.hkv = 1; s.draft = {8}; s.prefix = {9000}; label = "fp8 sharp gqa8/1 b1"; break;
      }
      ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(fvt::make_problem(s), label));
      ++runs;
    }
}

// The Hopper MLA kernel (mla576_wg_bm64_bn64_s2: on an sm_90 device whose library holds it; elsewhere the
// forced name is ignored and the planner's tile runs the same checks) on what EveryKernel and Modifiers leave
// out: fp8 pools through a page table, fp8 pools with an fp16 model, a plain fp16 problem, partitions that span
// several requests (fp8: each later segment widens its first step at the top of its loop), key steps made
// only of draft keys, prefixes that are multiples of 64, an fp32 output with sinks, and fp8 pool strides that
// are multiples of 8 bytes but not of 16.
TEST(HopperMla, CasesTheOtherSuitesLeaveOut) {
  REQUIRE_GPU();
  // (elsewhere the planner ignores the forced name and these cases would run its own tile under this suite's name)
  if (!hopper_mla_kernel_here())
    GTEST_SKIP() << "the Hopper MLA kernel is not here (it needs an sm_90 device and a library built for sm_90)";
  const char* cfg = "mla576_wg_bm64_bn64_s2";
  const uint64_t seed = fvt::session_seed() + 71;
  // (fp8 cases with 16-byte aligned rows: the producer-warpgroup kernel; the padded rows at the end: both fp8 kernels)
  auto check = [&](const CaseSpec& s, const char* label) {
    const ScopedEnv forced("FLASHVERIFY_CONFIG", cfg);
    const HostProblem hp = fvt::make_problem(s);
    ASSERT_EQ(planned_config(hp), cfg) << label << ": the planner did not take the forced configuration";
    ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(hp, label));
  };
  CaseSpec paged = base_case(true, seed);
  paged.kv_fp8 = true;
  paged.k_scale = 0.5f;
  paged.v_scale = 2.f;
  paged.addressing = FV_KV_PAGE_TABLE;
  paged.page_size = 16;
  paged.num_kv_splits = 3;
  check(paged, "hopper fp8 paged");

  CaseSpec f16 = base_case(true, seed + 1);
  f16.dtype = FV_DTYPE_FP16;
  f16.kv_fp8 = true;
  f16.k_scale = 0.75f;
  f16.v_scale = 1.25f;
  f16.mask_kind = FV_MASK_PARENTS;
  check(f16, "hopper fp8 fp16 model");
  f16.kv_fp8 = false;
  f16.k_scale = f16.v_scale = 0.f;
  check(f16, "hopper fp16");

  for (bool fp8 : {true, false}) {
    CaseSpec multi = base_case(true, seed + 2 + fp8);
    multi.draft = {4, 2, 3, 1, 5, 2};
    multi.prefix = {90, 17, 200, 0, 64, 128};
    multi.num_kv_splits = 2;  // each partition holds steps of several requests
    multi.kv_fp8 = fp8;
    check(multi, fp8 ? "hopper fp8 multi-segment" : "hopper multi-segment");
  }

  // sixteen requests over three partitions: several segments a CTA, with requests with no prefix, a 1-key prefix,
  // short prefixes and drafts that leave the second row tile empty; in a page table
  CaseSpec many = base_case(true, seed + 7);
  many.draft = {8, 1, 3, 5, 2, 8, 4, 1, 6, 7, 2, 3, 8, 1, 5, 4};
  many.prefix = {70, 0, 1, 130, 64, 9, 300, 65, 0, 41, 128, 2, 77, 190, 63, 33};
  many.addressing = FV_KV_PAGE_TABLE;
  many.page_size = 4;
  many.num_kv_splits = 3;
  for (bool fp8 : {false, true}) {
    many.kv_fp8 = fp8;
    check(many, fp8 ? "hopper fp8 sixteen requests, 3 partitions" : "hopper sixteen requests, 3 partitions");
  }

  CaseSpec drafts = base_case(true, seed + 4);
  drafts.hq = 1;
  drafts.max_draft = 160;
  drafts.draft = {160, 70};
  drafts.prefix = {130, 64};
  drafts.kv_fp8 = true;
  check(drafts, "hopper fp8 draft-only steps");

  CaseSpec out32 = base_case(true, seed + 5);
  out32.out_dtype = FV_DTYPE_FP32;
  out32.sinks = true;
  for (int splits : {1, 0}) {
    out32.num_kv_splits = splits;
    check(out32, splits == 1 ? "hopper fp32 out, sinks, 1 split" : "hopper fp32 out, sinks");
  }

  CaseSpec padded = base_case(true, seed + 6);
  padded.prefix = {300, 40, -1};
  padded.kv_fp8 = true;
  padded.k_scale = 0.5f;
  padded.v_scale = 2.f;
  // rows 8-byte aligned (the kernel whose compute warps copy 8 bytes at a time: the producer-warpgroup kernel copies
  // 16) and 16-byte aligned rows 608 bytes apart (the producer-warpgroup kernel)
  for (int pad : {8, 16}) ASSERT_NO_FATAL_FAILURE(run_padded_fp8(padded, cfg, pad));
}

// True where the Hopper MLA kernel serves MLA (an sm_90 device and a library built for sm_90): there the fp16-product
// kernel and the bf16-product one round differently, elsewhere both settings run the same mma.sync tile
bool hopper_mla_kernel_here() {
  if (!fvg::on_sm90()) return false;
  // "..., sm 80,86,89,90,120" (CMakeLists.txt: CMAKE_CUDA_ARCHITECTURES without -real / -virtual, comma-separated).
  // Until v47 this looked for " 90 " between spaces, which only a build for sm_90 alone matched: with the default
  // architecture list every `if (hopper)` check below was skipped without a word
  const std::string info = fv_build_info();
  const size_t at = info.find(", sm ");
  if (at == std::string::npos) {
    ADD_FAILURE() << "fv_build_info() has no architecture list: " << info;
    return false;
  }
  std::string list = info.substr(at + 5);
  for (char& c : list)
    if (c == ',' || c == ';') c = ' ';
  std::istringstream tokens(list);
  for (std::string a; tokens >> a;)
    if (a == "90" || a == "90a") return true;
  std::printf("[ note     ] an sm_90 device, but the library has no sm_90 code (%s): the Hopper kernels' checks do not "
              "apply\n", info.c_str());
  return false;
}

// The Hopper MLA kernel's fp8 pools with a bf16 model multiply in fp16 (verify_wg.cuh, F16), each case against the
// oracle; and which kernel ran is checked: with FLASHVERIFY_FP8_MLA_F16=1 and =0 the raw outputs differ exactly where
// the fp16 route applies (on the Hopper kernel). Cases:
// - Q rows turned into fp16 with their own power-of-two factors: one problem with rows from 2^-60 to 2^20 times the
//   generator's values (sm_scale 2^-20 keeps the largest rows' scores, and so the LSE, moderate) and a row of zeros;
//   and problems whose rows all lie near 2^-60, 2^-24 or 2^24 with sm_scale compensating, so that every row's scores
//   are O(1) (a row flushed to zero would then be caught);
// - calibrated scales well below 1 (the draft rows' factor kd = 2^9, P's factors 2^-sigma), a negative v_scale, a
//   negative k_scale, sinks with an fp32 output (split and not: P's 2^sigma is taken back in both epilogues);
// - scales outside the fp16 route's range (|scale| < 2^-12; k_scale and v_scale more than 2^6 apart): the bf16 kernel,
//   bit for bit the FLASHVERIFY_FP8_MLA_F16=0 output.
TEST(HopperMla, Fp8PoolsWithABf16ModelMultiplyInFp16) {
  REQUIRE_GPU();
  const ScopedEnv forced("FLASHVERIFY_CONFIG", "mla576_wg_bm64_bn64_s2");
  const bool hopper = hopper_mla_kernel_here();
  const uint64_t seed = fvt::session_seed() + 173;
  // against the oracle with the fp16 route allowed, then the raw outputs of both settings compared
  auto check = [&](const HostProblem& hp, bool f16_expected, const std::string& label) {
    std::vector<uint8_t> raw[2];
    for (int on : {1, 0}) {
      const ScopedEnv f16("FLASHVERIFY_FP8_MLA_F16", on ? "1" : "0");
      if (on) ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(hp, label.c_str()));
      const fvt::GpuRun r = fvt::run_gpu(hp, FV_IMPL_FAST);
      ASSERT_EQ(r.status, FV_OK) << label << ": " << r.error;
      raw[on] = r.raw_out;
    }
    if (hopper)
      EXPECT_EQ(raw[1] != raw[0], f16_expected)
          << label << (f16_expected ? ": the fp16 products did not run" : ": the fp16 products ran out of their range");
  };
  auto scaled = [](uint16_t b, int k) {  // bf16 bits times 2^k
    return fvt::float_to_bits(std::ldexp(fvt::bits_to_float(b, FV_DTYPE_BF16), k), FV_DTYPE_BF16);
  };
  CaseSpec s = base_case(true, seed);
  s.kv_fp8 = true;
  s.k_scale = 0.5f;
  s.v_scale = 2.f;
  s.num_kv_splits = 3;
  {
    CaseSpec wide = s;
    wide.sm_scale = 0x1p-20f / 24.f;
    HostProblem hp = fvt::make_problem(wide);
    for (int64_t t = 0; t < hp.total_q; ++t)
      for (int h = 0; h < s.hq; ++h) {
        uint16_t* row = hp.q.data() + t * hp.q_stride_token + int64_t(h) * s.dqk;
        const int k = int((t * s.hq + h) % 5) * 20 - 60;
        for (int d = 0; d < s.dqk; ++d) row[d] = (t == 1 && h == 3) ? 0 : scaled(row[d], k);
      }
    ASSERT_NO_FATAL_FAILURE(check(hp, true, "fp8 bf16 model, Q rows 2^-60..2^20"));
  }
  for (int k : {-60, -24, 24}) {
    CaseSpec one = s;
    one.seed = seed + 10 + static_cast<uint64_t>(k + 60);
    one.sm_scale = std::ldexp(1.f, -k) / std::sqrt(192.f);  // scores as with unscaled rows
    HostProblem hp = fvt::make_problem(one);
    for (uint16_t& x : hp.q) x = scaled(x, k);
    ASSERT_NO_FATAL_FAILURE(check(hp, true, "fp8 bf16 model, Q rows near 2^" + std::to_string(k)));
  }
  struct Case {
    float k, v;
    bool sinks_fp32;
    int splits;
    bool f16;
    const char* label;
  };
  const Case cases[] = {
      {0x1p-9f * 1.3f, 0x1p-8f * 0.9f, false, 3, true, "fp16 products, calibrated scales"},
      {0.75f, -1.5f, false, 3, true, "fp16 products, negative v_scale"},
      {-0.5f, 2.f, false, 3, true, "fp16 products, negative k_scale"},
      {0.5f, 2.f, true, 1, true, "fp16 products, sinks, fp32 out, 1 split"},
      {0.5f, 2.f, true, 0, true, "fp16 products, sinks, fp32 out"},
      {0x1p-13f, 0x1p-13f, false, 3, false, "scales below 2^-12: bf16 products"},
      {300.f, 0.02f, false, 3, false, "scales 2^14 apart: bf16 products"}};
  for (const Case& c : cases) {
    CaseSpec cs = s;
    cs.k_scale = c.k;
    cs.v_scale = c.v;
    cs.sinks = c.sinks_fp32;
    if (c.sinks_fp32) cs.out_dtype = FV_DTYPE_FP32;
    cs.num_kv_splits = c.splits;
    cs.seed = seed + 1 + static_cast<uint64_t>(&c - cases);
    ASSERT_NO_FATAL_FAILURE(check(fvt::make_problem(cs), c.f16, c.label));
  }
  // (elsewhere the oracle comparisons above ran and passed, the checks of which kernel ran did not: a skip, not a pass)
  if (!hopper) GTEST_SKIP() << "not an sm_90 device with the library's Hopper kernels: which-kernel checks not run";
}

// fp8 pools on the 2-stage Hopper GQA kernel `config` with FLASHVERIFY_GQA8_S8=0 (S in the model dtype, K widened as V
// is), against the oracle; its raw output (the rounding check_ring's bf16-product RING kernel must reproduce)
std::vector<uint8_t> run_without_s8(const HostProblem& hp, const char* config, const std::string& label) {
  const ScopedEnv forced("FLASHVERIFY_CONFIG", config), plain("FLASHVERIFY_GQA8_RING", "0"),
      no_s8("FLASHVERIFY_GQA8_S8", "0");
  const std::string what = label + " [" + config + ", S in the model dtype]";
  if (hopper_mla_kernel_here())
    EXPECT_EQ(planned_config(hp), config) << what << ": the planner did not take the forced configuration";
  expect_matches_oracle(hp, what.c_str());
  const fvt::GpuRun r = fvt::run_gpu(hp, FV_IMPL_FAST);
  EXPECT_EQ(r.status, FV_OK) << what << ": " << r.error;
  return r.raw_out;
}

// The RING kernels (fp8 pools on the 2-stage Hopper GQA kernels: Plan::fp8_ring) forced on `config`, against the
// oracle, with fp16 products allowed (a bf16 model's RING kernel multiplies in fp16 where the scales allow it) and
// not; and which kernel ran, from the raw outputs: with bf16 products the RING kernel rounds as the 2-stage kernel
// (`plain`, run with FLASHVERIFY_GQA8_RING=0 and FLASHVERIFY_GQA8_S8=0: RING has no e4m3 S), with fp16 products a bf16
// model's output differs from it, and where the dispatcher keeps the mma.sync tile (`wg_expected` false: score
// modifiers) the output is `mma`'s, bit for bit. (With bf16 products the raw outputs cannot tell RING from the 2-stage
// kernel: the fp16-product inequality is what shows that the dispatcher reaches the RING kernels.)
void check_ring(const HostProblem& hp, const char* config, const std::string& label, bool wg_expected,
                const std::vector<uint8_t>& plain, const std::vector<uint8_t>& mma) {
  const bool hopper = hopper_mla_kernel_here();
  // the dispatcher's window for fp16 products (dispatch.cu, p.fp8_f16): a bf16 model, |k_scale| and |v_scale| in
  // [2^-12, 2^12] and within 2^6 of each other (0 means 1)
  const float ak = hp.spec.k_scale == 0.f ? 1.f : std::fabs(hp.spec.k_scale);
  const float av = hp.spec.v_scale == 0.f ? 1.f : std::fabs(hp.spec.v_scale);
  const bool f16_window = hp.spec.dtype == FV_DTYPE_BF16 && ak >= 0x1p-12f && ak <= 0x1p12f && av >= 0x1p-12f &&
                          av <= 0x1p12f && av <= ak * 0x1p6f && ak <= av * 0x1p6f;
  const ScopedEnv forced("FLASHVERIFY_CONFIG", config), ring("FLASHVERIFY_GQA8_RING", "1");
  if (hopper)
    ASSERT_EQ(planned_config(hp), config) << label << " [ring]: the planner did not take the forced configuration";
  for (int f16 : {1, 0}) {
    const ScopedEnv products("FLASHVERIFY_FP8_MLA_F16", f16 ? "1" : "0");
    const std::string what = label + " [" + config + ", ring" + (f16 ? "" : ", bf16 products") + "]";
    ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(hp, what.c_str()));
    const fvt::GpuRun r = fvt::run_gpu(hp, FV_IMPL_FAST);
    ASSERT_EQ(r.status, FV_OK) << what << ": " << r.error;
    if (!hopper) continue;
    if (!wg_expected)
      EXPECT_TRUE(r.raw_out == mma) << what << ": a Hopper kernel ran where the dispatcher keeps the mma.sync tile";
    else if (f16 && f16_window)
      EXPECT_TRUE(r.raw_out != plain) << what << ": the fp16 products did not run";
    else
      EXPECT_TRUE(r.raw_out == plain) << what << ": the RING kernel rounds unlike the 2-stage kernel (or did not run)";
  }
}

// The Hopper GQA d128 kernel (gqa128_wg_bm64_bn64_s2; the planner takes it on sm_90 for GQA d128 with more than 32
// rows a KV head) against the oracle on what the random set meets rarely: partitions that span several requests,
// sixteen requests in a page table, several row tiles a KV head, key steps made only of draft keys, padded and empty
// prefixes, an fp32 output with sinks (split and not), an fp16 model with a parent array, fp8 pools (their rows widened
// in shared memory). And which kernel ran: each case also runs the 64-row mma.sync tile of the same plan
// (gqa128_bm64_bn64_s2); where the Hopper kernel serves (an sm_90 device whose library holds it; 16-bit pools without
// score modifiers, fp8 pools with k_scale / v_scale only) the two round differently, and where the dispatcher keeps the
// mma.sync tile (a logit cap, k_scale on 16-bit pools, fp8 pools with a cap) their outputs are bit-identical. The two
// kernels accumulate in the same k16 order, so most elements round alike: on the H200 the six-request case's output
// was bit-identical in both (call 8 of v28) while the larger ones differed; so the Hopper kernel must differ in at
// least one case it serves, not in each. The 5-stage kernel (gqa128_wg_bm64_bn64_s5: the same arithmetic, one CTA a
// multiprocessor) runs every case as well; where the split count is given (the plan is then the same as the 2-stage
// kernel's) its output must be bit-identical to the 2-stage kernel's (fp8 pools too, since v31, against the 2-stage
// kernel run with FLASHVERIFY_GQA8_S8=0: the e4m3 S of a bf16 model's prefix steps is the 2-stage kernel's alone; where
// the dispatcher keeps the mma.sync tile both configurations take it). With fp8 pools the e4m3 S must change some
// output (it ran), and the run without it is checked against the oracle too.
TEST(HopperGqa, CasesAgainstTheOracleAndWhichKernelRan) {
  REQUIRE_GPU();
  const bool hopper = hopper_mla_kernel_here();  // (the same condition: an sm_90 device, a library built for sm_90)
  const uint64_t seed = fvt::session_seed() + 211;
  int served = 0, differed = 0, same_plan = 0, s8_differed = 0;
  auto check = [&](const CaseSpec& s, bool wg_expected, const char* label) {
    const HostProblem hp = fvt::make_problem(s);
    std::vector<uint8_t> raw[3];  // the mma.sync tile, the Hopper kernel with 2 stages, with 5
    const char* configs[3] = {"gqa128_bm64_bn64_s2", "gqa128_wg_bm64_bn64_s2", "gqa128_wg_bm64_bn64_s5"};
    for (int k = 0; k < 3; ++k) {
      // (the 2-stage kernel without RING here: check_ring runs that)
      const ScopedEnv forced("FLASHVERIFY_CONFIG", configs[k]), plain("FLASHVERIFY_GQA8_RING", "0");
      const std::string what = std::string(label) + " [" + configs[k] + "]";
      // (a forced name that does not fit is ignored by the planner: the comparisons below would then compare one
      // kernel with itself)
      if (hopper) ASSERT_EQ(planned_config(hp), configs[k]) << what << ": the planner did not take the forced configuration";
      ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(hp, what.c_str()));
      const fvt::GpuRun r = fvt::run_gpu(hp, FV_IMPL_FAST);
      ASSERT_EQ(r.status, FV_OK) << what << ": " << r.error;
      raw[k] = r.raw_out;
    }
    // fp8 pools: the 2-stage kernel without S8 (bf16 models: the e4m3 S; the 5-stage and RING kernels have none)
    std::vector<uint8_t> no_s8 = raw[1];
    if (s.kv_fp8) {
      ASSERT_NO_FATAL_FAILURE(no_s8 = run_without_s8(hp, configs[1], label));
      if (wg_expected) s8_differed += no_s8 != raw[1];
      else if (hopper) EXPECT_TRUE(no_s8 == raw[1]) << label << ": FLASHVERIFY_GQA8_S8 changed the mma.sync tile's output";
      ASSERT_NO_FATAL_FAILURE(check_ring(hp, configs[1], label, wg_expected, no_s8, raw[0]));
    }
    if (wg_expected) {
      ++served;
      differed += raw[1] != raw[0];
    } else if (hopper) {
      EXPECT_TRUE(raw[1] == raw[0]) << label << ": the Hopper kernel ran where the dispatcher keeps the mma.sync tile";
    }
    if (hopper && s.num_kv_splits > 0) {
      ++same_plan;
      EXPECT_TRUE(raw[2] == no_s8) << label << ": the 5-stage kernel's output differs from the 2-stage kernel's"
                                   << (s.kv_fp8 ? " (without S8)" : "");
    }
  };
  CaseSpec multi = base_case(false, seed);
  multi.hq = 8;
  multi.hkv = 1;
  multi.draft = {8, 4, 8, 1, 8, 6};
  multi.prefix = {90, 17, 200, 0, 64, 128};
  multi.num_kv_splits = 2;  // each partition holds steps of several requests
  check(multi, true, "hopper gqa multi-segment");

  CaseSpec many = base_case(false, seed + 1);
  many.hq = 32;
  many.hkv = 4;
  many.draft = {8, 1, 3, 5, 2, 8, 4, 1, 6, 7, 2, 3, 8, 1, 5, 4};
  many.prefix = {70, 0, 1, 130, 64, 9, 300, 65, -1, 41, 128, 2, 77, 190, 63, 33};
  many.addressing = FV_KV_PAGE_TABLE;
  many.page_size = 4;
  many.num_kv_splits = 3;
  check(many, true, "hopper gqa sixteen requests, 3 partitions, page table");

  CaseSpec tiles = base_case(false, seed + 2);
  tiles.hq = 16;
  tiles.hkv = 2;
  tiles.max_draft = 40;  // 320 rows a KV head: five row tiles
  tiles.draft = {40, 13, 27};
  tiles.prefix = {500, 64, 1};
  tiles.tree = fvt::Tree::Chain;
  tiles.addressing = FV_KV_PAGE_TABLE;
  tiles.page_size = 16;
  check(tiles, true, "hopper gqa five row tiles, chain, page table");

  CaseSpec drafts = base_case(false, seed + 3);
  drafts.hq = 2;
  drafts.hkv = 2;
  drafts.max_draft = 160;
  drafts.draft = {160, 70};
  drafts.prefix = {130, 64};
  check(drafts, true, "hopper gqa draft-only steps");

  CaseSpec out32 = base_case(false, seed + 4);
  out32.out_dtype = FV_DTYPE_FP32;
  out32.sinks = true;
  for (int splits : {1, 0}) {
    out32.num_kv_splits = splits;
    check(out32, true, splits == 1 ? "hopper gqa fp32 out, sinks, 1 split" : "hopper gqa fp32 out, sinks");
  }

  CaseSpec f16 = base_case(false, seed + 5);
  f16.dtype = FV_DTYPE_FP16;
  f16.mask_kind = FV_MASK_PARENTS;
  check(f16, true, "hopper gqa fp16, parents");

  // (a given split count: the 5-stage kernel's plan is then the 2-stage kernel's, and its fallback must match too)
  CaseSpec capped = base_case(false, seed + 6);
  capped.logit_cap = 30.f;
  capped.num_kv_splits = 5;
  check(capped, false, "gqa logit cap (the mma.sync tile)");
  CaseSpec scaled = base_case(false, seed + 7);
  scaled.k_scale = 0.5f;
  scaled.num_kv_splits = 2;
  check(scaled, false, "gqa k_scale (the mma.sync tile)");
  CaseSpec fp8 = base_case(false, seed + 8);
  fp8.kv_fp8 = true;
  fp8.k_scale = 0.5f;
  fp8.v_scale = 2.f;
  fp8.num_kv_splits = 3;
  check(fp8, true, "hopper gqa fp8 pools");
  // fp8 pools: sixteen requests in a page table (prefix steps that end mid-step, draft-only steps), an fp16 model with
  // sinks and an fp32 output, batch 1 with one split (the output written by the verify kernel), a negative v_scale; a
  // logit cap keeps the mma.sync tile
  CaseSpec many8 = many;
  many8.seed = seed + 10;
  many8.kv_fp8 = true;
  many8.k_scale = 0.75f;
  many8.v_scale = 1.25f;
  check(many8, true, "hopper gqa fp8, sixteen requests, page table");
  CaseSpec f16fp8 = base_case(false, seed + 11);
  f16fp8.dtype = FV_DTYPE_FP16;
  f16fp8.kv_fp8 = true;
  f16fp8.k_scale = 2.f;
  f16fp8.v_scale = -0.5f;
  f16fp8.sinks = true;
  f16fp8.out_dtype = FV_DTYPE_FP32;
  f16fp8.num_kv_splits = 2;
  check(f16fp8, true, "hopper gqa fp8, fp16 model, sinks, fp32 out, negative v_scale");
  // one request on one KV head, 8 drafts x 8 q heads
  auto one_head_b1 = [&](uint64_t sd, int prefix) {
    CaseSpec c = base_case(false, sd);
    c.hq = 8;
    c.hkv = 1;
    c.draft = {8};
    c.prefix = {prefix};
    return c;
  };
  CaseSpec b1fp8 = one_head_b1(seed + 12, 3000);
  b1fp8.kv_fp8 = true;
  b1fp8.k_scale = 0.5f;
  b1fp8.v_scale = 1.5f;
  for (int splits : {1, 0}) {
    b1fp8.num_kv_splits = splits;
    check(b1fp8, true, splits == 1 ? "hopper gqa fp8 b1, 1 split" : "hopper gqa fp8 b1");
  }
  CaseSpec capped8 = fp8;
  capped8.seed = seed + 13;
  capped8.logit_cap = 30.f;
  check(capped8, false, "gqa fp8 pools, logit cap (the mma.sync tile)");
  // batch 1 of one KV head (the 5-stage kernel's use): long partitions, short ones (fewer steps than stages)
  CaseSpec b1 = one_head_b1(seed + 9, 4000);
  for (int splits : {3, 40, 0}) {
    b1.num_kv_splits = splits;
    const char* label = splits == 3 ? "hopper gqa b1, 3 splits" : splits == 40 ? "hopper gqa b1, 40 splits" : "hopper gqa b1";
    check(b1, true, label);
  }
  if (hopper) EXPECT_GT(differed, 0) << "the Hopper kernel's output equals the mma.sync tile's in all " << served
                                     << " cases it serves: it did not run";
  if (hopper) EXPECT_GE(same_plan, 10) << "cases with a given split count";
  if (hopper) EXPECT_GT(s8_differed, 0) << "fp8 pools: the e4m3 S (S8) changed no output: it did not run";
  // (elsewhere the oracle comparisons above ran and passed, the checks of which kernel ran did not: a skip, not a pass)
  if (!hopper) GTEST_SKIP() << "not an sm_90 device with the library's Hopper kernels: which-kernel checks not run";
}

// The Hopper GQA kernel at head dim d (d256: gqa256_wg_bm64_bn64_s2) and the mma.sync tile of the same plan
// (gqa256_bm64_bn64_s2) against the oracle;
// where the Hopper kernel serves (16-bit pools without modifiers, fp8 pools with k_scale / v_scale only) the two outputs
// differ in some case, where the dispatcher keeps the mma.sync tile (a logit cap) they are bit-identical.
void check_hopper_gqa_head_dim(int d, const char* wg_config, const char* mma_config, uint64_t seed) {
  const bool hopper = hopper_mla_kernel_here();
  int differed = 0, s8_differed = 0;
  auto check = [&](CaseSpec s, bool wg_expected, const std::string& label) {
    s.dqk = s.dv = d;
    const HostProblem hp = fvt::make_problem(s);
    std::vector<uint8_t> raw[2];
    for (int wg : {1, 0}) {
      const char* config = wg ? wg_config : mma_config;
      const ScopedEnv forced("FLASHVERIFY_CONFIG", config), plain("FLASHVERIFY_GQA8_RING", "0");
      const std::string what = label + " [" + config + "]";
      if (hopper) ASSERT_EQ(planned_config(hp), config) << what << ": the planner did not take the forced configuration";
      ASSERT_NO_FATAL_FAILURE(expect_matches_oracle(hp, what.c_str()));
      const fvt::GpuRun r = fvt::run_gpu(hp, FV_IMPL_FAST);
      ASSERT_EQ(r.status, FV_OK) << what << ": " << r.error;
      raw[wg] = r.raw_out;
    }
    if (s.kv_fp8) {
      std::vector<uint8_t> no_s8;
      ASSERT_NO_FATAL_FAILURE(no_s8 = run_without_s8(hp, wg_config, label));
      if (wg_expected) s8_differed += no_s8 != raw[1];
      // d256 below 4 (request, KV head) pairs: S8 is off (dispatch.cu), so FLASHVERIFY_GQA8_S8=0 changes nothing
      if (hopper && d == 256 && int64_t(s.draft.size()) * s.hkv < 4)
        EXPECT_TRUE(no_s8 == raw[1]) << label << ": S8 ran at d256 with fewer than 4 (request, KV head) pairs";
      ASSERT_NO_FATAL_FAILURE(check_ring(hp, wg_config, label, wg_expected, no_s8, raw[0]));
    }
    if (wg_expected) differed += raw[1] != raw[0];
    else if (hopper) EXPECT_TRUE(raw[1] == raw[0]) << label << ": the Hopper kernel ran where the mma.sync tile should";
  };
  const std::string dn = "d" + std::to_string(d);
  CaseSpec multi = base_case(false, seed);
  multi.hq = 8;
  multi.hkv = 1;
  multi.draft = {8, 4, 8, 1, 8, 6};
  multi.prefix = {90, 17, 200, 0, 64, 128};
  multi.num_kv_splits = 2;
  ASSERT_NO_FATAL_FAILURE(check(multi, true, "hopper gqa " + dn + " multi-segment"));
  CaseSpec paged = base_case(false, seed + 1);
  paged.hq = 16;
  paged.hkv = 2;
  paged.max_draft = 40;  // 320 rows a KV head: five row tiles
  paged.draft = {40, 13, 27};
  paged.prefix = {500, 64, -1};
  paged.addressing = FV_KV_PAGE_TABLE;
  paged.page_size = 16;
  ASSERT_NO_FATAL_FAILURE(check(paged, true, "hopper gqa " + dn + " five row tiles, page table"));
  CaseSpec out32 = base_case(false, seed + 2);
  out32.out_dtype = FV_DTYPE_FP32;
  out32.sinks = true;
  out32.dtype = FV_DTYPE_FP16;
  out32.mask_kind = FV_MASK_PARENTS;
  ASSERT_NO_FATAL_FAILURE(check(out32, true, "hopper gqa " + dn + " fp16, fp32 out, sinks, parents"));
  CaseSpec b1 = base_case(false, seed + 3);
  b1.hq = 8;
  b1.hkv = 1;
  b1.draft = {8};
  b1.prefix = {5000};
  ASSERT_NO_FATAL_FAILURE(check(b1, true, "hopper gqa " + dn + " b1"));
  b1.num_kv_splits = 1;  // one split: the output written by the verify kernel itself
  ASSERT_NO_FATAL_FAILURE(check(b1, true, "hopper gqa " + dn + " b1, 1 split"));
  CaseSpec capped = base_case(false, seed + 4);
  capped.logit_cap = 30.f;
  ASSERT_NO_FATAL_FAILURE(check(capped, false, "gqa " + dn + " logit cap (the mma.sync tile)"));
  CaseSpec fp8 = base_case(false, seed + 5);
  fp8.kv_fp8 = true;
  fp8.k_scale = 0.5f;
  fp8.v_scale = 2.f;
  fp8.num_kv_splits = 3;
  ASSERT_NO_FATAL_FAILURE(check(fp8, true, "hopper gqa " + dn + " fp8 pools"));
  CaseSpec paged8 = paged;
  paged8.seed = seed + 6;
  paged8.kv_fp8 = true;
  paged8.k_scale = 1.5f;
  paged8.v_scale = -0.75f;
  paged8.dtype = FV_DTYPE_FP16;
  ASSERT_NO_FATAL_FAILURE(check(paged8, true, "hopper gqa " + dn + " fp8, fp16 model, five row tiles, page table"));
  CaseSpec b1fp8 = b1;
  b1fp8.seed = seed + 7;
  b1fp8.kv_fp8 = true;
  b1fp8.k_scale = 0.5f;
  b1fp8.v_scale = 1.5f;
  ASSERT_NO_FATAL_FAILURE(check(b1fp8, true, "hopper gqa " + dn + " fp8 b1, 1 split"));
  fp8.logit_cap = 30.f;
  fp8.seed = seed + 8;
  ASSERT_NO_FATAL_FAILURE(check(fp8, false, "gqa " + dn + " fp8 pools, logit cap (the mma.sync tile)"));
  if (hopper) EXPECT_GT(differed, 0) << "the Hopper " << dn << " kernel's output equals the mma.sync tile's in every case";
  if (hopper) EXPECT_GT(s8_differed, 0) << dn << ", fp8 pools: the e4m3 S (S8) changed no output: it did not run";
  // (elsewhere the oracle comparisons above ran and passed, the checks of which kernel ran did not: a skip, not a pass)
  if (!hopper) GTEST_SKIP() << "not an sm_90 device with the library's Hopper kernels: which-kernel checks not run";
}

TEST(HopperGqa, HeadDim256AgainstTheOracleAndWhichKernelRan) {
  REQUIRE_GPU();
  check_hopper_gqa_head_dim(256, "gqa256_wg_bm64_bn64_s2", "gqa256_bm64_bn64_s2", fvt::session_seed() + 223);
}

}  // namespace
