// Argument validation. Every message names the argument and its value; each kind of misuse has its own
// status (flashverify.h). The CUDA path can only check what the host knows; the CPU path also reads the
// lengths, indices and masks.
#include <cfloat>
#include <cinttypes>
#include <cmath>
#include <vector>

#include "common.h"
#include "partition.h"

namespace fv {
namespace {

bool valid_index_dtype(int32_t d) { return d == FV_INDEX_INT32 || d == FV_INDEX_INT64; }

bool is_supported_head_dims(int dqk, int dv) {
  if (is_mla_dims(dqk, dv)) return true;
  return dqk == dv && (dqk == 64 || dqk == 128 || dqk == 256);
}

fv_status check_ptr(const void* ptr, const char* fn, const char* name) {
  if (ptr == nullptr) return fail(FV_ERR_NULL_POINTER, "%s: args->%s is NULL", fn, name);
  return FV_OK;
}

fv_status check_index(const fv_index& ix, const char* fn, const char* name) {
  if (ix.data == nullptr) return fail(FV_ERR_NULL_POINTER, "%s: args->%s.data is NULL", fn, name);
  if (!valid_index_dtype(ix.dtype))
    return fail(FV_ERR_INVALID_VALUE, "%s: args->%s.dtype (%d) is neither FV_INDEX_INT32 (0) nor FV_INDEX_INT64 (1)",
                fn, name, ix.dtype);
  return FV_OK;
}

// A [rows, heads, dim] view: strides non-negative, heads of one row and consecutive rows not overlapping.
fv_status check_view(const char* fn, const char* name, int64_t stride_row, int64_t stride_head, int heads, int dim) {
  if (stride_row < 0 || stride_head < 0)
    return fail(FV_ERR_BAD_STRIDE, "%s: args->%s strides (%" PRId64 ", %" PRId64 ") must not be negative", fn, name,
                stride_row, stride_head);
  if (heads > 1 && stride_head < dim)
    return fail(FV_ERR_BAD_STRIDE, "%s: args->%s_stride_head (%" PRId64 ") is less than the head dim (%d)", fn,
                name, stride_head, dim);
  // (an absurd head stride must not wrap the extent around and pass)
  int64_t row_extent;
  if (__builtin_mul_overflow(int64_t(heads - 1), stride_head, &row_extent) ||
      __builtin_add_overflow(row_extent, int64_t(dim), &row_extent))
    return fail(FV_ERR_BAD_STRIDE, "%s: args->%s_stride_head (%" PRId64 ") x %d heads overflows 64 bits", fn, name,
                stride_head, heads);
  if (stride_row < row_extent)
    return fail(FV_ERR_BAD_STRIDE, "%s: args->%s row stride (%" PRId64 ") is less than one row's extent (%" PRId64 ")",
                fn, name, stride_row, row_extent);
  return FV_OK;
}

// The fast kernel moves 16-byte vectors: base pointers 16-byte aligned, strides multiples of 8 elements.
// (the head stride only where the tensor has more than one head: with one, the kernels multiply it by 0, and the
// header constrains it only for H > 1)
fv_status check_vec_aligned(const char* fn, const char* name, const void* ptr, int64_t s1, int64_t s2, int heads) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
    return fail(FV_ERR_BAD_STRIDE, "%s: args->%s (%p) is not 16-byte aligned, as the fast kernel needs", fn, name,
                ptr);
  if (s1 % 8 != 0 || (heads > 1 && s2 % 8 != 0))
    return fail(FV_ERR_BAD_STRIDE,
                "%s: args->%s strides (%" PRId64 ", %" PRId64 ") must be multiples of 8 elements for the fast kernel",
                fn, name, s1, s2);
  return FV_OK;
}

#define FV_TRY(expr)                   \
  do {                                 \
    fv_status st_ = (expr);            \
    if (st_ != FV_OK) return st_;      \
  } while (0)

}  // namespace

const char* dtype_name(int dt) {
  switch (dt) {
    case FV_DTYPE_BF16: return "bf16";
    case FV_DTYPE_FP16: return "fp16";
    case FV_DTYPE_FP32: return "fp32";
    case FV_DTYPE_FP64: return "fp64";
    case FV_DTYPE_FP8_E4M3: return "fp8_e4m3";
    default: return "unknown";
  }
}

fv_status validate_problem(const fv_problem& p, const char* fn) {
  if (p.device != FV_DEVICE_CUDA && p.device != FV_DEVICE_CPU)
    return fail(FV_ERR_INVALID_VALUE, "%s: problem.device (%d) is neither FV_DEVICE_CUDA (0) nor FV_DEVICE_CPU (1)",
                fn, p.device);
  if (p.impl < FV_IMPL_AUTO || p.impl > FV_IMPL_ORACLE)
    return fail(FV_ERR_INVALID_VALUE, "%s: problem.impl (%d) is not an fv_impl", fn, p.impl);
  const bool cpu = p.device == FV_DEVICE_CPU;
  if (cpu && (p.impl == FV_IMPL_FAST || p.impl == FV_IMPL_NAIVE))
    return fail(FV_ERR_UNSUPPORTED, "%s: problem.impl (%d) runs on FV_DEVICE_CUDA only; the CPU has the oracle", fn,
                p.impl);
  if (!cpu && p.impl == FV_IMPL_ORACLE)
    return fail(FV_ERR_UNSUPPORTED, "%s: problem.impl FV_IMPL_ORACLE runs on FV_DEVICE_CPU only", fn);

  const bool dtype_ok = p.dtype == FV_DTYPE_BF16 || p.dtype == FV_DTYPE_FP16 || (cpu && p.dtype == FV_DTYPE_FP32);
  if (!dtype_ok)
    return fail(FV_ERR_UNSUPPORTED_DTYPE, "%s: problem.dtype (%d, %s) is not supported on %s (bf16, fp16%s)", fn,
                p.dtype, dtype_name(p.dtype), cpu ? "the CPU" : "CUDA", cpu ? ", fp32" : "");
  const int od = p.out_dtype;
  const bool out_ok = od == 0 || od == p.dtype || od == FV_DTYPE_FP32 || (cpu && od == FV_DTYPE_FP64);
  if (!out_ok)
    return fail(FV_ERR_UNSUPPORTED_DTYPE, "%s: problem.out_dtype (%d, %s) must be 0 (same as dtype), %s, fp32%s", fn,
                od, dtype_name(od), dtype_name(p.dtype), cpu ? " or fp64" : "");

  const int kd = p.kv_dtype;
  if (!(kd == 0 || kd == p.dtype || kd == FV_DTYPE_FP8_E4M3))
    return fail(FV_ERR_UNSUPPORTED_DTYPE, "%s: problem.kv_dtype (%d, %s) must be 0 (same as dtype), %s or fp8_e4m3 (%d)",
                fn, kd, dtype_name(kd), dtype_name(p.dtype), FV_DTYPE_FP8_E4M3);
  if (p.batch_size < 0) return fail(FV_ERR_BAD_LENGTH, "%s: problem.batch_size (%d) is negative", fn, p.batch_size);
  if (p.max_draft < 1 || p.max_draft > 65536)
    return fail(FV_ERR_BAD_LENGTH, "%s: problem.max_draft (%d) must be in 1..65536", fn, p.max_draft);
  if (p.num_q_heads < 1 || p.num_kv_heads < 1 || p.num_q_heads % p.num_kv_heads != 0)
    return fail(FV_ERR_HEAD_COUNT, "%s: problem.num_q_heads (%d) must be a positive multiple of num_kv_heads (%d)", fn,
                p.num_q_heads, p.num_kv_heads);
  // the query rows a call may hold, Hq x max_draft, counted in int32 by the planner and the kernels' row tiles
  if (int64_t(p.num_q_heads) * p.max_draft > (int64_t(1) << 24))
    return fail(FV_ERR_UNSUPPORTED, "%s: problem.num_q_heads x max_draft (%d x %d) is above 2^24 query rows", fn,
                p.num_q_heads, p.max_draft);
  if (!is_supported_head_dims(p.head_dim_qk, p.head_dim_v))
    return fail(FV_ERR_UNSUPPORTED_HEAD_DIM,
                "%s: problem.head_dim_qk/head_dim_v (%d, %d) is not supported: (576, 512) for MLA, or "
                "64, 128, 256 with equal K and V dims",
                fn, p.head_dim_qk, p.head_dim_v);
  if (p.mask_kind < FV_MASK_BYTES || p.mask_kind > FV_MASK_CAUSAL)
    return fail(FV_ERR_INVALID_VALUE, "%s: problem.mask_kind (%d) is not an fv_mask_kind", fn, p.mask_kind);
  if (p.kv_addressing != FV_KV_TOKEN_SLOTS && p.kv_addressing != FV_KV_PAGE_TABLE)
    return fail(FV_ERR_INVALID_VALUE, "%s: problem.kv_addressing (%d) is not an fv_kv_addressing", fn,
                p.kv_addressing);
  if (p.kv_addressing == FV_KV_PAGE_TABLE && p.page_size < 1)
    return fail(FV_ERR_INVALID_VALUE, "%s: problem.page_size (%d) must be at least 1", fn, p.page_size);
  if (p.num_kv_splits < 0 || p.num_kv_splits > 4096)
    return fail(FV_ERR_INVALID_VALUE, "%s: problem.num_kv_splits (%d) must be in 0..4096", fn, p.num_kv_splits);
  if (p.profile < FV_PROFILE_AUTO || p.profile > FV_PROFILE_LARGE_SMEM)
    return fail(FV_ERR_INVALID_VALUE, "%s: problem.profile (%d) is not an fv_profile", fn, p.profile);
  if ((p.flags & ~FV_FLAG_CHECK_INDICES) != 0)
    return fail(FV_ERR_INVALID_VALUE, "%s: problem.flags (0x%x) has bits other than FV_FLAG_CHECK_INDICES (0x%x)", fn,
                static_cast<unsigned>(p.flags), static_cast<unsigned>(FV_FLAG_CHECK_INDICES));
  return FV_OK;
}

fv_status validate_args(const fv_args& a, const char* fn) {
  const fv_problem& p = a.problem;
  FV_TRY(validate_problem(p, fn));
  FV_TRY(check_ptr(a.q, fn, "q"));
  FV_TRY(check_ptr(a.out, fn, "out"));
  FV_TRY(check_ptr(a.k_draft, fn, "k_draft"));
  FV_TRY(check_ptr(a.v_draft, fn, "v_draft"));
  FV_TRY(check_ptr(a.k_pool, fn, "k_pool"));
  FV_TRY(check_ptr(a.v_pool, fn, "v_pool"));
  FV_TRY(check_index(a.qo_indptr, fn, "qo_indptr"));
  FV_TRY(check_index(a.kv_indptr, fn, "kv_indptr"));
  if (p.kv_addressing == FV_KV_TOKEN_SLOTS) {
    FV_TRY(check_index(a.kv_indices, fn, "kv_indices"));
  } else {
    FV_TRY(check_ptr(a.page_table, fn, "page_table"));
    if (a.page_table_stride < 1)
      return fail(FV_ERR_BAD_STRIDE, "%s: args->page_table_stride (%" PRId64 ") must be at least 1", fn,
                  a.page_table_stride);
  }
  switch (p.mask_kind) {
    case FV_MASK_BYTES:
      FV_TRY(check_ptr(a.custom_mask, fn, "custom_mask"));
      FV_TRY(check_index(a.mask_indptr, fn, "mask_indptr"));
      break;
    case FV_MASK_BITS:
      FV_TRY(check_ptr(a.mask_bits, fn, "mask_bits"));
      if (a.mask_bits_stride < (p.max_draft + 31) / 32)
        return fail(FV_ERR_BAD_STRIDE, "%s: args->mask_bits_stride (%" PRId64 ") is less than ceil(max_draft / 32) = %d",
                    fn, a.mask_bits_stride, (p.max_draft + 31) / 32);
      break;
    case FV_MASK_PARENTS: FV_TRY(check_ptr(a.parents, fn, "parents")); break;
    default: break;
  }
  if (a.num_slots < 1)
    return fail(FV_ERR_BAD_LENGTH, "%s: args->num_slots (%" PRId64 ") must be at least 1", fn, a.num_slots);
  if (!std::isfinite(a.sm_scale))
    return fail(FV_ERR_INVALID_VALUE, "%s: args->sm_scale (%g) is not finite", fn, static_cast<double>(a.sm_scale));
  if (!std::isfinite(a.logit_cap) || a.logit_cap < 0)
    return fail(FV_ERR_INVALID_VALUE, "%s: args->logit_cap (%g) must be finite and >= 0 (0 = off)", fn,
                static_cast<double>(a.logit_cap));
  if (a.xai_temperature_len == 1)
    return fail(FV_ERR_INVALID_VALUE, "%s: args->xai_temperature_len (1) must be >= 2 (log2(L) divides) or <= 0 (off)",
                fn);
  if (!std::isfinite(a.k_scale) || !std::isfinite(a.v_scale))
    return fail(FV_ERR_INVALID_VALUE, "%s: args->k_scale / v_scale (%g, %g) must be finite (0 = 1)", fn,
                static_cast<double>(a.k_scale), static_cast<double>(a.v_scale));
  {
    // the GPU kernels fold the score factors into one float each: sm_scale log2(e) (draft keys) and sm_scale k_scale
    // log2(e) (prefix keys); a product past FLT_MAX would make every score infinite there
    const double sm = std::fabs(static_cast<double>(a.sm_scale)) * 1.4426950408889634;
    const double prefix = sm * std::fabs(static_cast<double>(kv_scale_of(a.k_scale)));
    if (sm > FLT_MAX || prefix > FLT_MAX)
      return fail(FV_ERR_INVALID_VALUE,
                  "%s: args->sm_scale x k_scale x log2(e) (%g) overflows float (sm_scale %g, k_scale %g)", fn,
                  std::max(sm, prefix), static_cast<double>(a.sm_scale), static_cast<double>(a.k_scale));
  }
  if (a.window_kv_offsets != nullptr && p.mask_kind != FV_MASK_BYTES)
    return fail(FV_ERR_UNSUPPORTED, "%s: args->window_kv_offsets applies to the byte mask (FV_MASK_BYTES) only; "
                "problem.mask_kind is %d", fn, p.mask_kind);

  const int hq = p.num_q_heads, hkv = p.num_kv_heads, dqk = p.head_dim_qk, dv = p.head_dim_v;
  FV_TRY(check_view(fn, "q", a.q_stride_token, a.q_stride_head, hq, dqk));
  FV_TRY(check_view(fn, "out", a.out_stride_token, a.out_stride_head, hq, dv));
  FV_TRY(check_view(fn, "k_draft", a.k_draft_stride_token, a.k_draft_stride_head, hkv, dqk));
  FV_TRY(check_view(fn, "v_draft", a.v_draft_stride_token, a.v_draft_stride_head, hkv, dv));
  FV_TRY(check_view(fn, "k_pool", a.k_pool_stride_slot, a.k_pool_stride_head, hkv, dqk));
  FV_TRY(check_view(fn, "v_pool", a.v_pool_stride_slot, a.v_pool_stride_head, hkv, dv));
  if (a.lse != nullptr && a.lse_stride_token < hq)
    return fail(FV_ERR_BAD_STRIDE, "%s: args->lse_stride_token (%" PRId64 ") is less than num_q_heads (%d)", fn,
                a.lse_stride_token, hq);

  const bool fast = p.device == FV_DEVICE_CUDA && (p.impl == FV_IMPL_AUTO || p.impl == FV_IMPL_FAST);
  if (fast) {
    FV_TRY(check_vec_aligned(fn, "q", a.q, a.q_stride_token, a.q_stride_head, hq));
    FV_TRY(check_vec_aligned(fn, "k_draft", a.k_draft, a.k_draft_stride_token, a.k_draft_stride_head, hkv));
    FV_TRY(check_vec_aligned(fn, "v_draft", a.v_draft, a.v_draft_stride_token, a.v_draft_stride_head, hkv));
    FV_TRY(check_vec_aligned(fn, "k_pool", a.k_pool, a.k_pool_stride_slot, a.k_pool_stride_head, hkv));
    FV_TRY(check_vec_aligned(fn, "v_pool", a.v_pool, a.v_pool_stride_slot, a.v_pool_stride_head, hkv));
    // outputs are written two elements at a time
    const int ob = dtype_bytes(out_dtype_of(p));
    if (reinterpret_cast<uintptr_t>(a.out) % (2 * ob) != 0 || a.out_stride_token % 2 != 0 ||
        (hq > 1 && a.out_stride_head % 2 != 0))
      return fail(FV_ERR_BAD_STRIDE, "%s: args->out (%p, strides %" PRId64 ", %" PRId64
                  ") must be aligned to two elements for the fast kernel", fn, a.out, a.out_stride_token,
                  a.out_stride_head);
    if (is_mla_dims(dqk, dv)) {
      // the MLA tile serves V from the K rows it already holds
      if (a.v_pool != a.k_pool || a.v_pool_stride_slot != a.k_pool_stride_slot ||
          a.v_pool_stride_head != a.k_pool_stride_head)
        return fail(FV_ERR_UNSUPPORTED,
                    "%s: the fast MLA kernel needs args->v_pool to be the first %d columns of k_pool (same pointer "
                    "and strides); got v_pool %p vs k_pool %p",
                    fn, dv, a.v_pool, a.k_pool);
      if (a.v_draft != a.k_draft || a.v_draft_stride_token != a.k_draft_stride_token ||
          a.v_draft_stride_head != a.k_draft_stride_head)
        return fail(FV_ERR_UNSUPPORTED,
                    "%s: the fast MLA kernel needs args->v_draft to be the first %d columns of k_draft (same "
                    "pointer and strides); got v_draft %p vs k_draft %p",
                    fn, dv, a.v_draft, a.k_draft);
    }
  }
  return FV_OK;
}

fv_status validate_device_data(const fv_args& a, const char* fn, bool walk_tokens) {
  const fv_problem& p = a.problem;
  const int B = p.batch_size;
  for (int64_t b = 0; b <= B; ++b) {  // (int64: b reaches B + 1, which overflows int at B = INT32_MAX)
    const int64_t qo = index_at(a.qo_indptr, b), kv = index_at(a.kv_indptr, b);
    if (qo < 0) return fail(FV_ERR_BAD_LENGTH, "%s: qo_indptr[%" PRId64 "] (%" PRId64 ") is negative", fn, b, qo);
    if (kv < 0) return fail(FV_ERR_BAD_LENGTH, "%s: kv_indptr[%" PRId64 "] (%" PRId64 ") is negative", fn, b, kv);
    if (b == 0) continue;
    const int64_t n = qo - index_at(a.qo_indptr, b - 1), plen = kv - index_at(a.kv_indptr, b - 1);
    if (n < 0)
      return fail(FV_ERR_INCONSISTENT_LENGTHS, "%s: qo_indptr decreases at request %" PRId64 " (%" PRId64 " -> %" PRId64
                  ")", fn, b - 1, index_at(a.qo_indptr, b - 1), qo);
    if (n > p.max_draft)
      return fail(FV_ERR_INCONSISTENT_LENGTHS, "%s: request %" PRId64 " has %" PRId64
                  " draft tokens, more than max_draft (%d)", fn, b - 1, n, p.max_draft);
    if (plen < 0)
      return fail(FV_ERR_INCONSISTENT_LENGTHS, "%s: kv_indptr decreases at request %" PRId64 " (%" PRId64 " -> %" PRId64
                  ")", fn, b - 1, index_at(a.kv_indptr, b - 1), kv);
  }
  if (a.sinks != nullptr)
    for (int h = 0; h < p.num_q_heads; ++h)
      if (!sink_valid(a.sinks[h]))
        return fail(FV_ERR_INVALID_VALUE, "%s: sinks[%d] (%g) must be a number at most %g (FLT_MAX / log2(e))", fn,
                    h, static_cast<double>(a.sinks[h]), static_cast<double>(kMaxSink));
  for (int b = 0; b < B; ++b) {
    const int64_t qo0 = index_at(a.qo_indptr, b), n = index_at(a.qo_indptr, b + 1) - qo0;
    const int64_t kv0 = index_at(a.kv_indptr, b), plen = index_at(a.kv_indptr, b + 1) - kv0;
    // (page tables only: with token slots page_size is ignored and may be 0)
    const int64_t pages = p.kv_addressing == FV_KV_PAGE_TABLE ? prefix_pages(plen, p.page_size) : 0;
    if (p.kv_addressing == FV_KV_PAGE_TABLE && pages > a.page_table_stride)
      return fail(FV_ERR_BAD_INDEX, "%s: request %d's prefix (%" PRId64 " tokens) needs %" PRId64
                  " pages of %d, more than a page_table row holds (page_table_stride %" PRId64 ")", fn, b, plen,
                  pages, p.page_size, a.page_table_stride);
    for (int64_t t = 0; walk_tokens && t < plen; ++t) {
      int64_t slot;
      if (p.kv_addressing == FV_KV_TOKEN_SLOTS) {
        slot = index_at(a.kv_indices, kv0 + t);
        if (slot < 0 || slot >= a.num_slots)
          return fail(FV_ERR_BAD_INDEX, "%s: kv_indices[%" PRId64 "] (request %d, prefix token %" PRId64 ") = %" PRId64
                      " is outside the pool's %" PRId64 " slots", fn, kv0 + t, b, t, slot, a.num_slots);
      } else {
        const int64_t page = a.page_table[int64_t(b) * a.page_table_stride + t / p.page_size];
        slot = page * p.page_size + t % p.page_size;
        if (page < 0 || slot >= a.num_slots)
          return fail(FV_ERR_BAD_INDEX, "%s: page_table[%d, %" PRId64 "] = %" PRId64
                      " puts prefix token %" PRId64 " at slot %" PRId64 ", outside the pool's %" PRId64 " slots",
                      fn, b, t / p.page_size, page, t, slot, a.num_slots);
      }
    }
    if (p.mask_kind == FV_MASK_BYTES) {
      const int64_t off = window_offset(a, b);
      if (off < 0)
        return fail(FV_ERR_BAD_LENGTH, "%s: window_kv_offsets[%d] (%" PRId64 ") is negative", fn, b, off);
      const int64_t m0 = index_at(a.mask_indptr, b), m1 = index_at(a.mask_indptr, b + 1);
      if (m0 < 0 || m1 - m0 != n * (off + plen + n))
        return fail(FV_ERR_MASK_INDPTR, "%s: mask_indptr[%d..%d] = (%" PRId64 ", %" PRId64 ") spans %" PRId64
                    " bytes; request %d needs N*(off+P+N) = %" PRId64 "*(%" PRId64 "+%" PRId64 "+%" PRId64 ") = %" PRId64,
                    fn, b, b + 1, m0, m1, m1 - m0, b, n, off, plen, n, n * (off + plen + n));
    }
    if (p.mask_kind == FV_MASK_PARENTS) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t par = a.parents[qo0 + i];
        if (par < -1 || par >= n)
          return fail(FV_ERR_BAD_INDEX, "%s: parents[%" PRId64 "] (request %d, draft %" PRId64 ") = %" PRId64
                      " is outside -1..%" PRId64, fn, qo0 + i, b, i, par, n - 1);
      }
      for (int64_t i = 0; i < n; ++i) {
        // walk to the root: a tree reaches it in at most n steps
        int64_t j = i, steps = 0;
        while (j >= 0 && steps <= n) { j = a.parents[qo0 + j]; ++steps; }
        if (j >= 0)
          return fail(FV_ERR_BAD_MASK, "%s: parents of request %d have a cycle through draft %" PRId64, fn, b, i);
      }
    }
  }
  return FV_OK;
}

}  // namespace fv
