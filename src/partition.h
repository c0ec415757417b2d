// The work-partition arithmetic shared by the device scheduler (schedule.cuh), the verify kernel
// (verify.cuh) and the CPU tests (tests/cpu/test_plan.cpp), so that the tests check the very code the
// GPU runs.
//
// Request b costs ceil((P_b + N_b) / bn) key steps plus a fixed `overhead` (0 when it has no draft
// tokens). The costs are laid end to end; cum[b] is the position where request b starts, and its key
// step k sits at position cum[b] + overhead + k. Partition p owns the positions pos with
// floor(pos * parts / total) == p, i.e. [ceil(p * total / parts), ceil((p + 1) * total / parts)).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FV_HD __host__ __device__ __forceinline__
#else
#define FV_HD inline
#endif

namespace fv {

// The CUDA path's limit on a call's tokens, the sum over the batch of P_b + N_b (flashverify.h, kv_indptr): the
// kernels count key positions in int32, and the device planner sums the requests' costs (request_cost: key steps plus
// the overhead) in int32, which this limit and the planner's bound on batch_size (plan.cpp) keep in range. The lengths
// are device data, so only check mode enforces this limit.
constexpr int64_t kMaxBatchTokens = int64_t(1) << 30;
// that sum from the two indptr arrays' ends (first entries non-negative), saturated at INT64_MAX; 0 where an array's
// last entry is below its first (the length checks name that entry)
FV_HD int64_t batch_tokens(int64_t qo_first, int64_t qo_last, int64_t kv_first, int64_t kv_last) {
  if (qo_first < 0 || kv_first < 0 || qo_last < qo_first || kv_last < kv_first) return 0;
  const int64_t n = qo_last - qo_first, k = kv_last - kv_first;
  return n > INT64_MAX - k ? INT64_MAX : n + k;
}

FV_HD int request_cost(int64_t num_draft, int64_t prefix_len, int block_n, int overhead) {
  return num_draft > 0 ? static_cast<int>((prefix_len + num_draft + block_n - 1) / block_n) + overhead : 0;
}

// With a sliding window of W keys, prefix keys below P - W are hidden from every draft token: the
// request's first key steps are skipped. Returns how many (0 without a window).
FV_HD int window_skip_steps(int64_t prefix_len, int window, int block_n) {
  if (window <= 0 || prefix_len <= window) return 0;
  return static_cast<int>((prefix_len - window) / block_n);
}

// Pages a prefix of plen tokens needs, ceil(plen / page_size), without the overflow of plen + page_size - 1 near
// INT64_MAX (the CPU validator and the device check both count them)
FV_HD int64_t prefix_pages(int64_t plen, int page_size) { return plen / page_size + (plen % page_size != 0); }

// Partitions actually used: at most `num_parts` (the grid), at most one per `min_part_cost` units of
// work, and at least 1. With parts <= total no partition between two steps of a request is empty.
FV_HD int effective_parts(int num_parts, int64_t total, int min_part_cost) {
  const int64_t by_cost = (total + min_part_cost - 1) / min_part_cost;
  int64_t parts = num_parts < by_cost ? num_parts : by_cost;
  return parts < 1 ? 1 : static_cast<int>(parts);
}

FV_HD int64_t partition_begin(int part, int parts, int64_t total) {
  return (int64_t(part) * total + parts - 1) / parts;
}

FV_HD int partition_of(int64_t pos, int parts, int64_t total) { return static_cast<int>(pos * parts / total); }

// Calls f(b, step_begin, step_end) for every request segment of partition `part`, in request order.
// cum has batch + 1 entries.
template <class F>
FV_HD void for_each_segment(int part, int parts, int64_t total, const int32_t* cum, int batch, int overhead, F&& f) {
  const int64_t lo = partition_begin(part, parts, total), hi = partition_begin(part + 1, parts, total);
  // first request whose cost range ends after lo
  int b_lo = 0, b_hi = batch - 1;
  while (b_lo < b_hi) {
    const int mid = (b_lo + b_hi) / 2;
    if (cum[mid + 1] > lo) b_hi = mid;
    else b_lo = mid + 1;
  }
  for (int b = b_lo; b < batch && cum[b] < hi; ++b) {
    const int cost = cum[b + 1] - cum[b];
    if (cost == 0) continue;
    const int64_t first = int64_t(cum[b]) + overhead;  // position of step 0
    const int64_t steps = cost - overhead;
    const int64_t k_begin = lo > first ? lo - first : 0;
    const int64_t k_end = hi - first < steps ? hi - first : steps;
    if (k_begin < k_end) f(b, static_cast<int>(k_begin), static_cast<int>(k_end));
  }
}

// The split layout of request b: its first partition and how many partitions share its steps.
FV_HD void request_splits(int32_t cum_b, int32_t cum_next, int overhead, int parts, int64_t total, int* first_part,
                          int* num_splits) {
  const int cost = cum_next - cum_b;
  if (cost == 0) {
    *first_part = 0;
    *num_splits = 0;
    return;
  }
  const int64_t first = int64_t(cum_b) + overhead, last = first + (cost - overhead) - 1;
  *first_part = partition_of(first, parts, total);
  *num_splits = partition_of(last, parts, total) - *first_part + 1;
}

}  // namespace fv
