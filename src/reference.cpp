// The float64 oracle: dense, simple loops over every (request, draft token, q head), the whole prefix
// and the visible draft tokens. It shares no code with the kernels; its inputs were validated.
#include <atomic>
#include <cmath>
#include <limits>
#include <new>
#include <vector>

#include "common.h"
#include "round16.h"

namespace fv {
namespace {

double load_elem(const void* base, int dtype, int64_t offset) {
  switch (dtype) {
    case FV_DTYPE_BF16: return decode16(static_cast<const uint16_t*>(base)[offset], true);
    case FV_DTYPE_FP16: return decode16(static_cast<const uint16_t*>(base)[offset], false);
    case FV_DTYPE_FP32: return static_cast<const float*>(base)[offset];
    case FV_DTYPE_FP8_E4M3: {
      // OCP e4m3: bias 7, no infinities, S.1111.111 is NaN; subnormals m * 2^-9
      const uint8_t b = static_cast<const uint8_t*>(base)[offset];
      const int sign = b >> 7, exp = (b >> 3) & 0xf, mant = b & 7;
      double v;
      if (exp == 15 && mant == 7) v = std::numeric_limits<double>::quiet_NaN();
      else if (exp == 0) v = std::ldexp(double(mant), -9);
      else v = std::ldexp(double(mant | 8), exp - 10);
      return sign ? -v : v;
    }
    default: return static_cast<const double*>(base)[offset];
  }
}

void store_elem(void* base, int dtype, int64_t offset, double v) {
  switch (dtype) {
    case FV_DTYPE_BF16: static_cast<uint16_t*>(base)[offset] = round_to_bf16(v); break;
    case FV_DTYPE_FP16: static_cast<uint16_t*>(base)[offset] = round_to_fp16(v); break;
    case FV_DTYPE_FP32: static_cast<float*>(base)[offset] = static_cast<float>(v); break;
    default: static_cast<double*>(base)[offset] = v; break;
  }
}

bool draft_visible(const fv_args& a, int b, int64_t qo0, int64_t plen, int64_t n, int64_t i, int64_t j) {
  const fv_problem& p = a.problem;
  switch (p.mask_kind) {
    case FV_MASK_BYTES: {
      const int64_t base = index_at(a.mask_indptr, b);
      const int64_t off = window_offset(a, b);
      return a.custom_mask[base + i * (off + plen + n) + off + plen + j] != 0;
    }
    case FV_MASK_BITS: {
      const uint32_t word = a.mask_bits[(qo0 + i) * a.mask_bits_stride + j / 32];
      return (word >> (j % 32)) & 1u;
    }
    case FV_MASK_PARENTS: {
      for (int64_t x = i; x >= 0; x = a.parents[qo0 + x])
        if (x == j) return true;
      return false;
    }
    default: return j <= i;  // FV_MASK_CAUSAL
  }
}

}  // namespace

fv_status run_reference(const fv_args& a) {
  const fv_problem& p = a.problem;
  const int B = p.batch_size, hq = p.num_q_heads, group = p.num_q_heads / p.num_kv_heads;
  const int dqk = p.head_dim_qk, dv = p.head_dim_v, dt = p.dtype, odt = out_dtype_of(p), kdt = kv_dtype_of(p);

  // one task per (request, draft token): rows of all requests flattened
  std::vector<std::pair<int, int64_t>> tasks;
  for (int b = 0; b < B; ++b) {
    const int64_t n = index_at(a.qo_indptr, b + 1) - index_at(a.qo_indptr, b);
    for (int64_t i = 0; i < n; ++i) tasks.emplace_back(b, i);
  }

  std::atomic<bool> out_of_memory{false};
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < static_cast<int64_t>(tasks.size()); ++task) {
    if (out_of_memory.load(std::memory_order_relaxed)) continue;
    // (an exception may not leave an OpenMP region: it would terminate the process instead of reaching
    // fv_run's guard, which reports it)
    try {
      const int b = tasks[task].first;
      const int64_t i = tasks[task].second;
      const int64_t qo0 = index_at(a.qo_indptr, b), n = index_at(a.qo_indptr, b + 1) - qo0;
      const int64_t kv0 = index_at(a.kv_indptr, b), plen = index_at(a.kv_indptr, b + 1) - kv0;
      const int64_t t = qo0 + i;

      // SGLang's modifiers: the token's position, its sliding window, its temperature
      const int64_t qpos = plen + i;
      const int64_t W = a.sliding_window;
      const double xai = a.xai_temperature_len > 0 && qpos > a.xai_temperature_len
                             ? std::log2(double(qpos)) / std::log2(double(a.xai_temperature_len))
                             : 1.0;
      const double kscale = kv_scale_of(a.k_scale), vscale = kv_scale_of(a.v_scale);

      // the keys this token sees: the prefix slots in its window, then the visible drafts (as -1 - j)
      std::vector<int64_t> keys;
      keys.reserve(plen + n);
      for (int64_t k = 0; k < plen; ++k) {
        if (W > 0 && qpos > k + W) continue;
        if (p.kv_addressing == FV_KV_TOKEN_SLOTS) {
          keys.push_back(index_at(a.kv_indices, kv0 + k));
        } else {
          const int64_t page = a.page_table[int64_t(b) * a.page_table_stride + k / p.page_size];
          keys.push_back(page * p.page_size + k % p.page_size);
        }
      }
      for (int64_t j = 0; j < n; ++j)
        if (draft_visible(a, b, qo0, plen, n, i, j) && !(W > 0 && i > j + W)) keys.push_back(-1 - j);

      std::vector<double> q(dqk), scores(keys.size()), acc(dv);
      for (int h = 0; h < hq; ++h) {
        const int hk = h / group;
        for (int d = 0; d < dqk; ++d) q[d] = load_elem(a.q, dt, t * a.q_stride_token + h * a.q_stride_head + d);
        double max_score = -std::numeric_limits<double>::infinity();
        // where key k's K (want_v = false) or V row starts: a pool slot, or a draft token (-1 - j)
        auto row = [&](int64_t key, bool want_v, int64_t* off) -> const void* {
          if (key >= 0) {
            *off = key * (want_v ? a.v_pool_stride_slot : a.k_pool_stride_slot) +
                   hk * (want_v ? a.v_pool_stride_head : a.k_pool_stride_head);
            return want_v ? a.v_pool : a.k_pool;
          }
          *off = (qo0 + (-1 - key)) * (want_v ? a.v_draft_stride_token : a.k_draft_stride_token) +
                 hk * (want_v ? a.v_draft_stride_head : a.k_draft_stride_head);
          return want_v ? a.v_draft : a.k_draft;
        };
        for (size_t k = 0; k < keys.size(); ++k) {
          int64_t off;
          const void* kbase = row(keys[k], false, &off);
          double s = 0;
          const int et = keys[k] >= 0 ? kdt : dt;  // pool rows in kv_dtype, draft rows in dtype
          for (int d = 0; d < dqk; ++d) s += q[d] * load_elem(kbase, et, off + d);
          s *= static_cast<double>(a.sm_scale) * (keys[k] >= 0 ? kscale : 1.0);
          if (a.logit_cap > 0) s = a.logit_cap * std::tanh(s / a.logit_cap);
          scores[k] = s * xai;
          if (scores[k] > max_score) max_score = scores[k];
        }
        // a sink is one more term of the denominator, with no value; it joins the maximum too, so that a sink far above
        // every score (by more than ~709) gives lse = the sink and out ~ 0 instead of an infinite denominator
        const bool sink = a.sinks != nullptr && !keys.empty();
        if (sink) max_score = std::max(max_score, static_cast<double>(a.sinks[h]));
        std::fill(acc.begin(), acc.end(), 0.0);
        double denom = 0;
        for (size_t k = 0; k < keys.size(); ++k) {
          const double w = std::exp(scores[k] - max_score);
          denom += w;
          int64_t off;
          const void* vbase = row(keys[k], true, &off);
          const double wv = w * (keys[k] >= 0 ? vscale : 1.0);
          const int et = keys[k] >= 0 ? kdt : dt;
          for (int d = 0; d < dv; ++d) acc[d] += wv * load_elem(vbase, et, off + d);
        }
        if (sink) denom += std::exp(static_cast<double>(a.sinks[h]) - max_score);
        // a row that sees no key at all (possible only with a user mask that hides the token itself
        // and an empty prefix) is defined as zeros with lse = -inf
        const int64_t obase = t * a.out_stride_token + h * a.out_stride_head;
        for (int d = 0; d < dv; ++d) store_elem(a.out, odt, obase + d, keys.empty() ? 0.0 : acc[d] / denom);
        if (a.lse != nullptr) {
          a.lse[t * a.lse_stride_token + h] =
              keys.empty() ? -std::numeric_limits<float>::infinity() : static_cast<float>(max_score + std::log(denom));
        }
      }
    } catch (const std::bad_alloc&) {
      out_of_memory.store(true, std::memory_order_relaxed);
    }
  }
  if (out_of_memory.load()) throw std::bad_alloc();
  return FV_OK;
}

}  // namespace fv
