// The naive GPU reference: one block per (draft token, q head). It shares nothing with the fast kernel.
// Pass 1: every thread walks a strided subset of the keys (the whole prefix through the slot indices,
// then the visible draft tokens) with an online max / sum; the block merges them. Pass 2: tiles of 256
// keys: the scores are recomputed into shared memory as probabilities, then each thread accumulates its
// output columns. Scores are recomputed rather than stored, so any prefix length runs in the same
// fixed shared memory (65,536 and 262,144 tokens included) and no scratch buffer is needed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common.h"
#include "cuda/launch.h"

namespace fv {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxDqk = 576, kMaxDv = 512;

struct NaiveParams {
  const void* q;
  int64_t q_st, q_sh;
  const void* k_draft;
  int64_t kd_st, kd_sh;
  const void* v_draft;
  int64_t vd_st, vd_sh;
  const void* k_pool;
  int64_t kp_ss, kp_sh;
  const void* v_pool;
  int64_t vp_ss, vp_sh;
  void* out;
  int64_t o_st, o_sh;
  float* lse;
  int64_t lse_st;
  const void* qo_indptr;
  const void* kv_indptr;
  const void* kv_indices;
  const void* mask_indptr;
  int qo64, kvp64, kvi64, mi64;
  const int32_t* page_table;
  int64_t pt_stride;
  int paged, page_size;
  const uint8_t* custom_mask;
  const uint32_t* mask_bits;
  int64_t bits_stride;
  const int32_t* parents;
  int mask_kind;
  int max_draft, hq, group, dqk, dv;
  int out_fp32;
  float sm_scale;
  // SGLang's modifiers (fv_args)
  float logit_cap, k_scale, v_scale;
  int window, xai_len;
  const float* sinks;
  const int32_t* woff;
  int kv_fp8;  // pools hold fp8 e4m3 bytes
};

__device__ __forceinline__ int64_t ld_index(const void* p, int64_t i, int is64) {
  return is64 ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

template <class T>
__device__ __forceinline__ float ld(const void* base, int64_t off) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value)
    return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[off]);
  else
    return __half2float(static_cast<const __half*>(base)[off]);
}

// An element of a pool row: fp8 e4m3 bytes (kv_dtype) or T
template <class T>
__device__ __forceinline__ float ld_kv(const void* base, int64_t off, bool fp8) {
  if (fp8) return static_cast<float>(*reinterpret_cast<const __nv_fp8_e4m3*>(static_cast<const uint8_t*>(base) + off));
  return ld<T>(base, off);
}

struct Req {
  int b, i, n;
  int64_t qo0, kv0, plen, mask0, woff;
};

// Where key k's K (or V) row is (k < plen: prefix through the pool; else draft k - plen); false when the
// tree hides that draft token from draft token r.i.
__device__ bool key_row(const NaiveParams& p, const Req& r, int64_t k, int hk, bool want_v, const void** base,
                        int64_t* off) {
  if (k < r.plen) {
    if (p.window > 0 && r.plen + r.i > k + p.window) return false;  // outside the sliding window
    int64_t slot;
    if (p.paged) slot = int64_t(p.page_table[r.b * p.pt_stride + k / p.page_size]) * p.page_size + k % p.page_size;
    else slot = ld_index(p.kv_indices, r.kv0 + k, p.kvi64);
    *base = want_v ? p.v_pool : p.k_pool;
    *off = want_v ? slot * p.vp_ss + hk * p.vp_sh : slot * p.kp_ss + hk * p.kp_sh;
    return true;
  }
  const int j = static_cast<int>(k - r.plen);
  if (p.window > 0 && r.i > j + p.window) return false;
  bool visible;
  switch (p.mask_kind) {
    case FV_MASK_BYTES:
      visible = p.custom_mask[r.mask0 + int64_t(r.i) * (r.woff + r.plen + r.n) + r.woff + r.plen + j] != 0;
      break;
    case FV_MASK_BITS: visible = (p.mask_bits[(r.qo0 + r.i) * p.bits_stride + j / 32] >> (j % 32)) & 1u; break;
    case FV_MASK_PARENTS: {
      visible = false;
      int x = r.i;
      for (int steps = 0; x >= 0 && x < r.n && steps <= r.n; ++steps) {
        if (x == j) { visible = true; break; }
        x = p.parents[r.qo0 + x];
      }
      break;
    }
    default: visible = j <= r.i; break;
  }
  if (!visible) return false;
  const int64_t tok = r.qo0 + j;
  *base = want_v ? p.v_draft : p.k_draft;
  *off = want_v ? tok * p.vd_st + hk * p.vd_sh : tok * p.kd_st + hk * p.kd_sh;
  return true;
}

template <class T>
__global__ void __launch_bounds__(kThreads) naive_kernel(const __grid_constant__ NaiveParams p) {
  __shared__ float q_s[kMaxDqk];
  __shared__ float prob[kThreads];
  __shared__ const void* vbase_s[kThreads];
  __shared__ int64_t voff_s[kThreads];
  __shared__ float red_m[kThreads / 32], red_l[kThreads / 32];

  Req r;
  r.b = blockIdx.x / p.max_draft;
  r.i = blockIdx.x % p.max_draft;
  const int h = blockIdx.y, hk = h / p.group;
  r.qo0 = ld_index(p.qo_indptr, r.b, p.qo64);
  r.n = static_cast<int>(ld_index(p.qo_indptr, r.b + 1, p.qo64) - r.qo0);
  if (r.i >= r.n) return;
  r.kv0 = ld_index(p.kv_indptr, r.b, p.kvp64);
  r.plen = ld_index(p.kv_indptr, r.b + 1, p.kvp64) - r.kv0;
  r.mask0 = p.mask_kind == FV_MASK_BYTES ? ld_index(p.mask_indptr, r.b, p.mi64) : 0;
  r.woff = p.woff != nullptr ? p.woff[r.b] : 0;
  const int64_t qpos = r.plen + r.i;
  const float xai = p.xai_len > 0 && qpos > p.xai_len ? log2f(float(qpos)) / log2f(float(p.xai_len)) : 1.f;
  const int64_t tok = r.qo0 + r.i;
  const int64_t nkeys = r.plen + r.n;

  for (int d = threadIdx.x; d < p.dqk; d += kThreads) q_s[d] = ld<T>(p.q, tok * p.q_st + h * p.q_sh + d);
  __syncthreads();

  auto score = [&](int64_t k, bool* ok) -> float {
    const void* base;
    int64_t off;
    *ok = key_row(p, r, k, hk, false, &base, &off);
    if (!*ok) return 0.f;
    float s = 0.f;
    const bool fp8 = p.kv_fp8 && k < r.plen;
    for (int d = 0; d < p.dqk; ++d) s += q_s[d] * ld_kv<T>(base, off + d, fp8);
    s *= p.sm_scale * (k < r.plen ? p.k_scale : 1.f);
    if (p.logit_cap > 0.f) s = p.logit_cap * tanhf(s / p.logit_cap);
    return s * xai;
  };

  // pass 1: per-thread online max and sum, then the block's
  float m = -INFINITY, l = 0.f;
  for (int64_t k = threadIdx.x; k < nkeys; k += kThreads) {
    bool ok;
    const float s = score(k, &ok);
    if (!ok) continue;
    if (s > m) {
      l = l * expf(m - s) + 1.f;
      m = s;
    } else {
      l += expf(s - m);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
    const float mm = fmaxf(m, m2);
    l = (mm == -INFINITY) ? 0.f : l * expf(m - mm) + l2 * expf(m2 - mm);
    m = mm;
  }
  if (threadIdx.x % 32 == 0) {
    red_m[threadIdx.x / 32] = m;
    red_l[threadIdx.x / 32] = l;
  }
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < kThreads / 32; ++w) m = fmaxf(m, red_m[w]);
  l = 0.f;
  if (m != -INFINITY)
    for (int w = 0; w < kThreads / 32; ++w) l += red_l[w] * expf(red_m[w] - m);
  if (p.sinks != nullptr && l > 0.f) {  // the sink: denominator only; it joins the maximum (a sink far above the
    const float mm = fmaxf(m, p.sinks[h]);  // scores gives out ~0 and lse = the sink, as in the oracle)
    l = l * expf(m - mm) + expf(p.sinks[h] - mm);
    m = mm;
  }

  // pass 2: probabilities of a tile of keys, then each thread's output columns
  float acc[kMaxDv / kThreads] = {0.f, 0.f};
  for (int64_t k0 = 0; k0 < nkeys; k0 += kThreads) {
    const int64_t k = k0 + threadIdx.x;
    float pr = 0.f;
    const void* vb = nullptr;
    int64_t vo = 0;
    if (k < nkeys) {
      bool ok;
      const float s = score(k, &ok);
      if (ok) {
        pr = expf(s - m) / l * (k < r.plen ? p.v_scale : 1.f);
        key_row(p, r, k, hk, true, &vb, &vo);
      }
    }
    __syncthreads();  // the previous tile's probabilities are consumed
    prob[threadIdx.x] = pr;
    vbase_s[threadIdx.x] = vb;
    voff_s[threadIdx.x] = vo;
    __syncthreads();
    const int tile = static_cast<int>(nkeys - k0 < kThreads ? nkeys - k0 : kThreads);
    for (int kk = 0; kk < tile; ++kk) {
      if (prob[kk] == 0.f) continue;
      const bool fp8 = p.kv_fp8 && k0 + kk < r.plen;
#pragma unroll
      for (int c = 0; c < kMaxDv / kThreads; ++c) {
        const int d = threadIdx.x + c * kThreads;
        if (d < p.dv) acc[c] += prob[kk] * ld_kv<T>(vbase_s[kk], voff_s[kk] + d, fp8);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kMaxDv / kThreads; ++c) {
    const int d = threadIdx.x + c * kThreads;
    if (d >= p.dv) continue;
    const int64_t o = tok * p.o_st + h * p.o_sh + d;
    if (p.out_fp32) static_cast<float*>(p.out)[o] = acc[c];
    else if constexpr (std::is_same<T, __nv_bfloat16>::value) static_cast<T*>(p.out)[o] = __float2bfloat16_rn(acc[c]);
    else static_cast<T*>(p.out)[o] = __float2half_rn(acc[c]);
  }
  if (p.lse != nullptr && threadIdx.x == 0) p.lse[tok * p.lse_st + h] = l > 0.f ? m + logf(l) : -INFINITY;
}

}  // namespace

fv_status cuda_run_naive(const fv_args& a, void* stream) {
  const fv_problem& pb = a.problem;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return fail(FV_ERR_NO_DEVICE, "fv_run: no CUDA device to launch on");
  }
  NaiveParams p{};
  p.q = a.q; p.q_st = a.q_stride_token; p.q_sh = a.q_stride_head;
  p.k_draft = a.k_draft; p.kd_st = a.k_draft_stride_token; p.kd_sh = a.k_draft_stride_head;
  p.v_draft = a.v_draft; p.vd_st = a.v_draft_stride_token; p.vd_sh = a.v_draft_stride_head;
  p.k_pool = a.k_pool; p.kp_ss = a.k_pool_stride_slot; p.kp_sh = a.k_pool_stride_head;
  p.v_pool = a.v_pool; p.vp_ss = a.v_pool_stride_slot; p.vp_sh = a.v_pool_stride_head;
  p.out = a.out; p.o_st = a.out_stride_token; p.o_sh = a.out_stride_head;
  p.lse = a.lse; p.lse_st = a.lse_stride_token;
  p.qo_indptr = a.qo_indptr.data; p.qo64 = a.qo_indptr.dtype == FV_INDEX_INT64;
  p.kv_indptr = a.kv_indptr.data; p.kvp64 = a.kv_indptr.dtype == FV_INDEX_INT64;
  p.kv_indices = a.kv_indices.data; p.kvi64 = a.kv_indices.dtype == FV_INDEX_INT64;
  p.mask_indptr = a.mask_indptr.data; p.mi64 = a.mask_indptr.dtype == FV_INDEX_INT64;
  p.page_table = a.page_table; p.pt_stride = a.page_table_stride;
  p.paged = pb.kv_addressing == FV_KV_PAGE_TABLE; p.page_size = pb.page_size;
  p.custom_mask = a.custom_mask; p.mask_bits = a.mask_bits; p.bits_stride = a.mask_bits_stride;
  p.parents = a.parents; p.mask_kind = pb.mask_kind;
  p.max_draft = pb.max_draft; p.hq = pb.num_q_heads; p.group = pb.num_q_heads / pb.num_kv_heads;
  p.dqk = pb.head_dim_qk; p.dv = pb.head_dim_v;
  p.out_fp32 = out_dtype_of(pb) == FV_DTYPE_FP32;
  p.sm_scale = a.sm_scale;
  p.logit_cap = a.logit_cap;
  p.k_scale = kv_scale_of(a.k_scale);
  p.v_scale = kv_scale_of(a.v_scale);
  p.window = effective_window(a);
  p.xai_len = a.xai_temperature_len;
  p.sinks = a.sinks;
  p.woff = effective_window_offsets(a);
  p.kv_fp8 = kv_dtype_of(pb) == FV_DTYPE_FP8_E4M3;

  const dim3 grid(static_cast<unsigned>(int64_t(pb.batch_size) * pb.max_draft), static_cast<unsigned>(pb.num_q_heads));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (pb.dtype == FV_DTYPE_BF16) naive_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(p);
  else naive_kernel<__half><<<grid, kThreads, 0, s>>>(p);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return fail(FV_ERR_CUDA, "fv_run: naive kernel launch: %s", cudaGetErrorString(err));
  return FV_OK;
}

}  // namespace fv
