#include "testkit.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>

#include "plan.h"     // src/: SchedLayout, the plan words at the workspace's head
#include "round16.h"  // src/: the oracle's 16-bit conversions

namespace fvt {
namespace {

constexpr uint16_t kNanBits = 0xFFFF;  // NaN in bf16 and fp16

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-scale, scale], as 16-bit bits of `dtype`; reproducible from (seed, stream, index).
// Large pools (the P sweep's B = 16 rows hold up to 8.6 G values) are filled by all cores; each value depends
// only on its index, so the result does not depend on the thread count.
void fill_random(std::vector<uint16_t>& v, int dtype, float scale, uint64_t seed, uint64_t stream) {
  const uint64_t key = splitmix(seed ^ splitmix(stream));
  auto fill = [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      const uint64_t r = splitmix(key + i);
      const float u = static_cast<float>((r >> 40) * (1.0 / 16777216.0));  // [0, 1)
      v[i] = float_to_bits((2.f * u - 1.f) * scale, dtype);
    }
  };
  const size_t n = v.size();
  const size_t threads = n < (size_t(1) << 24) ? 1 : std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  if (threads == 1) return fill(0, n);
  std::vector<std::thread> pool;
  size_t t = 0;
  try {
    for (; t < threads; ++t) pool.emplace_back(fill, n * t / threads, n * (t + 1) / threads);
  } catch (const std::system_error&) {  // no more threads: this one fills the ranges left
    for (size_t r = t; r < threads; ++r) fill(n * r / threads, n * (r + 1) / threads);
  }
  for (std::thread& th : pool) th.join();
}

bool visible(const std::vector<int>& parents, int i, int j) {
  for (int x = i; x >= 0; x = parents[x])
    if (x == j) return true;
  return false;
}

std::vector<int> make_tree(Tree tree, int n, std::mt19937_64& rng) {
  std::vector<int> par(n, -1);
  for (int i = 1; i < n; ++i) {
    switch (tree) {
      case Tree::Chain: par[i] = i - 1; break;
      case Tree::Star: par[i] = 0; break;
      default:
        // mostly one tree; some extra roots, like DDTree's padding rows that see only themselves
        par[i] = (rng() % 10 == 0) ? -1 : static_cast<int>(rng() % i);
        break;
    }
  }
  if (tree == Tree::RandomPerm && n > 1) {
    std::vector<int> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int> out(n, -1);
    for (int i = 0; i < n; ++i) out[perm[i]] = par[i] < 0 ? -1 : perm[par[i]];
    par = out;
  }
  return par;
}

template <class T>
std::vector<T> narrow(const std::vector<int64_t>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Places every request's prefix in the pool (token slots or pages, shuffled or in order) and returns
// which slots are referenced. Slot 0 is the dummy slot that padded requests (prefix -1) read.
std::vector<char> assign_slots(HostProblem& hp, const std::vector<int64_t>& plen, std::mt19937_64& rng) {
  const CaseSpec& s = hp.spec;
  const int B = s.batch();
  std::vector<char> used;
  hp.kv_indices.clear();
  hp.page_table.clear();
  if (s.addressing == FV_KV_TOKEN_SLOTS) {
    int64_t total = 0;
    for (int b = 0; b < B; ++b) total += s.prefix[b] < 0 ? 0 : plen[b];
    hp.num_slots = 1 + total + total / 8 + 7;
    std::vector<int64_t> slots(hp.num_slots - 1);
    std::iota(slots.begin(), slots.end(), 1);
    if (s.shuffle_slots) std::shuffle(slots.begin(), slots.end(), rng);
    hp.kv_indices.reserve(total + B);
    int64_t next = 0;
    for (int b = 0; b < B; ++b) {
      if (s.prefix[b] < 0) {
        hp.kv_indices.push_back(0);
        continue;
      }
      for (int64_t k = 0; k < plen[b]; ++k) hp.kv_indices.push_back(slots[next++]);
    }
    // SGLang over-allocates kv_indices; the tail must never be read
    for (int e = 0; e < 5; ++e) hp.kv_indices.push_back(std::numeric_limits<int32_t>::max());
    used.assign(hp.num_slots, 0);
    used[0] = 1;
    for (int64_t k = 0; k < hp.kv_indptr[B]; ++k) used[hp.kv_indices[k]] = 1;
  } else {
    const int ps = s.page_size;
    int64_t pages = 0, max_pages = 1;
    for (int b = 0; b < B; ++b) {
      const int64_t np = s.prefix[b] < 0 ? 0 : (plen[b] + ps - 1) / ps;
      pages += np;
      max_pages = std::max(max_pages, (plen[b] + ps - 1) / ps);
    }
    const int64_t num_pages = 1 + pages + pages / 8 + 3;
    hp.num_slots = num_pages * ps;
    std::vector<int32_t> ids(num_pages - 1);
    std::iota(ids.begin(), ids.end(), 1);
    if (s.shuffle_slots) std::shuffle(ids.begin(), ids.end(), rng);
    hp.page_table_stride = std::max<int64_t>(s.page_table_stride, max_pages + 1);
    hp.page_table.assign(B * hp.page_table_stride, -7);  // entries past a prefix must never be read
    used.assign(hp.num_slots, 0);
    used[0] = 1;
    int64_t next = 0;
    for (int b = 0; b < B; ++b) {
      if (s.prefix[b] < 0) {
        hp.page_table[b * hp.page_table_stride] = 0;
        continue;
      }
      for (int64_t pg = 0; pg * ps < plen[b]; ++pg) {
        const int32_t id = ids[next++];
        hp.page_table[b * hp.page_table_stride + pg] = id;
        for (int64_t o = 0; o < ps && pg * ps + o < plen[b]; ++o) used[int64_t(id) * ps + o] = 1;
      }
    }
  }
  return used;
}

}  // namespace

const char* tree_name(Tree t) {
  switch (t) {
    case Tree::Chain: return "chain";
    case Tree::Star: return "star";
    case Tree::Random: return "random";
    case Tree::RandomPerm: return "random-perm";
  }
  return "?";
}

std::string CaseSpec::describe() const {
  std::ostringstream os;
  int64_t maxp = 0;
  for (int p : prefix) maxp = std::max<int64_t>(maxp, p);
  os << (mla() ? "mla" : "gqa") << dqk << " " << (dtype == FV_DTYPE_BF16 ? "bf16" : "fp16") << " hq" << hq << "/hkv"
     << hkv << " B" << batch() << " N<=" << max_draft << " P<=" << maxp << " " << tree_name(tree) << " mask"
     << mask_kind << (addressing == FV_KV_PAGE_TABLE ? " page" + std::to_string(page_size) : std::string(" slots"))
     << (indices_i64 ? " i64" : " i32") << (qo_i64 ? " qo64" : "") << (num_kv_splits ? " splits" + std::to_string(num_kv_splits) : "")
     << (profile == FV_PROFILE_SMALL_SMEM ? " small-smem" : "") << (row_pad ? " padded-rows" : "");
  if (logit_cap > 0) os << " cap" << logit_cap;
  if (sliding_window > 0) os << " window" << sliding_window;
  if (xai_temperature_len > 0) os << " xai" << xai_temperature_len;
  if (sinks) os << " sinks";
  if (window_offsets) os << " woff";
  if (k_scale != 0.f || v_scale != 0.f) os << " kv-scale" << k_scale << "/" << v_scale;
  if (kv_fp8) os << " kv-fp8";
  return os.str();
}

// round16.h's conversions, the oracle's own: a float is exactly a double, so the float route rounds it once
uint16_t float_to_bits(float x, int dtype) {
  return dtype == FV_DTYPE_BF16 ? fv::bf16_bits_via_float(x) : fv::fp16_bits_via_float(x);
}

float bits_to_float(uint16_t b, int dtype) {
  return static_cast<float>(fv::decode16(b, dtype == FV_DTYPE_BF16));  // exact: every 16-bit value is a float
}

uint64_t session_seed() {
  if (const char* s = std::getenv("FV_SEED")) return std::strtoull(s, nullptr, 10);
  static const uint64_t seed =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) % 1000000007ull;
  return seed;
}

CaseSpec uniform_spec(bool mla, int hq, int hkv, int d, int n, int p, int b) {
  CaseSpec s;
  s.hq = hq;
  s.hkv = hkv;
  s.dqk = mla ? 576 : d;
  s.dv = mla ? 512 : d;
  s.max_draft = n;
  s.draft.assign(b, n);
  s.prefix.assign(b, p);
  return s;
}

CaseSpec with_fp8(CaseSpec s, float k_scale, float v_scale) {
  s.kv_fp8 = true;
  s.k_scale = k_scale;
  s.v_scale = v_scale;
  return s;
}

HostProblem make_problem(const CaseSpec& spec_in) {
  HostProblem hp;
  hp.spec = spec_in;
  CaseSpec& s = hp.spec;
  if (s.mask_kind == FV_MASK_CAUSAL) s.tree = Tree::Chain;  // a chain is what the causal mask describes
  if (s.sm_scale == 0.f) s.sm_scale = s.mla() ? 0.07216878f : 1.f / std::sqrt(static_cast<float>(s.dqk));
  const int B = s.batch();
  std::mt19937_64 rng(splitmix(s.seed * 7919 + 13));

  // lengths
  hp.qo_indptr.assign(B + 1, 0);
  hp.kv_indptr.assign(B + 1, 0);
  std::vector<int64_t> plen(B);
  for (int b = 0; b < B; ++b) {
    plen[b] = s.prefix[b] < 0 ? 1 : s.prefix[b];
    hp.qo_indptr[b + 1] = hp.qo_indptr[b] + s.draft[b];
    hp.kv_indptr[b + 1] = hp.kv_indptr[b] + plen[b];
  }
  hp.total_q = hp.qo_indptr[B];
  const int64_t T = hp.total_q;

  // queries (padding elements poisoned) and the draft tokens' own K/V
  hp.q_stride_token = int64_t(s.hq) * s.dqk + s.row_pad;
  hp.out_stride_token = int64_t(s.hq) * s.dv + s.row_pad;
  hp.q.resize(T * hp.q_stride_token);
  fill_random(hp.q, s.dtype, s.value_scale, s.seed, 1);
  if (s.row_pad)
    for (int64_t t = 0; t < T; ++t)
      for (int e = 0; e < s.row_pad; ++e) hp.q[t * hp.q_stride_token + int64_t(s.hq) * s.dqk + e] = kNanBits;
  hp.k_draft.resize(T * s.hkv * s.dqk);
  fill_random(hp.k_draft, s.dtype, s.value_scale, s.seed, 2);
  if (!s.mla()) {
    hp.v_draft.resize(T * s.hkv * s.dv);
    fill_random(hp.v_draft, s.dtype, s.value_scale, s.seed, 3);
  }

  // the pool: shuffled slots, slot 0 the dummy that padded requests read, unused rows poisoned
  const std::vector<char> used = assign_slots(hp, plen, rng);
  const int64_t krow = int64_t(s.hkv) * s.dqk, vrow = int64_t(s.hkv) * s.dv;
  if (s.kv_fp8) {
    // e4m3 codes of magnitude 2^-5 .. 1.875, a few subnormals; unused rows NaN (0x7f)
    auto fill8 = [&](std::vector<uint8_t>& v, uint64_t salt) {
      std::mt19937_64 r(splitmix(s.seed * 31 + salt));
      for (auto& x : v) {
        const uint64_t z = r();
        const int exp = (z % 25 == 0) ? 0 : 2 + static_cast<int>((z >> 8) % 6);
        x = static_cast<uint8_t>(((z >> 16) & 1) << 7 | exp << 3 | ((z >> 20) & 7));
      }
    };
    hp.k_pool8.resize(hp.num_slots * krow);
    fill8(hp.k_pool8, 4);
    if (!s.mla()) {
      hp.v_pool8.resize(hp.num_slots * vrow);
      fill8(hp.v_pool8, 5);
    }
    for (int64_t slot = 0; slot < hp.num_slots; ++slot) {
      if (used[slot]) continue;
      std::fill_n(hp.k_pool8.begin() + slot * krow, krow, uint8_t(0x7f));
      if (!s.mla()) std::fill_n(hp.v_pool8.begin() + slot * vrow, vrow, uint8_t(0x7f));
    }
  } else {
    hp.k_pool.resize(hp.num_slots * krow);
    fill_random(hp.k_pool, s.dtype, s.value_scale, s.seed, 4);
    if (!s.mla()) {
      hp.v_pool.resize(hp.num_slots * vrow);
      fill_random(hp.v_pool, s.dtype, s.value_scale, s.seed, 5);
    }
    for (int64_t slot = 0; slot < hp.num_slots; ++slot) {
      if (used[slot]) continue;
      std::fill_n(hp.k_pool.begin() + slot * krow, krow, kNanBits);
      if (!s.mla()) std::fill_n(hp.v_pool.begin() + slot * vrow, vrow, kNanBits);
    }
  }

  // trees and the three mask forms
  const int words = (s.max_draft + 31) / 32;
  hp.mask_bits_stride = words + 1;  // a stride wider than the minimum
  hp.mask_bits.resize(T * hp.mask_bits_stride);
  for (auto& w : hp.mask_bits) w = static_cast<uint32_t>(rng());  // bits past N_b are garbage on purpose
  hp.parents.resize(T);
  hp.mask_indptr.assign(B + 1, 0);
  if (s.window_offsets) {
    hp.window_kv_offsets.resize(B);
    for (int b = 0; b < B; ++b) hp.window_kv_offsets[b] = static_cast<int32_t>(rng() % 7);
  }
  if (s.sinks) {
    hp.sinks.resize(s.hq);
    for (int h = 0; h < s.hq; ++h) hp.sinks[h] = -1.f + 4.f * static_cast<float>(rng() % 1000) / 1000.f;
  }
  for (int b = 0; b < B; ++b) {
    const int n = s.draft[b];
    hp.parents_local.push_back(make_tree(s.tree, n, rng));
    const auto& par = hp.parents_local.back();
    // the offsets shape the byte mask only with a sliding window (SGLang's kernel reads them then only); without one
    // they are passed and must be ignored
    const int64_t off = s.window_offsets && s.sliding_window > 0 ? hp.window_kv_offsets[b] : 0;
    const int64_t qo0 = hp.qo_indptr[b], width = off + plen[b] + n;
    hp.mask_indptr[b + 1] = hp.mask_indptr[b] + n * width;
    // prefix columns are left 0: SGLang fills them with 1s but never reads them, and neither may we
    hp.custom_mask.resize(hp.mask_indptr[b + 1], 0);
    for (int i = 0; i < n; ++i) {
      hp.parents[qo0 + i] = par[i];
      uint32_t* row = hp.mask_bits.data() + (qo0 + i) * hp.mask_bits_stride;
      for (int w = 0; w < (n + 31) / 32; ++w) row[w] &= (n - 32 * w >= 32) ? 0u : ~((1u << (n - 32 * w)) - 1u);
      for (int j = 0; j < n; ++j) {
        const bool v = visible(par, i, j);
        hp.custom_mask[hp.mask_indptr[b] + i * width + off + plen[b] + j] = v;
        if (v) row[j / 32] |= 1u << (j % 32);
      }
    }
  }

  // cost model: every query row against its whole prefix and every draft column of its request (the dense
  // convention: the kernels compute the draft block in full and mask it, so the tree's ancestor count is not used;
  // the draft block is N / (P + N) of the figure, 0.02% at N=8 P=32K, 3% at N=1024 P=32K); KV bytes in 16-bit units
  for (int b = 0; b < B; ++b) {
    hp.flops += 2.0 * s.draft[b] * s.hq * double(plen[b] + s.draft[b]) * (s.dqk + s.dv);
    hp.kv_bytes += double(plen[b]) * s.hkv * (s.mla() ? s.dqk : s.dqk + s.dv) * 2.0;
  }
  return hp;
}

int64_t prefix_slot(const HostProblem& hp, int b, int64_t k) {
  if (hp.spec.addressing == FV_KV_TOKEN_SLOTS) return hp.kv_indices[hp.kv_indptr[b] + k];
  const int ps = hp.spec.page_size;
  return int64_t(hp.page_table[b * hp.page_table_stride + k / ps]) * ps + k % ps;
}

HostProblem relayout(const HostProblem& src, int addressing, int page_size, bool shuffle, uint64_t seed) {
  HostProblem dst = src;
  CaseSpec& s = dst.spec;
  s.addressing = addressing;
  s.page_size = page_size;
  s.shuffle_slots = shuffle;
  const int B = s.batch();
  std::vector<int64_t> plen(B);
  for (int b = 0; b < B; ++b) plen[b] = src.kv_indptr[b + 1] - src.kv_indptr[b];
  std::mt19937_64 rng(splitmix(seed));
  assign_slots(dst, plen, rng);
  const int64_t krow = int64_t(s.hkv) * s.dqk, vrow = int64_t(s.hkv) * s.dv;
  if (s.kv_fp8) {
    dst.k_pool8.assign(dst.num_slots * krow, uint8_t(0x7f));
    if (!s.mla()) dst.v_pool8.assign(dst.num_slots * vrow, uint8_t(0x7f));
  } else {
    dst.k_pool.assign(dst.num_slots * krow, kNanBits);
    if (!s.mla()) dst.v_pool.assign(dst.num_slots * vrow, kNanBits);
  }
  auto copy_row = [&](int64_t from, int64_t to) {
    if (s.kv_fp8) {
      std::copy_n(src.k_pool8.begin() + from * krow, krow, dst.k_pool8.begin() + to * krow);
      if (!s.mla()) std::copy_n(src.v_pool8.begin() + from * vrow, vrow, dst.v_pool8.begin() + to * vrow);
      return;
    }
    std::copy_n(src.k_pool.begin() + from * krow, krow, dst.k_pool.begin() + to * krow);
    if (!s.mla()) std::copy_n(src.v_pool.begin() + from * vrow, vrow, dst.v_pool.begin() + to * vrow);
  };
  copy_row(0, 0);
  for (int b = 0; b < B; ++b)
    for (int64_t k = 0; k < plen[b]; ++k) copy_row(prefix_slot(src, b, k), prefix_slot(dst, b, k));
  return dst;
}

Pointers host_pointers(const HostProblem& hp, IndexStore& st, void* out, float* lse) {
  const CaseSpec& s = hp.spec;
  Pointers p{};
  p.q = hp.q.data();
  p.out = out;
  p.lse = lse;
  p.k_draft = hp.k_draft.data();
  p.v_draft = s.mla() ? hp.k_draft.data() : hp.v_draft.data();
  if (s.kv_fp8) {
    p.k_pool = hp.k_pool8.data();
    p.v_pool = s.mla() ? hp.k_pool8.data() : hp.v_pool8.data();
  } else {
    p.k_pool = hp.k_pool.data();
    p.v_pool = s.mla() ? hp.k_pool.data() : hp.v_pool.data();
  }
  st.qo32 = narrow<int32_t>(hp.qo_indptr);
  st.qo64 = hp.qo_indptr;
  st.kv32 = narrow<int32_t>(hp.kv_indptr);
  st.idx32 = narrow<int32_t>(hp.kv_indices);
  st.idx64 = hp.kv_indices;
  st.m64 = hp.mask_indptr;
  p.qo_indptr = s.qo_i64 ? static_cast<const void*>(st.qo64.data()) : st.qo32.data();
  p.kv_indptr = st.kv32.data();
  p.kv_indices = s.indices_i64 ? static_cast<const void*>(st.idx64.data()) : st.idx32.data();
  p.mask_indptr = st.m64.data();
  p.page_table = hp.page_table.empty() ? nullptr : hp.page_table.data();
  p.custom_mask = hp.custom_mask.empty() ? nullptr : hp.custom_mask.data();
  p.mask_bits = hp.mask_bits.data();
  p.parents = hp.parents.data();
  p.sinks = hp.sinks.empty() ? nullptr : hp.sinks.data();
  p.window_kv_offsets = hp.window_kv_offsets.empty() ? nullptr : hp.window_kv_offsets.data();
  return p;
}

fv_args make_args(const HostProblem& hp, const Pointers& ptr, int device, int impl, int out_dtype) {
  const CaseSpec& s = hp.spec;
  fv_args a;
  fv_args_init(&a);
  fv_problem& pb = a.problem;
  pb.device = device;
  pb.impl = impl;
  pb.dtype = s.dtype;
  pb.out_dtype = out_dtype;
  pb.batch_size = s.batch();
  pb.max_draft = s.max_draft;
  pb.num_q_heads = s.hq;
  pb.num_kv_heads = s.hkv;
  pb.head_dim_qk = s.dqk;
  pb.head_dim_v = s.dv;
  pb.mask_kind = s.mask_kind;
  pb.kv_addressing = s.addressing;
  pb.page_size = s.page_size;
  pb.num_kv_splits = s.num_kv_splits;
  pb.profile = s.profile;
  pb.kv_dtype = s.kv_fp8 ? FV_DTYPE_FP8_E4M3 : 0;

  a.q = ptr.q;
  a.q_stride_token = hp.q_stride_token;
  a.q_stride_head = s.dqk;
  a.out = ptr.out;
  a.out_stride_token = hp.out_stride_token;
  a.out_stride_head = s.dv;
  a.lse = ptr.lse;
  a.lse_stride_token = s.hq;
  a.k_draft = ptr.k_draft;
  a.k_draft_stride_token = int64_t(s.hkv) * s.dqk;
  a.k_draft_stride_head = s.dqk;
  a.v_draft = ptr.v_draft;
  a.v_draft_stride_token = s.mla() ? int64_t(s.hkv) * s.dqk : int64_t(s.hkv) * s.dv;
  a.v_draft_stride_head = s.mla() ? s.dqk : s.dv;
  a.k_pool = ptr.k_pool;
  a.k_pool_stride_slot = int64_t(s.hkv) * s.dqk;
  a.k_pool_stride_head = s.dqk;
  a.v_pool = ptr.v_pool;
  a.v_pool_stride_slot = a.v_draft_stride_token;
  a.v_pool_stride_head = a.v_draft_stride_head;
  a.num_slots = hp.num_slots;
  a.qo_indptr = {ptr.qo_indptr, s.qo_i64 ? FV_INDEX_INT64 : FV_INDEX_INT32, 0};
  a.kv_indptr = {ptr.kv_indptr, FV_INDEX_INT32, 0};
  a.kv_indices = {ptr.kv_indices, s.indices_i64 ? FV_INDEX_INT64 : FV_INDEX_INT32, 0};
  a.page_table = ptr.page_table;
  a.page_table_stride = hp.page_table_stride;
  a.custom_mask = ptr.custom_mask;
  a.mask_indptr = {ptr.mask_indptr, FV_INDEX_INT64, 0};
  a.mask_bits = ptr.mask_bits;
  a.mask_bits_stride = hp.mask_bits_stride;
  a.parents = ptr.parents;
  a.sm_scale = s.sm_scale;
  a.logit_cap = s.logit_cap;
  a.sliding_window = s.sliding_window;
  a.xai_temperature_len = s.xai_temperature_len;
  a.sinks = ptr.sinks;
  a.window_kv_offsets = ptr.window_kv_offsets;
  a.k_scale = s.k_scale;
  a.v_scale = s.v_scale;
  return a;
}

fv_status run_oracle(const HostProblem& hp, Reference* ref) {
  const CaseSpec& s = hp.spec;
  ref->out.assign(hp.total_q * s.hq * s.dv, std::numeric_limits<double>::quiet_NaN());
  ref->lse.assign(hp.total_q * s.hq, std::numeric_limits<float>::quiet_NaN());
  IndexStore st;
  Pointers p = host_pointers(hp, st, ref->out.data(), ref->lse.data());
  fv_args a = make_args(hp, p, FV_DEVICE_CPU, FV_IMPL_ORACLE, FV_DTYPE_FP64);
  a.out_stride_token = int64_t(s.hq) * s.dv;
  a.out_stride_head = s.dv;
  return fv_run(&a, nullptr, 0, nullptr);
}

fv_status run_oracle_heads(const HostProblem& hp, int h0, int nh, std::vector<double>* out, int request) {
  const CaseSpec& s = hp.spec;
  if (s.hkv < 1 || s.hq % s.hkv != 0) return FV_ERR_INVALID_VALUE;
  const int group = s.hq / s.hkv;
  const bool whole_groups = s.hkv == 1 || (h0 % group == 0 && nh % group == 0);
  if (h0 < 0 || nh < 1 || h0 + nh > s.hq || !whole_groups || request < 0 ||
      size_t(request) + 2 > hp.qo_indptr.size())
    return FV_ERR_INVALID_VALUE;
  const int64_t rows = hp.qo_indptr[request + 1];
  out->assign(rows * nh * s.dv, std::numeric_limits<double>::quiet_NaN());
  IndexStore st;
  Pointers p = host_pointers(hp, st, out->data(), nullptr);
  fv_args a = make_args(hp, p, FV_DEVICE_CPU, FV_IMPL_ORACLE, FV_DTYPE_FP64);
  // one request alone: the [B + 1] index arrays from that request on (their values, the rows of q, k / v draft,
  // out, the mask's rows and the slot offsets, stay absolute: the ABI indexes them so), the per-request ones (page
  // table rows, window offsets) from its entry
  a.problem.batch_size = 1;
  a.problem.num_q_heads = nh;
  a.out_stride_token = int64_t(nh) * s.dv;
  a.out_stride_head = s.dv;
  a.lse = nullptr;
  auto at = [](const void* base, int64_t elems, int bytes) {
    return static_cast<const void*>(static_cast<const char*>(base) + elems * bytes);
  };
  if (request > 0) {
    for (fv_index* ix : {&a.qo_indptr, &a.kv_indptr, &a.mask_indptr})
      if (ix->data != nullptr) ix->data = at(ix->data, request, ix->dtype == FV_INDEX_INT64 ? 8 : 4);
    if (a.page_table != nullptr) a.page_table += int64_t(request) * a.page_table_stride;
    if (a.window_kv_offsets != nullptr) a.window_kv_offsets += request;
  }
  a.q = at(a.q, h0 * a.q_stride_head, 2);
  if (a.sinks != nullptr) a.sinks += h0;
  if (s.hkv > 1) {  // the groups' KV heads
    const int g0 = h0 / group;
    const int kvb = s.kv_fp8 ? 1 : 2;
    a.problem.num_kv_heads = nh / group;
    a.k_draft = at(a.k_draft, g0 * a.k_draft_stride_head, 2);
    a.v_draft = at(a.v_draft, g0 * a.v_draft_stride_head, 2);
    a.k_pool = at(a.k_pool, g0 * a.k_pool_stride_head, kvb);
    a.v_pool = at(a.v_pool, g0 * a.v_pool_stride_head, kvb);
  }
  return fv_run(&a, nullptr, 0, nullptr);
}

std::string Comparison::where(const HostProblem& hp) const {
  if (worst < 0) return "-";
  const int64_t hq = hp.spec.hq, dv = hp.spec.dv;
  std::ostringstream os;
  os << "t=" << worst / (hq * dv) << " h=" << (worst / dv) % hq << " d=" << worst % dv;
  return os.str();
}

Comparison compare(const HostProblem& hp, const std::vector<float>& got, const std::vector<float>& got_lse,
                   const Reference& ref) {
  Comparison c;
  // squared errors and squared references (NaN outputs apart): the batch's, and each request's
  struct Sums {
    double num = 0, den = 0;
    bool nan = false;
  };
  auto rel_of = [](const Sums& s) {
    return s.nan ? std::numeric_limits<double>::infinity() : s.den > 0 ? std::sqrt(s.num / s.den) : std::sqrt(s.num);
  };
  const int64_t row_elems = int64_t(hp.spec.hq) * hp.spec.dv;
  const size_t B = hp.qo_indptr.empty() ? 0 : hp.qo_indptr.size() - 1;
  Sums all;
  std::vector<Sums> req(B);
  size_t b = 0;  // the request of element e's token (a request's tokens are consecutive)
  for (size_t e = 0; e < ref.out.size(); ++e) {
    const double g = got[e], r = ref.out[e];
    const int64_t t = static_cast<int64_t>(e) / row_elems;
    while (b < B && t >= hp.qo_indptr[b + 1]) ++b;
    Sums* in_req = b < B && t >= hp.qo_indptr[b] ? &req[b] : nullptr;
    ++c.checked;
    if (std::isnan(g)) {
      all.nan = true;
      if (in_req) in_req->nan = true;
      if (c.nan_count++ == 0) {
        c.worst = static_cast<int64_t>(e);
        c.worst_got = g;
        c.worst_ref = r;
      }
      continue;
    }
    const double d = std::fabs(g - r);
    all.num += d * d;
    all.den += r * r;
    if (in_req) {
      in_req->num += d * d;
      in_req->den += r * r;
    }
    if (d > c.max_abs && c.nan_count == 0) {
      c.max_abs = d;
      c.worst = static_cast<int64_t>(e);
      c.worst_got = g;
      c.worst_ref = r;
    }
  }
  c.rel_l2 = rel_of(all);
  for (size_t k = 0; k < B; ++k) {
    const double rel = rel_of(req[k]);
    if (c.worst_req < 0 || rel > c.req_rel_l2) {
      c.req_rel_l2 = rel;
      c.worst_req = int64_t(k);
    }
  }
  if (hp.spec.want_lse && !got_lse.empty()) {
    for (size_t e = 0; e < ref.lse.size(); ++e) {
      const float g = got_lse[e], r = ref.lse[e];
      // NaN on either side, or an infinity the other side does not have with the same sign (a row that sees
      // nothing has -inf; +inf is never right)
      if (std::isnan(g) || std::isnan(r) || ((std::isinf(g) || std::isinf(r)) && g != r)) {
        ++c.lse_bad;
        continue;
      }
      if (std::isinf(r)) continue;
      const double err = std::fabs(double(g) - double(r));
      c.lse_max_abs = std::max(c.lse_max_abs, err);
      c.lse_worst_ratio = std::max(c.lse_worst_ratio, err / lse_allowed(hp, r));
    }
  }
  return c;
}

double lse_allowed(const HostProblem& hp, double ref) {
  // (the S8 kernels' shapes: GQA d128 / d256; MLA's fp8 kernels and the others multiply exactly widened values)
  const bool e4m3_scores = hp.spec.kv_fp8 && hp.spec.dtype == FV_DTYPE_BF16 && !hp.spec.mla() &&
                           (hp.spec.dqk == 128 || hp.spec.dqk == 256);
  return e4m3_scores ? std::max(kLseAbs, kLseRelE4m3 * std::fabs(ref)) : kLseAbs;
}

// ---------------------------------------------------------------------------------------------------
// device side

std::string gpu_unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
  }
  if (n == 0) return "no CUDA device";
  return "";
}

std::string gpu_name() {
  cudaDeviceProp prop;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return "none";
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  return buf;
}

void* DeviceProblem::dev_alloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(bytes, 16)) != cudaSuccess) {
    cudaGetLastError();
    error_ = "cudaMalloc of " + std::to_string(bytes) + " bytes failed";
    return nullptr;
  }
  allocs_.push_back(p);
  return p;
}

void* DeviceProblem::dev_copy(const void* src, size_t bytes) {
  void* p = dev_alloc(bytes);
  if (p && bytes && cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaGetLastError();
    error_ = "cudaMemcpy to the device failed";
  }
  return p;
}

void* DeviceProblem::put(int which, const void* src, size_t bytes) {
  Buf& b = bufs_[which];
  if (src == nullptr) return b.ptr;
  if (b.ptr == nullptr) {
    b.ptr = dev_copy(src, bytes);
    b.bytes = bytes;
    return b.ptr;
  }
  if (bytes > b.bytes) {
    error_ = "upload_inputs: buffer " + std::to_string(which) + " needs " + std::to_string(bytes) + " bytes, has " +
             std::to_string(b.bytes);
    return b.ptr;
  }
  if (bytes && cudaMemcpy(b.ptr, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaGetLastError();
    error_ = "cudaMemcpy to the device failed";
  }
  return b.ptr;
}

bool DeviceProblem::upload_inputs(const HostProblem& hp) {
  const CaseSpec& s = hp.spec;
  // a rewrite (CUDA-graph tests) must keep the page-table row stride the arguments were made with: the table would be
  // uploaded with one stride and read with the other (CaseSpec::page_table_stride fixes it)
  if (args_.page_table != nullptr && hp.page_table_stride != args_.page_table_stride) {
    error_ = "upload_inputs: page_table_stride " + std::to_string(hp.page_table_stride) + " differs from the " +
             std::to_string(args_.page_table_stride) + " the arguments hold";
    return false;
  }
  IndexStore st;
  Pointers h = host_pointers(hp, st, nullptr, nullptr);
  put(kQ, hp.q.data(), hp.q.size() * 2);
  put(kKd, hp.k_draft.data(), hp.k_draft.size() * 2);
  if (!s.mla()) put(kVd, hp.v_draft.data(), hp.v_draft.size() * 2);
  if (s.kv_fp8) {
    put(kKp, hp.k_pool8.data(), hp.k_pool8.size());
    if (!s.mla()) put(kVp, hp.v_pool8.data(), hp.v_pool8.size());
  } else {
    put(kKp, hp.k_pool.data(), hp.k_pool.size() * 2);
    if (!s.mla()) put(kVp, hp.v_pool.data(), hp.v_pool.size() * 2);
  }
  put(kQo, h.qo_indptr, (s.qo_i64 ? 8 : 4) * hp.qo_indptr.size());
  put(kKv, h.kv_indptr, 4 * hp.kv_indptr.size());
  put(kIdx, hp.kv_indices.empty() ? nullptr : h.kv_indices, (s.indices_i64 ? 8 : 4) * hp.kv_indices.size());
  put(kMi, h.mask_indptr, 8 * hp.mask_indptr.size());
  put(kPt, hp.page_table.empty() ? nullptr : hp.page_table.data(), 4 * hp.page_table.size());
  put(kMask, hp.custom_mask.empty() ? nullptr : hp.custom_mask.data(), hp.custom_mask.size());
  put(kBits, hp.mask_bits.data(), 4 * hp.mask_bits.size());
  put(kPar, hp.parents.data(), 4 * hp.parents.size());
  put(kSinks, hp.sinks.empty() ? nullptr : hp.sinks.data(), 4 * hp.sinks.size());
  put(kWoff, hp.window_kv_offsets.empty() ? nullptr : hp.window_kv_offsets.data(), 4 * hp.window_kv_offsets.size());
  return error_.empty();
}

DeviceProblem::DeviceProblem(const HostProblem& hp, int impl) : hp_(&hp) {
  const CaseSpec& s = hp.spec;
  const int od = s.out_dtype == 0 ? s.dtype : s.out_dtype;
  const int ob = od == FV_DTYPE_FP32 ? 4 : 2;
  if (!upload_inputs(hp)) return;
  Pointers d{};
  d.q = bufs_[kQ].ptr;
  d.k_draft = bufs_[kKd].ptr;
  d.v_draft = s.mla() ? d.k_draft : bufs_[kVd].ptr;
  d.k_pool = bufs_[kKp].ptr;
  d.v_pool = s.mla() ? d.k_pool : bufs_[kVp].ptr;
  out_bytes_ = static_cast<size_t>(hp.out_elems()) * ob;
  d.out = dev_alloc(out_bytes_);
  d.lse = static_cast<float*>(s.want_lse ? dev_alloc(hp.total_q * s.hq * 4) : nullptr);
  d.qo_indptr = bufs_[kQo].ptr;
  d.kv_indptr = bufs_[kKv].ptr;
  d.kv_indices = bufs_[kIdx].ptr;
  d.mask_indptr = bufs_[kMi].ptr;
  d.page_table = static_cast<const int32_t*>(bufs_[kPt].ptr);
  d.custom_mask = static_cast<const uint8_t*>(bufs_[kMask].ptr);
  d.mask_bits = static_cast<const uint32_t*>(bufs_[kBits].ptr);
  d.parents = static_cast<const int32_t*>(bufs_[kPar].ptr);
  d.sinks = static_cast<const float*>(bufs_[kSinks].ptr);
  d.window_kv_offsets = static_cast<const int32_t*>(bufs_[kWoff].ptr);
  if (!error_.empty()) return;
  args_ = make_args(hp, d, FV_DEVICE_CUDA, impl, s.out_dtype);
  const fv_status stt = fv_workspace_size(&args_.problem, &ws_bytes_);
  if (stt != FV_OK) {
    error_ = std::string("fv_workspace_size: ") + fv_last_error();
    return;
  }
  ws_ = ws_bytes_ ? dev_alloc(ws_bytes_) : nullptr;
  poison();
}

DeviceProblem::~DeviceProblem() {
  for (void* p : allocs_) cudaFree(p);
}

void DeviceProblem::poison() {
  if (!error_.empty()) return;
  cudaMemset(args_.out, 0xFF, out_bytes_);
  if (args_.lse) cudaMemset(args_.lse, 0xFF, hp_->total_q * hp_->spec.hq * 4);
  if (ws_) cudaMemset(ws_, 0xFF, ws_bytes_);
}

fv_status DeviceProblem::run(void* stream) { return fv_run(&args_, ws_, ws_bytes_, stream); }

bool DeviceProblem::download(std::vector<float>* out, std::vector<float>* lse, std::vector<uint8_t>* raw,
                             const HostProblem* as) const {
  const HostProblem* hp = as ? as : hp_;
  const CaseSpec& s = hp->spec;
  const int od = s.out_dtype == 0 ? s.dtype : s.out_dtype;
  std::vector<uint8_t> bytes(out_bytes_);
  if (cudaMemcpy(bytes.data(), args_.out, out_bytes_, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  if (out) {
    out->assign(hp->total_q * s.hq * s.dv, 0.f);
    for (int64_t t = 0; t < hp->total_q; ++t)
      for (int64_t e = 0; e < int64_t(s.hq) * s.dv; ++e) {
        const int64_t src = t * hp->out_stride_token + e;
        float v;
        if (od == FV_DTYPE_FP32) std::memcpy(&v, bytes.data() + 4 * src, 4);
        else {
          uint16_t b;
          std::memcpy(&b, bytes.data() + 2 * src, 2);
          v = bits_to_float(b, od);
        }
        (*out)[t * s.hq * s.dv + e] = v;
      }
  }
  if (lse) {
    lse->clear();
    if (args_.lse) {
      lse->resize(hp->total_q * s.hq);
      if (cudaMemcpy(lse->data(), args_.lse, lse->size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    }
  }
  if (raw) *raw = std::move(bytes);
  return true;
}

GpuRun run_gpu(const HostProblem& hp, int impl, int repeats) {
  GpuRun r;
  DeviceProblem dp(hp, impl);
  if (!dp.ok()) {
    r.status = FV_ERR_CUDA;
    r.error = dp.error();
    return r;
  }
  for (int i = 0; i < repeats; ++i) {
    r.status = dp.run(nullptr);
    if (r.status != FV_OK) {
      r.error = fv_last_error();
      return r;
    }
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    r.status = FV_ERR_CUDA;
    r.error = std::string("kernel execution: ") + cudaGetErrorString(e);
    return r;
  }
  if (!dp.download(&r.out, &r.lse, &r.raw_out)) {
    r.status = FV_ERR_CUDA;
    r.error = "download failed";
    return r;
  }
  if (impl == FV_IMPL_FAST) {
    const size_t words = static_cast<size_t>(fv::SchedLayout::words(hp.spec.batch()));
    if (dp.workspace() != nullptr && dp.workspace_bytes() >= words * sizeof(int32_t)) {
      r.plan_words.resize(words);
      if (cudaMemcpy(r.plan_words.data(), dp.workspace(), words * sizeof(int32_t), cudaMemcpyDeviceToHost) !=
          cudaSuccess) {
        r.status = FV_ERR_CUDA;
        r.error = "plan download failed";
        return r;
      }
    }
  }
  // the padding after each token's Hq x Dv outputs: poisoned with the rest, and no kernel may write it
  const CaseSpec& s = hp.spec;
  const int64_t eb = (s.out_dtype == 0 ? s.dtype : s.out_dtype) == FV_DTYPE_FP32 ? 4 : 2;
  const int64_t row = int64_t(s.hq) * s.dv;
  for (int64_t t = 0; t < hp.total_q; ++t)
    for (int64_t b = (t * hp.out_stride_token + row) * eb; b < (t + 1) * hp.out_stride_token * eb; ++b)
      r.pad_written += r.raw_out[b] != 0xFF;
  return r;
}

int planned_partitions(const GpuRun& r) { return r.plan_words.empty() ? -1 : r.plan_words[0]; }

int64_t planned_total_cost(const GpuRun& r) { return r.plan_words.size() < 2 ? -1 : r.plan_words[1]; }

int planned_splits(const GpuRun& r, int request) {
  if (r.plan_words.empty() || request < 0) return -1;
  // SchedLayout::words(B) = kHeader + 4 B + 1, so B follows from the word count
  const int batch = static_cast<int>((int64_t(r.plan_words.size()) - fv::SchedLayout::kHeader - 1) / 4);
  if (request >= batch) return -1;
  return r.plan_words[static_cast<size_t>(fv::SchedLayout::num_splits(batch) + request)];
}

}  // namespace fvt
