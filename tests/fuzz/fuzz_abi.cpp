// libFuzzer target over the C ABI's validation, the planner and the float64 oracle (device = CPU), built
// with AddressSanitizer and UndefinedBehaviorSanitizer (tests/fuzz/build-and-run). Each input describes a
// problem: enums and scalars (valid or not), lengths (sometimes negative, decreasing or over max_draft),
// slot indices, page tables, masks and parent arrays (sometimes out of range or cyclic), strides (sometimes
// too small) and NULL pointers. The harness allocates every array as large as its own description needs;
// what the library cannot know (array sizes) it never has to guess. The library must return a status
// and never read out of bounds; a call it accepts must produce finite outputs from finite inputs.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "flashverify/flashverify.h"

namespace {

struct Buffers {
  std::vector<float> q, kd, vd, kp, vp;
  std::vector<uint8_t> out;
  std::vector<float> lse;
  std::vector<int32_t> qo32, kv32, idx32, pt, parents;
  std::vector<int64_t> qo64, kv64, idx64, m64;
  std::vector<uint8_t> mask;
  std::vector<uint32_t> bits;
  std::vector<float> sinks;
  std::vector<int32_t> woff;
};

// statuses seen, printed at exit: how many inputs were rejected, and why, and how many ran the oracle
int64_t g_status_count[FV_ERR_INTERNAL + 1];
void print_status_counts() {
  std::fprintf(stderr, "fuzz statuses:");
  for (int s = 0; s <= FV_ERR_INTERNAL; ++s)
    if (g_status_count[s]) std::fprintf(stderr, " %s=%lld", s == 0 ? "OK" : fv_status_string(static_cast<fv_status>(s)),
                                        static_cast<long long>(g_status_count[s]));
  std::fprintf(stderr, "\n");
}
const int g_registered = std::atexit(print_status_counts);

template <class T>
T pick(FuzzedDataProvider& f, std::initializer_list<T> v) {
  return *(v.begin() + f.ConsumeIntegralInRange<size_t>(0, v.size() - 1));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider f(data, size);
  fv_args a;
  fv_args_init(&a);
  fv_problem& p = a.problem;
  Buffers b;

  const bool valid_mostly = f.ConsumeIntegralInRange(0, 9) != 0;
  p.device = valid_mostly ? FV_DEVICE_CPU : f.ConsumeIntegralInRange(-1, 2);
  p.impl = valid_mostly ? pick(f, {0, 3}) : f.ConsumeIntegralInRange(-1, 4);
  p.dtype = valid_mostly ? FV_DTYPE_FP32 : f.ConsumeIntegralInRange(-1, 5);
  p.out_dtype = pick<int>(f, {0, 0, FV_DTYPE_FP32, FV_DTYPE_FP64, FV_DTYPE_BF16, 7});
  p.batch_size = f.ConsumeIntegralInRange(-1, 5);
  p.max_draft = f.ConsumeIntegralInRange(-1, 33);
  p.num_kv_heads = pick(f, {1, 1, 2, 0, 3});
  p.num_q_heads = p.num_kv_heads * pick(f, {1, 2, 4}) + (valid_mostly ? 0 : f.ConsumeIntegralInRange(0, 1));
  const int dims = f.ConsumeIntegralInRange(0, 5);
  const int dqk_choices[] = {64, 128, 256, 576, 576, 100};
  const int dv_choices[] = {64, 128, 256, 512, 576, 100};
  p.head_dim_qk = dqk_choices[dims];
  p.head_dim_v = dv_choices[dims];
  p.mask_kind = valid_mostly ? f.ConsumeIntegralInRange(0, 3) : f.ConsumeIntegralInRange(-1, 5);
  p.kv_addressing = valid_mostly ? f.ConsumeIntegralInRange(0, 1) : f.ConsumeIntegralInRange(-1, 2);
  p.page_size = f.ConsumeIntegralInRange(valid_mostly ? 1 : -1, 8);
  p.num_kv_splits = valid_mostly ? f.ConsumeIntegralInRange(0, 8) : f.ConsumeIntegralInRange(-2, 5000);
  p.profile = valid_mostly ? 0 : f.ConsumeIntegralInRange(-1, 3);
  p.flags = valid_mostly ? 0 : f.ConsumeIntegralInRange(0, 1);
  p.kv_dtype = pick<int>(f, {0, 0, 0, FV_DTYPE_FP8_E4M3, 7, FV_DTYPE_BF16});  // fp8 pools read as bytes of the buffers
  a.sm_scale = pick(f, {0.125f, 0.f, 1.f, 30.f, NAN, INFINITY});

  size_t ws_bytes = 0;
  fv_workspace_size(&p, &ws_bytes);  // any status; must not crash

  // lengths, as the harness means them (the arrays may then be corrupted)
  const int B = p.batch_size > 0 ? p.batch_size : 0;
  const int hq = p.num_q_heads > 0 ? p.num_q_heads : 1, hkv = p.num_kv_heads > 0 ? p.num_kv_heads : 1;
  const int dqk = p.head_dim_qk, dv = p.head_dim_v;
  std::vector<int64_t> n(B), plen(B);
  int64_t T = 0, P = 0;
  for (int i = 0; i < B; ++i) {
    n[i] = f.ConsumeIntegralInRange(0, p.max_draft + 1 > 0 ? p.max_draft + 1 : 1);
    plen[i] = f.ConsumeIntegralInRange(0, 40);
    T += n[i];
    P += plen[i];
  }
  const int64_t qo0 = f.ConsumeIntegralInRange(0, 2), kv0 = f.ConsumeIntegralInRange(0, 2);
  b.qo64.assign(B + 1, qo0);
  b.kv64.assign(B + 1, kv0);
  for (int i = 0; i < B; ++i) {
    b.qo64[i + 1] = b.qo64[i] + n[i];
    b.kv64[i + 1] = b.kv64[i] + plen[i];
  }
  const std::vector<int64_t> row0(b.qo64);  // the harness's own offsets, before any corruption
  if (!valid_mostly && B > 0) {  // corrupt one entry
    const int at = f.ConsumeIntegralInRange(0, B);
    (f.ConsumeBool() ? b.qo64 : b.kv64)[at] += f.ConsumeIntegralInRange(-5, 5);
  }
  int64_t rows = row0[B], kv_end = 0;  // the largest row / prefix index any entry (or the harness) names
  for (int i = 0; i <= B; ++i) {
    rows = std::max<int64_t>(rows, b.qo64[i]);
    kv_end = std::max<int64_t>(kv_end, b.kv64[i]);
  }
  b.qo32.assign(b.qo64.begin(), b.qo64.end());
  b.kv32.assign(b.kv64.begin(), b.kv64.end());
  const bool qo_i64 = f.ConsumeBool(), idx_i64 = f.ConsumeBool();

  // strides: the minimum, padded, or (rarely) too small
  auto stride = [&](int64_t heads, int64_t dim, int64_t* head_stride) {
    *head_stride = dim + (f.ConsumeIntegralInRange(0, 3) == 0 ? 8 : 0);
    int64_t tok = (heads - 1) * *head_stride + dim + f.ConsumeIntegralInRange(0, 2) * 8;
    if (!valid_mostly && f.ConsumeIntegralInRange(0, 3) == 0) tok -= 8;
    return tok;
  };
  auto alloc = [&](std::vector<float>& v, int64_t nrows, int64_t st, int64_t heads, int64_t hs, int64_t dim) {
    const int64_t extent = (heads - 1) * hs + dim;
    v.assign(static_cast<size_t>((nrows + 1) * std::max(st, extent) + extent), 0.f);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i % 1013));
  };
  const int64_t num_slots = P + f.ConsumeIntegralInRange(1, 9);
  a.q_stride_token = stride(hq, dqk, &a.q_stride_head);
  a.k_draft_stride_token = stride(hkv, dqk, &a.k_draft_stride_head);
  a.v_draft_stride_token = stride(hkv, dv, &a.v_draft_stride_head);
  a.k_pool_stride_slot = stride(hkv, dqk, &a.k_pool_stride_head);
  a.v_pool_stride_slot = stride(hkv, dv, &a.v_pool_stride_head);
  a.out_stride_token = stride(hq, dv, &a.out_stride_head);
  alloc(b.q, rows, a.q_stride_token, hq, a.q_stride_head, dqk);
  alloc(b.kd, rows, a.k_draft_stride_token, hkv, a.k_draft_stride_head, dqk);
  alloc(b.vd, rows, a.v_draft_stride_token, hkv, a.v_draft_stride_head, dv);
  alloc(b.kp, num_slots + 8, a.k_pool_stride_slot, hkv, a.k_pool_stride_head, dqk);
  alloc(b.vp, num_slots + 8, a.v_pool_stride_slot, hkv, a.v_pool_stride_head, dv);
  const int64_t out_extent = (hq - 1) * a.out_stride_head + dv;
  b.out.assign(static_cast<size_t>((rows + 1) * std::max(a.out_stride_token, out_extent) + out_extent) * 8, 0xFF);
  b.lse.assign(static_cast<size_t>((rows + 1) * hq), NAN);
  a.num_slots = f.ConsumeIntegralInRange(0, 9) == 0 ? f.ConsumeIntegralInRange<int64_t>(-1, 1) : num_slots;

  // slots and pages: valid, or (rarely) one out of range
  b.idx64.resize(static_cast<size_t>(kv_end + 3));
  for (auto& s : b.idx64) s = f.ConsumeIntegralInRange<int64_t>(0, num_slots - 1);
  if (!valid_mostly && !b.idx64.empty()) b.idx64[f.ConsumeIntegralInRange<size_t>(0, b.idx64.size() - 1)] = pick(f, {int64_t(-1), num_slots, int64_t(1) << 40});
  b.idx32.assign(b.idx64.begin(), b.idx64.end());
  const int ps = p.page_size > 0 ? p.page_size : 1;
  a.page_table_stride = 64 / ps + 2;  // a prefix is at most 40 + 5 (a corrupted kv_indptr entry) tokens
  b.pt.assign(static_cast<size_t>(std::max(B, 1) * a.page_table_stride), 0);
  for (auto& x : b.pt) x = f.ConsumeIntegralInRange<int32_t>(valid_mostly ? 0 : -2, static_cast<int32_t>(num_slots / ps));

  // masks
  b.m64.assign(B + 1, 0);
  for (int i = 0; i < B; ++i) b.m64[i + 1] = b.m64[i] + n[i] * (plen[i] + n[i]);
  if (!valid_mostly && B > 0) b.m64[f.ConsumeIntegralInRange(1, B)] += f.ConsumeIntegralInRange(-3, 3);
  int64_t mask_end = 0;
  for (int64_t m : b.m64) mask_end = std::max(mask_end, m);
  b.mask.resize(static_cast<size_t>(mask_end + 8));
  for (auto& m : b.mask) m = f.ConsumeIntegralInRange<uint8_t>(0, 1);
  a.mask_bits_stride = (p.max_draft > 0 ? (p.max_draft + 31) / 32 : 1) + f.ConsumeIntegralInRange(-1, 1);
  b.bits.resize(static_cast<size_t>((rows + 1) * std::max<int64_t>(a.mask_bits_stride, 1)));
  for (auto& w : b.bits) w = f.ConsumeIntegral<uint32_t>();
  b.parents.resize(static_cast<size_t>(rows + 1));
  for (int i = 0; i < B; ++i)
    for (int64_t j = 0; j < n[i]; ++j)
      b.parents[row0[i] + j] = valid_mostly ? static_cast<int32_t>(j - 1 - f.ConsumeIntegralInRange<int64_t>(0, j))
                                              : f.ConsumeIntegralInRange<int32_t>(-2, static_cast<int32_t>(n[i]));

  a.q = b.q.data();
  a.k_draft = b.kd.data();
  a.v_draft = b.vd.data();
  a.k_pool = b.kp.data();
  a.v_pool = b.vp.data();
  a.out = b.out.data();
  a.lse = f.ConsumeBool() ? b.lse.data() : nullptr;
  a.lse_stride_token = hq;
  a.qo_indptr = {qo_i64 ? static_cast<const void*>(b.qo64.data()) : b.qo32.data(), qo_i64 ? FV_INDEX_INT64 : FV_INDEX_INT32, 0};
  a.kv_indptr = {b.kv32.data(), FV_INDEX_INT32, 0};
  a.kv_indices = {idx_i64 ? static_cast<const void*>(b.idx64.data()) : b.idx32.data(),
                  idx_i64 ? FV_INDEX_INT64 : FV_INDEX_INT32, 0};
  a.page_table = b.pt.data();
  a.custom_mask = b.mask.data();
  a.mask_indptr = {b.m64.data(), FV_INDEX_INT64, 0};
  a.mask_bits = b.bits.data();
  a.parents = b.parents.data();
  // SGLang's score modifiers: mostly off, sometimes on, sometimes invalid
  if (f.ConsumeIntegralInRange(0, 2) == 0) {
    a.logit_cap = pick(f, {0.f, 1.5f, 30.f, -1.f, NAN});
    a.sliding_window = pick(f, {0, 1, 3, 17, -1});
    a.xai_temperature_len = pick(f, {0, 2, 5, 1, -3});
    a.k_scale = pick(f, {0.f, 1.f, 0.5f, 2.f, INFINITY});
    a.v_scale = pick(f, {0.f, 1.f, 1.5f, NAN});
    if (f.ConsumeBool()) {
      b.sinks.assign(hq, pick(f, {0.5f, -2.f, -INFINITY, NAN}));
      a.sinks = b.sinks.data();
    }
    if (f.ConsumeBool() && B > 0) {
      b.woff.assign(B, 0);
      b.woff[f.ConsumeIntegralInRange(0, B - 1)] = f.ConsumeIntegralInRange(-2, 3);
      a.window_kv_offsets = b.woff.data();
    }
  }
  // NULL pointers, now and then
  if (!valid_mostly) {
    switch (f.ConsumeIntegralInRange(0, 9)) {
      case 0: a.q = nullptr; break;
      case 1: a.out = nullptr; break;
      case 2: a.kv_indices.data = nullptr; break;
      case 3: a.custom_mask = nullptr; break;
      case 4: a.parents = nullptr; break;
      case 5: a.mask_bits = nullptr; break;
      case 6: a.page_table = nullptr; break;
      case 7: a.qo_indptr.data = nullptr; break;
      default: break;
    }
  }

  const fv_status st = fv_run(&a, nullptr, 0, nullptr);
  if (st >= 0 && st <= FV_ERR_INTERNAL) ++g_status_count[st];
  if (std::strlen(fv_status_string(st)) == 0) std::abort();
  if (st != FV_OK && std::strlen(fv_last_error()) == 0) std::abort();  // every rejection explains itself
  // (fp32 inputs only: 16-bit dtypes and fp8 pools read the float buffers' bytes as halves or bytes, some of which
  // are Inf / NaN codes)
  if (st == FV_OK && p.device == FV_DEVICE_CPU && p.dtype == FV_DTYPE_FP32 && std::isfinite(a.sm_scale) &&
      std::fabs(a.sm_scale) <= 1.f && std::fabs(a.k_scale) <= 2.f && p.kv_dtype == 0) {
    // finite inputs and a moderate scale give finite outputs (rows that see nothing are 0)
    const int od = p.out_dtype == 0 ? p.dtype : p.out_dtype;
    for (int64_t t = b.qo64[0]; t < b.qo64[B]; ++t)
      for (int h = 0; h < hq; ++h)
        for (int d = 0; d < dv; ++d) {
          const int64_t e = t * a.out_stride_token + h * a.out_stride_head + d;
          double x;
          if (od == FV_DTYPE_FP64) x = reinterpret_cast<const double*>(b.out.data())[e];
          else if (od == FV_DTYPE_FP32) x = reinterpret_cast<const float*>(b.out.data())[e];
          else continue;
          if (!std::isfinite(x)) std::abort();
        }
  }
  return 0;
}
