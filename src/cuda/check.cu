// Index-checking mode (FV_FLAG_CHECK_INDICES or FLASHVERIFY_CHECK=1): before any kernel reads through
// them, one kernel checks on the device every length, slot index, page id and parent a verify call is
// about to follow (and the sinks, whose NaN or +inf the header calls invalid). If any is bad, the call stops
// with the CPU validator's message (the first bad entry, its request, position and value) instead of reading out
// of bounds.
//
// The check costs one kernel and one host synchronisation per call (it returns a status), so it is a
// debugging / hardening mode: off by default, and refused under CUDA-graph capture.
#include <cuda_runtime.h>

#include <cinttypes>
#include <mutex>
#include <vector>

#include "common.h"
#include "cuda/launch.h"
#include "cuda/params.cuh"
#include "partition.h"

namespace fv {
namespace {

__device__ unsigned int g_bad_entries;  // per device; guarded by the host mutex below

constexpr int kCheckThreads = 256;
constexpr int kCheckSlices = 8;  // blocks per request (grid.y), for long prefixes

struct CheckParams {
  const void *qo, *kv, *idx, *mi;
  int qo64, kv64, idx64, mi64;
  const int32_t* page_table;
  int64_t pt_stride;
  int paged, page_size, mask_kind;
  const int32_t* parents;
  int64_t num_slots;
  int max_draft;
  const int32_t* woff;  // window_kv_offsets (byte mask) or null
  const float* sinks;   // [num_q_heads] or null: NaN and +inf are bad entries
  int num_q_heads;
  int batch;
};

__global__ void __launch_bounds__(kCheckThreads) check_kernel(const __grid_constant__ CheckParams c) {
  const int b = blockIdx.x;
  const int64_t q0 = load_index(c.qo, b, c.qo64), q1 = load_index(c.qo, b + 1, c.qo64);
  const int64_t k0 = load_index(c.kv, b, c.kv64), k1 = load_index(c.kv, b + 1, c.kv64);
  const int64_t n = q1 - q0, plen = k1 - k0;
  bool good = q0 >= 0 && k0 >= 0 && n >= 0 && n <= c.max_draft && plen >= 0;
  if (good && c.mask_kind == FV_MASK_BYTES) {
    const int64_t m0 = load_index(c.mi, b, c.mi64), m1 = load_index(c.mi, b + 1, c.mi64);
    const int64_t off = c.woff != nullptr ? c.woff[b] : 0;
    good = m0 >= 0 && off >= 0 && m1 - m0 == n * (off + plen + n);
  }
  if (good && c.paged) good = prefix_pages(plen, c.page_size) <= c.pt_stride;
  // the batch's tokens: below kMaxBatchTokens. A call over it is counted once and its prefix slots are not scanned
  // (2^40 of them would keep the kernel busy for minutes); the host then runs the checks that do not walk them
  const bool over = batch_tokens(load_index(c.qo, 0, c.qo64), load_index(c.qo, c.batch, c.qo64),
                                 load_index(c.kv, 0, c.kv64), load_index(c.kv, c.batch, c.kv64)) >= kMaxBatchTokens;
  if (over && b == 0 && blockIdx.y == 0 && threadIdx.x == 0) atomicAdd(&g_bad_entries, 1u);
  if (b == 0 && blockIdx.y == 0 && c.sinks != nullptr) {  // the sinks once (they do not depend on the request)
    unsigned bad_sinks = 0;
    for (int h = threadIdx.x; h < c.num_q_heads; h += kCheckThreads) bad_sinks += !sink_valid(c.sinks[h]);
    if (bad_sinks) atomicAdd(&g_bad_entries, bad_sinks);
  }
  if (!good) {  // the lengths themselves are bad: nothing below may be followed
    if (threadIdx.x == 0 && blockIdx.y == 0) atomicAdd(&g_bad_entries, 1u);
    return;
  }
  unsigned bad = 0;
  const int64_t step = int64_t(kCheckThreads) * gridDim.y;
  for (int64_t t = int64_t(blockIdx.y) * kCheckThreads + threadIdx.x; !over && t < plen; t += step) {
    if (!c.paged) {
      const int64_t slot = load_index(c.idx, k0 + t, c.idx64);
      bad += slot < 0 || slot >= c.num_slots;
    } else if (t % c.page_size == 0) {
      const int64_t page = c.page_table[int64_t(b) * c.pt_stride + t / c.page_size];
      const int64_t used = plen - t < c.page_size ? plen - t : int64_t(c.page_size);
      const int64_t last = page * c.page_size + used - 1;  // the last slot this page serves
      bad += page < 0 || last >= c.num_slots;
    }
  }
  if (c.mask_kind == FV_MASK_PARENTS && blockIdx.y == 0) {
    for (int64_t i = threadIdx.x; i < n; i += kCheckThreads) {
      const int64_t par = c.parents[q0 + i];
      if (par < -1 || par >= n) { ++bad; continue; }
      // a tree reaches its root in at most n steps; out-of-range parents were counted above
      int64_t j = i, steps = 0;
      while (j >= 0 && steps <= n) {
        j = c.parents[q0 + j];
        ++steps;
        if (j < -1 || j >= n) break;
      }
      bad += j >= 0;
    }
  }
  if (bad) atomicAdd(&g_bad_entries, bad);
}

template <class T>
cudaError_t copy_to_host(std::vector<T>* dst, const void* src, int64_t count) {
  dst->assign(static_cast<size_t>(count > 0 ? count : 0), T{});
  if (count <= 0 || src == nullptr) return cudaSuccess;
  return cudaMemcpy(dst->data(), src, sizeof(T) * static_cast<size_t>(count), cudaMemcpyDeviceToHost);
}

// Device index array -> host copy of its first `count` entries in its own width.
struct HostIndex {
  std::vector<int32_t> i32;
  std::vector<int64_t> i64;
  fv_index view(const fv_index& ix) const {
    fv_index v = ix;
    v.data = ix.dtype == FV_INDEX_INT64 ? static_cast<const void*>(i64.data()) : static_cast<const void*>(i32.data());
    return v;
  }
  cudaError_t load(const fv_index& ix, int64_t count) {
    return ix.dtype == FV_INDEX_INT64 ? copy_to_host(&i64, ix.data, count) : copy_to_host(&i32, ix.data, count);
  }
};

// The slow path, taken only when the kernel found something: copy the metadata to the host and let the
// CPU validator name the first bad entry exactly as the CPU path would.
fv_status explain_on_host(const fv_args& a, unsigned bad) {
  const fv_problem& p = a.problem;
  const int64_t B = p.batch_size;  // (int64: B + 1 overflows int at B = INT32_MAX)
  HostIndex qo, kv, mi, idx;
  std::vector<int32_t> pt, parents;
  fv_args h = a;
  cudaError_t err = qo.load(a.qo_indptr, B + 1);
  if (err == cudaSuccess) err = kv.load(a.kv_indptr, B + 1);
  if (err == cudaSuccess && p.mask_kind == FV_MASK_BYTES) err = mi.load(a.mask_indptr, B + 1);
  if (err != cudaSuccess) return fail(FV_ERR_CUDA, "fv_run: FLASHVERIFY_CHECK: reading the lengths: %s", cudaGetErrorString(err));
  h.qo_indptr = qo.view(a.qo_indptr);
  h.kv_indptr = kv.view(a.kv_indptr);
  if (p.mask_kind == FV_MASK_BYTES) h.mask_indptr = mi.view(a.mask_indptr);
  std::vector<int32_t> woff;
  if (err == cudaSuccess && effective_window_offsets(a) != nullptr) {
    err = copy_to_host(&woff, a.window_kv_offsets, B);
    h.window_kv_offsets = woff.data();
  }
  std::vector<float> sink_vals;
  if (err == cudaSuccess && a.sinks != nullptr) {
    err = copy_to_host(&sink_vals, a.sinks, p.num_q_heads);
    h.sinks = sink_vals.data();
  }
  if (err != cudaSuccess) return fail(FV_ERR_CUDA, "fv_run: FLASHVERIFY_CHECK: reading the offsets: %s", cudaGetErrorString(err));
  // lengths first: the arrays they index are copied only if they are sane
  bool lengths_ok = true;
  int64_t max_q = 0, max_kv = 0;
  for (int64_t b = 0; b <= B && lengths_ok; ++b) {
    const int64_t q = index_at(h.qo_indptr, b), k = index_at(h.kv_indptr, b);
    lengths_ok = q >= 0 && k >= 0 && (b == 0 || (q >= index_at(h.qo_indptr, b - 1) && k >= index_at(h.kv_indptr, b - 1)));
    max_q = q > max_q ? q : max_q;
    max_kv = k > max_kv ? k : max_kv;
  }
  // a call over the tokens limit: the prefix slots are neither copied nor walked (2^40 tokens would take the host
  // hours; the kernel skipped them too), so such a call gets the O(B + sum N) checks and then FV_ERR_UNSUPPORTED
  const int64_t tokens = lengths_ok ? batch_tokens(index_at(h.qo_indptr, 0), index_at(h.qo_indptr, B),
                                                   index_at(h.kv_indptr, 0), index_at(h.kv_indptr, B)) : 0;
  const bool walk_tokens = tokens < kMaxBatchTokens;
  if (lengths_ok) {
    if (walk_tokens) {  // (else the prefix slots stay on the device: the validator below does not read them)
      if (p.kv_addressing == FV_KV_TOKEN_SLOTS) {
        err = idx.load(a.kv_indices, max_kv);
        h.kv_indices = idx.view(a.kv_indices);
      } else {
        err = copy_to_host(&pt, a.page_table, B * a.page_table_stride);
        h.page_table = pt.data();
      }
    }
    if (err == cudaSuccess && p.mask_kind == FV_MASK_PARENTS) {
      err = copy_to_host(&parents, a.parents, max_q);
      h.parents = parents.data();
    }
    if (err != cudaSuccess) return fail(FV_ERR_CUDA, "fv_run: FLASHVERIFY_CHECK: reading the indices: %s", cudaGetErrorString(err));
  }
  const fv_status st = validate_device_data(h, "fv_run (FLASHVERIFY_CHECK)", walk_tokens);
  if (st != FV_OK) return st;
  // (the lengths passed the validator: non-negative and non-decreasing)
  if (!walk_tokens)
    return fail(FV_ERR_UNSUPPORTED, "fv_run (FLASHVERIFY_CHECK): the batch's prefix and draft tokens sum to %" PRId64
                " (qo_indptr[%" PRId64 "] - qo_indptr[0] + kv_indptr[%" PRId64 "] - kv_indptr[0]); the CUDA kernels "
                "take fewer than 2^30 a call (flashverify.h, kv_indptr)", tokens, B, B);
  return fail(FV_ERR_BAD_INDEX, "fv_run (FLASHVERIFY_CHECK): the device check counted %u bad entries that the host "
              "re-check could not name", bad);
}

}  // namespace

fv_status cuda_check_inputs(const fv_args& a, void* stream) {
  const fv_problem& p = a.problem;
  if (p.batch_size == 0) return FV_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  // a failed query counts as capture: on the legacy stream while another stream captures, the query fails
  // (cudaErrorStreamCaptureImplicit), and the synchronisation below would invalidate that capture
  const bool query_failed = cudaStreamIsCapturing(s, &capture) != cudaSuccess;
  if (query_failed) cudaGetLastError();
  if (query_failed || capture != cudaStreamCaptureStatusNone)
    return fail(FV_ERR_UNSUPPORTED,
                "fv_run: index checking (FLASHVERIFY_CHECK / FV_FLAG_CHECK_INDICES) reads its verdict on the host "
                "and cannot run under CUDA-graph capture; capture without it%s",
                query_failed ? " (the stream's capture status could not be read)" : "");
  CheckParams c{};
  c.qo = a.qo_indptr.data; c.qo64 = a.qo_indptr.dtype == FV_INDEX_INT64;
  c.kv = a.kv_indptr.data; c.kv64 = a.kv_indptr.dtype == FV_INDEX_INT64;
  c.idx = a.kv_indices.data; c.idx64 = a.kv_indices.dtype == FV_INDEX_INT64;
  c.mi = a.mask_indptr.data; c.mi64 = a.mask_indptr.dtype == FV_INDEX_INT64;
  c.page_table = a.page_table;
  c.pt_stride = a.page_table_stride;
  c.paged = p.kv_addressing == FV_KV_PAGE_TABLE;
  c.page_size = p.page_size;
  c.mask_kind = p.mask_kind;
  c.parents = a.parents;
  c.num_slots = a.num_slots;
  c.max_draft = p.max_draft;
  c.woff = effective_window_offsets(a);
  c.sinks = a.sinks;
  c.num_q_heads = p.num_q_heads;
  c.batch = p.batch_size;

  static std::mutex mu;  // one check at a time per process: the verdict lives in one device word
  std::lock_guard<std::mutex> lock(mu);
  const unsigned zero = 0;
  unsigned bad = 0;
  cudaError_t err = cudaMemcpyToSymbolAsync(g_bad_entries, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, s);
  if (err == cudaSuccess) {
    check_kernel<<<dim3(static_cast<unsigned>(p.batch_size), kCheckSlices), kCheckThreads, 0, s>>>(c);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpyFromSymbolAsync(&bad, g_bad_entries, sizeof bad, 0, cudaMemcpyDeviceToHost, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  if (err != cudaSuccess) return fail(FV_ERR_CUDA, "fv_run: FLASHVERIFY_CHECK: %s (%s)", cudaGetErrorString(err), cudaGetErrorName(err));
  return bad == 0 ? FV_OK : explain_on_host(a, bad);
}

}  // namespace fv
