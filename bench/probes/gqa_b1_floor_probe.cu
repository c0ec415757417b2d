// What does GQA 8/1 d128 N=8 P=32768 B=1 (bench "gqa8/1 d128 n8 p32k b1", target <= 15 us, 21.5 us at 9a36b46 on
// the H200) cost with no attention at all? The same bytes moved the same way, timed the way the bench times a graph
// (a 512 MB memset flushes L2, as the bench's, then events around one cudaGraphLaunch; median of 60):
//   empty       one empty kernel: the graph launch and event floor
//   empty+pdl   two empty kernels, the second a programmatic dependent launch (the verify + combine shape)
//   gather      G CTAs of 256 threads; CTA c reads kv_indptr (the request's length), loads its split's 32768 / G slot
//               indices (int32) into shared memory,
//               then every K and V row of its keys (256 bytes each, 16 threads a row) into shared memory with
//               cp.async, all in flight at once, and XORs them: the prefix's 16.8 MB read through the indices.
//               "bulk rows": the same rows by the bulk-copy (TMA) engine, one cp.async.bulk a 256-byte row, one
//               mbarrier for the CTA; "bulk span" (direct slots only): one bulk copy of the split's K span and one
//               of its V span, the read floor of these bytes. Each mode checks that the rows it reads back landed.
//   gather+merge  gather, and each CTA also stores a 64-row x 128-column fp32 partial (as a split's unnormalised
//               rows) and its 64 row sums; a programmatic dependent kernel (64 blocks of 1024 threads, one a row) waits
//               (griddepcontrol.wait) and sums the G partials of its row, 32 splits at a time: the split-KV
//               structure's floor
// Slots: a random permutation of 1..32768 (the bench's shuffled pool), 1..32768 in order, or "direct": 1..32768
// computed from the key with no slot-index load at all (the cost of the indices' round trip).
// Standalone (no flashverify code):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/floor bench/probes/gqa_b1_floor_probe.cu && /tmp/floor
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "probe_check.h"

constexpr int kKeys = 32768, kRowU4 = 16, kRows = 64, kCols = 128, kThreads = 256, kMaxKpc = 256;  // kpc <= 256: G >= 128

__global__ void empty_kernel(unsigned* sink) {
  if (threadIdx.x == 1023) *sink = 0;
}

__global__ void empty_dependent(unsigned* sink) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 1023) *sink = 0;
}

enum Copy { kCpAsync, kBulkRows, kBulkSpan };

template <bool kPartials, int kCopy>
__global__ void __launch_bounds__(kThreads) gather_kernel(const int* __restrict__ indptr, const int* __restrict__ idx, const uint4* __restrict__ kp,
                                                          const uint4* __restrict__ vp, float* __restrict__ part,
                                                          unsigned* sink, int kpc) {
  __shared__ int s_idx[kMaxKpc];
  __shared__ unsigned s_acc[kThreads];
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  // the split's keys from kv_indptr (the first of the three dependent round trips: lengths, slot indices, rows)
  const int base = __ldg(indptr), total = __ldg(indptr + 1) - base;
  const int k0 = blockIdx.x * kpc, nk = max(0, min(kpc, total - k0));  // G = 1056: the last CTAs have no keys
  // idx == nullptr: "direct", slot = key + 1 with no slot-index load (what that round trip costs)
  for (int i = threadIdx.x; i < nk; i += kThreads) s_idx[i] = idx ? __ldg(idx + base + k0 + i) : base + k0 + i + 1;
  __syncthreads();
  const int piece = threadIdx.x % kRowU4, sub = threadIdx.x / kRowU4;  // 16 keys a pass, 16 threads a row
  // every K and V row of the split's keys, 16 bytes a thread, into shared memory with cp.async (as the verify
  // kernels copy them): all of a CTA's loads are in flight at once, with no register waiting on any of them. (Loads
  // into registers, as first written, let ptxas fit the kernel in 32 registers by consuming each row before issuing
  // the next: ~2 rows in flight a thread, a latency-bound gather that would have overstated the floor.)
  // the rows' places in shared memory, kv 0 for K and 1 for V: [key][K, V][16 pieces], or for one span copy each
  // (kBulkSpan) [K, V][key][16 pieces]; every copy and the readback go through row_at
  extern __shared__ uint4 s_rows[];
  auto row_at = [&](int k, int kv) {
    return s_rows + (kCopy == kBulkSpan ? kv * nk + k : 2 * k + kv) * kRowU4;
  };
  auto piece_at = [&](int k, int kv) { return row_at(k, kv) + piece; };
  auto copy = [](uint4* dst, const uint4* src) {
    const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
  };
  if (kCopy == kCpAsync) {
    for (int k = sub; k < nk; k += 16) {
      const int64_t slot = s_idx[k];
      copy(piece_at(k, 0), kp + slot * kRowU4 + piece);
      copy(piece_at(k, 1), vp + slot * kRowU4 + piece);
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_all;" ::: "memory");
  } else {
    // the bulk-copy (TMA) engine instead of the threads' 16-byte copies: one mbarrier waits for every byte;
    // kBulkRows issues one 256-byte copy a K or V row (a gather through the slots), kBulkSpan one copy of the
    // split's K span and one of its V span (contiguous slots only: the read floor of these bytes)
    __shared__ alignas(8) unsigned long long s_bar;
    const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&s_bar));
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(nk * 2 * kRowU4 * 16)
                   : "memory");
    }
    __syncthreads();
    auto bulk = [&](uint4* dst, const uint4* src, int bytes) {
      const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d),
                   "l"(src), "r"(bytes), "r"(bar)
                   : "memory");
    };
    if (kCopy == kBulkRows) {
      for (int i = threadIdx.x; i < 2 * nk; i += kThreads) {  // a K row and a V row a key
        const int k = i >> 1, kv = i & 1;
        bulk(row_at(k, kv), (kv ? vp : kp) + int64_t(s_idx[k]) * kRowU4, kRowU4 * 16);
      }
    } else if (threadIdx.x < 2 && nk > 0) {  // kBulkSpan: thread 0 the K span, thread 1 the V span
      const int kv = threadIdx.x;
      bulk(row_at(0, kv), (kv ? vp : kp) + int64_t(s_idx[0]) * kRowU4, nk * kRowU4 * 16);
    }
    asm volatile(
        "{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra W;\n}" ::"r"(bar)
        : "memory");
  }
  unsigned acc = 0;  // the thread's own pieces, read back once they have landed
  bool bad = false;  // the pools hold 0x3c (K) and 0x3d (V) bytes: a copy not waited for shows up as sink[1]
  for (int k = sub; k < nk; k += 16) {
    const uint4 x = *piece_at(k, 0), y = *piece_at(k, 1);
    acc ^= x.x ^ x.y ^ x.z ^ x.w ^ y.x ^ y.y ^ y.z ^ y.w;
    bad |= (x.x & x.w) != 0x3c3c3c3cu || (y.x & y.w) != 0x3d3d3d3du;
  }
  if (bad) sink[1] = 1;
  if (nk <= 0) return;
  if (kPartials) {
    // the split's 64 x 128 fp32 rows (+ 64 sums): 33 KB a CTA, written with 16-byte stores
    float4* dst = reinterpret_cast<float4*>(part + int64_t(blockIdx.x) * (kRows * kCols + kRows));
    const float f = __uint_as_float((acc & 0x007fffffu) | 0x3f000000u);
    for (int i = threadIdx.x; i < kRows * kCols / 4; i += kThreads) dst[i] = make_float4(f, f, f, f);
    if (threadIdx.x < kRows) part[int64_t(blockIdx.x) * (kRows * kCols + kRows) + kRows * kCols + threadIdx.x] = 1.f;
  } else {
    s_acc[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned x = 0;
      for (int i = 0; i < kThreads; ++i) x ^= s_acc[i];
      if (x == 0x9e3779b9u) *sink = x;
    }
  }
}

// one block a row: 32 threads hold the row's 128 columns as float4s, 32 groups of them take every 32nd split, all of a
// thread's loads in flight (a loop over the splits in one thread would wait on ~G / 4 dependent L2 round trips, which
// no real combine does), then the groups' sums meet in shared memory (as a combine's merge)
constexpr int kMergeGroups = 32;  // 1024 threads: at G = 132 a thread has ~4 splits, all its loads in flight
__global__ void __launch_bounds__(32 * kMergeGroups) merge_kernel(const float* __restrict__ part, float* __restrict__ out,
                                                                  int splits) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  __shared__ float4 s_o[kMergeGroups][32];
  __shared__ float s_l[kMergeGroups][32];
  const int row = blockIdx.x, c4 = threadIdx.x % 32, grp = threadIdx.x / 32;
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  float l = 0;
#pragma unroll 8
  for (int s = grp; s < splits; s += kMergeGroups) {
    const float* p = part + int64_t(s) * (kRows * kCols + kRows);
    const float4 x = __ldcg(reinterpret_cast<const float4*>(p + row * kCols) + c4);
    o.x += x.x;
    o.y += x.y;
    o.z += x.z;
    o.w += x.w;
    l += __ldcg(p + kRows * kCols + row);
  }
  s_o[grp][c4] = o;
  s_l[grp][c4] = l;
  __syncthreads();
  if (grp == 0) {
    for (int g = 1; g < kMergeGroups; ++g) {
      o.x += s_o[g][c4].x;
      o.y += s_o[g][c4].y;
      o.z += s_o[g][c4].z;
      o.w += s_o[g][c4].w;
      l += s_l[g][c4];
    }
    const float r = 1.f / l;
    reinterpret_cast<float4*>(out + row * kCols)[c4] = make_float4(o.x * r, o.y * r, o.z * r, o.w * r);
  }
}

struct Bufs {
  int *indptr, *idx;
  uint4 *k, *v;
  float *part, *out;
  unsigned* sink;
  void* flush;
  size_t flush_bytes;
};

template <class F>
cudaGraphExec_t make_graph(cudaStream_t s, F launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  launch(s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphDestroy(g));
  return ge;
}

double median_us(cudaGraphExec_t ge, const Bufs& b, cudaStream_t s, int iters = 60) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
  std::vector<float> t;
  for (int i = 0; i < iters; ++i) {
    CK(cudaMemsetAsync(b.flush, i & 0xff, b.flush_bytes, s));
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.f);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// a programmatic dependent launch (the combine's): it may start before the previous kernel ends
template <class... P, class... A>
void launch_pdl(cudaStream_t s, void (*kern)(P...), dim3 grid, dim3 block, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, kern, static_cast<P>(args)...));
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("gqa_b1_floor_probe on %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
  Bufs b;
  const size_t pool = size_t(kKeys + 1) * kRowU4;
  CK(cudaMalloc(&b.idx, kKeys * sizeof(int)));
  CK(cudaMalloc(&b.indptr, 2 * sizeof(int)));
  const int indptr[2] = {0, kKeys};
  CK(cudaMemcpy(b.indptr, indptr, sizeof indptr, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&b.k, pool * sizeof(uint4)));
  CK(cudaMalloc(&b.v, pool * sizeof(uint4)));
  CK(cudaMemset(b.k, 0x3c, pool * sizeof(uint4)));
  CK(cudaMemset(b.v, 0x3d, pool * sizeof(uint4)));
  const int max_splits = 1056;
  CK(cudaMalloc(&b.part, size_t(max_splits) * (kRows * kCols + kRows) * sizeof(float)));
  CK(cudaMalloc(&b.out, kRows * kCols * sizeof(float)));
  CK(cudaMalloc(&b.sink, 64));
  CK(cudaMemset(b.sink, 0, 64));
  b.flush_bytes = size_t(512) << 20;
  CK(cudaMalloc(&b.flush, b.flush_bytes));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int max_smem = kMaxKpc * 2 * kRowU4 * sizeof(uint4);
  using Gather = void (*)(const int*, const int*, const uint4*, const uint4*, float*, unsigned*, int);
  const Gather plain[3] = {gather_kernel<false, kCpAsync>, gather_kernel<false, kBulkRows>, gather_kernel<false, kBulkSpan>};
  const Gather with_partials[3] = {gather_kernel<true, kCpAsync>, gather_kernel<true, kBulkRows>,
                                   gather_kernel<true, kBulkSpan>};
  const char* copy_names[3] = {"cp.async ", "bulk rows", "bulk span"};
  for (int c = 0; c < 3; ++c) {
    CK(cudaFuncSetAttribute(plain[c], cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
    CK(cudaFuncSetAttribute(with_partials[c], cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  }

  std::vector<int> shuffled(kKeys), ordered(kKeys);
  std::iota(ordered.begin(), ordered.end(), 1);
  shuffled = ordered;
  std::mt19937_64 rng(7);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);

  auto empty = make_graph(s, [&](cudaStream_t st) { empty_kernel<<<1, 32, 0, st>>>(b.sink); });
  auto empty2 = make_graph(s, [&](cudaStream_t st) {
    empty_kernel<<<1, 32, 0, st>>>(b.sink);
    launch_pdl(st, empty_dependent, dim3(1), dim3(32), b.sink);
  });
  std::printf("empty        %7.2f us\n", median_us(empty, b, s));
  std::printf("empty+pdl    %7.2f us\n", median_us(empty2, b, s));
  const double bytes = 2.0 * kKeys * 256;
  const char* names[3] = {"shuffled", "ordered ", "direct  "};
  for (int order = 0; order < 3; ++order) {
    if (order < 2)
      CK(cudaMemcpy(b.idx, order ? ordered.data() : shuffled.data(), kKeys * sizeof(int), cudaMemcpyHostToDevice));
    const int* idx = order < 2 ? b.idx : nullptr;
    for (int c = 0; c < (order < 2 ? 2 : 3); ++c) {  // a span copy needs contiguous slots: direct only
      for (int g : {132, 264, 528, 1056}) {
        const int kpc = (kKeys + g - 1) / g;
        if (kpc > kMaxKpc) {  // s_idx and the dynamic shared memory hold at most kMaxKpc keys a CTA
          std::printf("G=%d: %d keys a CTA, above %d\n", g, kpc, kMaxKpc);
          return 1;
        }
        const size_t smem = size_t(kpc) * 2 * kRowU4 * sizeof(uint4);  // 128 KB at G = 132
        auto ga = make_graph(s, [&](cudaStream_t st) {
          plain[c]<<<g, kThreads, smem, st>>>(b.indptr, idx, b.k, b.v, b.part, b.sink, kpc);
        });
        auto gm = make_graph(s, [&](cudaStream_t st) {
          with_partials[c]<<<g, kThreads, smem, st>>>(b.indptr, idx, b.k, b.v, b.part, b.sink, kpc);
          launch_pdl(st, merge_kernel, dim3(kRows), dim3(32 * kMergeGroups), static_cast<const float*>(b.part), b.out,
                     g);
        });
        const double t1 = median_us(ga, b, s), t2 = median_us(gm, b, s);
        std::printf("%s %s G=%4d  gather %7.2f us (%5.0f GB/s)   gather+merge %7.2f us\n", names[order], copy_names[c],
                    g, t1, bytes / t1 / 1e3, t2);
        CK(cudaGraphExecDestroy(ga));
        CK(cudaGraphExecDestroy(gm));
        unsigned bad = 0;
        CK(cudaMemcpy(&bad, b.sink + 1, sizeof bad, cudaMemcpyDeviceToHost));
        if (bad) {
          std::printf("FAIL: a CTA read its rows before they landed\n");
          return 1;
        }
      }
    }
  }
  CK(cudaGetLastError());
  return 0;
}
