// Can TMA gather the MLA kernel's K rows (bench/NOTES.md v41 plan: the loads cost the 16-bit kernel ~19% at N=64 B=16)?
// Standalone (sm_90a, no flashverify code):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/tma_probe bench/probes/tma_row_gather_probe.cu && /tmp/tma_probe
// 1. Placement: a 2D tensor map over a pool of 576-column 16-bit rows (SWIZZLE_128B, box 64 columns x 1 row); one box a
//    (row, 64-column tile) lands at tile + 128 row of 1024-aligned 8 KB tiles. Checked against the kernel's SW128 layout
//    (chunk j of row r at 16 (j ^ (r % 8)): verify_wg.cuh's sw128_offset) and, to tell the failure apart, against the
//    unswizzled order.
// 2. The load pipeline alone: 128 CTAs (16 a row group, as N=64 B=16's 16 row tiles share their rows; 8 groups of
//    different rows), each streaming 64-row steps (73,728 bytes) of random slots through two stages: step k + 1 is issued
//    into the other stage, then step k waited for. (a) 16-byte cp.async, 256 threads x 18 (VerifyWg's mapping), wait_group
//    + __syncthreads; (b) TMA boxes, 256 threads x 2-4 (thread t: tile t % 8 of rows t / 8 and t / 8 + 32, and tile 8 for
//    t % 8 == 0), one mbarrier a stage with expect_tx; and with each step's rows one 64-slot page: (c) cp.async as (a),
//    (d) one 64 x 64 TMA box a tile (9 a step). Prints microseconds a step (median of 5 launches).
// H200, v41 (modes (a), (b) only; (c), (d) were added after the session's device time ran out and have not run):
// placement 0 of 36,864 values off the SW128 layout (32,256 off the unswizzled one): per-row boxes at 128-byte offsets of
// 1024-aligned tiles land as sw128_offset puts them; (a) 0.756 us a step, (b) 2.332 us a step: 576 boxes of 128 bytes a
// step are 3x slower than the 4,608 16-byte cp.async (~4 ns a box a multiprocessor), so TMA is no gather for random slots.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#define CK(x)                                                                       \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

constexpr int kCols = 576, kTiles = 9, kRows = 64, kTile = 8192, kStage = kTiles * kTile;  // 73,728 bytes
constexpr uint32_t kStepBytes = kRows * kCols * 2;

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma_row(uint32_t dst, const CUtensorMap* map, int col, int row, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void cp16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__host__ __device__ __forceinline__ uint32_t sw128(uint32_t r, uint32_t c) { return r * 128u + ((c ^ (r & 7u)) << 4); }

// 1. placement: one CTA, 64 rows (slots perm[r]) into 9 tiles; out = the tiles' bytes
__global__ void place_kernel(const __grid_constant__ CUtensorMap map, const int* perm, uint16_t* out) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  __shared__ __align__(8) uint64_t bar_s;
  const uint32_t base = smem_u32(smem), bar = smem_u32(&bar_s);
  const int t = threadIdx.x;
  if (t == 0) {
    mbar_init(bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (t == 0) mbar_expect_tx(bar, kStepBytes);
  for (int r = t / 8; r < kRows; r += 32)
    for (int c = t % 8; c < kTiles; c += 8) tma_row(base + c * kTile + r * 128, &map, 64 * c, perm[r], bar);
  mbar_wait(bar, 0);
  for (int i = t; i < kStage / 2; i += blockDim.x) out[i] = reinterpret_cast<const uint16_t*>(smem)[i];
}

// 2. the load pipeline: CTA b streams `steps` steps of group b / 16's rows
template <bool TMA, bool PAGE = false>
__global__ void stream_kernel(const __grid_constant__ CUtensorMap map, const uint16_t* pool, const int* slots, int steps,
                              int* sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  __shared__ __align__(8) uint64_t bar_s[2];
  const uint32_t base = smem_u32(smem);
  const int t = threadIdx.x, r0 = t / 8, c0 = t % 8;
  const int* my = slots + int64_t(blockIdx.x / 16) * steps * kRows;
  if (TMA) {
    if (t == 0) {
      mbar_init(smem_u32(&bar_s[0]), 1);
      mbar_init(smem_u32(&bar_s[1]), 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
  }
  auto issue = [&](int k) {
    const uint32_t st = base + (k & 1) * kStage;
    const int s0 = my[k * kRows + r0], s1 = my[k * kRows + r0 + 32];
    if (TMA && PAGE) {  // the step's 64 rows are one contiguous page: a 64 x 64 box a tile
      const uint32_t bar = smem_u32(&bar_s[k & 1]);
      if (t == 0) mbar_expect_tx(bar, kStepBytes);
      if (t < kTiles) tma_row(st + t * kTile, &map, 64 * t, my[k * kRows], bar);
    } else if (TMA) {
      const uint32_t bar = smem_u32(&bar_s[k & 1]);
      if (t == 0) mbar_expect_tx(bar, kStepBytes);
      tma_row(st + c0 * kTile + r0 * 128, &map, 64 * c0, s0, bar);
      tma_row(st + c0 * kTile + (r0 + 32) * 128, &map, 64 * c0, s1, bar);
      if (c0 == 0) {
        tma_row(st + 8 * kTile + r0 * 128, &map, 512, s0, bar);
        tma_row(st + 8 * kTile + (r0 + 32) * 128, &map, 512, s1, bar);
      }
    } else {
      for (int c = 0; c < kTiles; ++c) {
        cp16(st + c * kTile + sw128(r0, c0), pool + int64_t(s0) * kCols + 64 * c + 8 * c0);
        cp16(st + c * kTile + sw128(r0 + 32, c0), pool + int64_t(s1) * kCols + 64 * c + 8 * c0);
      }
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
  };
  int acc = 0;
  issue(0);
  for (int k = 0; k < steps; ++k) {
    __syncthreads();  // every thread is done with the stage step k + 1 refills (read below, step k - 1)
    if (k + 1 < steps) issue(k + 1);
    else if (!TMA) asm volatile("cp.async.commit_group;\n" ::: "memory");
    if (TMA) mbar_wait(smem_u32(&bar_s[k & 1]), (k >> 1) & 1);
    else {
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
      __syncthreads();
    }
    acc += smem[(k & 1) * kStage + (t * 97 + k) % kStage];  // touch the step
  }
  if (acc == 0x7fffffff) *sink = acc;
}

int main() {
  using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                                const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (fn == nullptr || q != cudaDriverEntryPointSuccess) {
    std::printf("cuTensorMapEncodeTiled: not found\n");
    return 1;
  }
  auto encode = reinterpret_cast<EncodeFn>(fn);
  const int slots = 1 << 17;  // 151 MB of rows
  std::vector<uint16_t> h(size_t(slots) * kCols);
  for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t((i / kCols) * 577u + (i % kCols));
  uint16_t* pool = nullptr;
  CK(cudaMalloc(&pool, h.size() * 2));
  CK(cudaMemcpy(pool, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  CUtensorMap map{};
  const cuuint64_t dims[2] = {kCols, cuuint64_t(slots)}, strides[1] = {kCols * 2};
  const cuuint32_t box[2] = {64, 1}, estr[2] = {1, 1};
  CUresult cr = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, pool, dims, strides, box, estr,
                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (cr != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled failed: %d\n", int(cr));
    return 1;
  }
  CUtensorMap map64{};
  const cuuint32_t box64[2] = {64, 64};
  cr = encode(&map64, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, pool, dims, strides, box64, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (cr != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled (64-row box) failed: %d\n", int(cr));
    return 1;
  }
  std::mt19937 rng(7);
  // 1. placement
  std::vector<int> perm(kRows);
  for (auto& x : perm) x = int(rng() % slots);
  int* dperm = nullptr;
  uint16_t* dout = nullptr;
  CK(cudaMalloc(&dperm, kRows * 4));
  CK(cudaMalloc(&dout, kStage));
  CK(cudaMemcpy(dperm, perm.data(), kRows * 4, cudaMemcpyHostToDevice));
  const int smem = 2 * kStage + 1024;
  CK(cudaFuncSetAttribute(place_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(stream_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(stream_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  place_kernel<<<1, 256, smem>>>(map, dperm, dout);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> got(kStage / 2);
  CK(cudaMemcpy(got.data(), dout, kStage, cudaMemcpyDeviceToHost));
  long bad_sw = 0, bad_plain = 0;
  for (int c = 0; c < kTiles; ++c)
    for (int r = 0; r < kRows; ++r)
      for (int j = 0; j < 8; ++j)
        for (int e = 0; e < 8; ++e) {
          const uint16_t want = uint16_t(uint32_t(perm[r]) * 577u + 64 * c + 8 * j + e);
          bad_sw += got[(c * kTile + sw128(r, j)) / 2 + e] != want;
          bad_plain += got[(c * kTile + r * 128 + 16 * j) / 2 + e] != want;
        }
  std::printf("placement: %ld of %d values differ from the SW128 layout (sw128_offset), %ld from the unswizzled one\n",
              bad_sw, kRows * kCols, bad_plain);
  // 2. the load pipeline
  const int ctas = 128, groups = ctas / 16, steps = 512;
  std::vector<int> hs(size_t(groups) * steps * kRows);
  for (auto& x : hs) x = int(rng() % slots);
  std::vector<int> hp(hs.size());  // pages: a step's rows are 64 consecutive slots from a random multiple of 64
  for (size_t i = 0; i < hp.size(); i += kRows) {
    const int first = int(rng() % (slots / 64)) * 64;
    for (int r = 0; r < kRows; ++r) hp[i + r] = first + r;
  }
  int *ds = nullptr, *dp = nullptr, *sink = nullptr;
  CK(cudaMalloc(&ds, hs.size() * 4));
  CK(cudaMalloc(&dp, hp.size() * 4));
  CK(cudaMemcpy(dp, hp.data(), hp.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaFuncSetAttribute(stream_kernel<true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemcpy(ds, hs.data(), hs.size() * 4, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int mode = 0; mode < 4; ++mode) {  // slot rows: cp.async, TMA rows; page rows: cp.async, TMA 64-row boxes
    const int tma = mode % 2;
    std::vector<float> ms;
    for (int rep = 0; rep < 6; ++rep) {
      CK(cudaEventRecord(e0));
      if (mode == 0) stream_kernel<false><<<ctas, 256, smem>>>(map, pool, ds, steps, sink);
      if (mode == 1) stream_kernel<true><<<ctas, 256, smem>>>(map, pool, ds, steps, sink);
      if (mode == 2) stream_kernel<false><<<ctas, 256, smem>>>(map, pool, dp, steps, sink);
      if (mode == 3) stream_kernel<true, true><<<ctas, 256, smem>>>(map64, pool, dp, steps, sink);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaGetLastError());
      float m = 0;
      CK(cudaEventElapsedTime(&m, e0, e1));
      if (rep > 0) ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    const double us_step = ms[ms.size() / 2] * 1e3 / steps;
    std::printf("%s, %s: %.3f us a step (128 CTAs, 16 a row group; %.0f GB/s into shared memory, %.0f GB/s of distinct "
                "rows)\n", mode < 2 ? "random slots" : "64-slot pages",
                tma ? (mode == 3 ? "TMA 64 x 64 boxes (9 a step)" : "TMA 64 x 1 boxes (576 a step)")
                    : "cp.async 16 B, 18 a thread", us_step,
                ctas * double(kStepBytes) / us_step * 1e-3, groups * double(kStepBytes) / us_step * 1e-3);
  }
  return 0;
}
