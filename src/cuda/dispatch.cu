// The one place where runtime values become template choices: (tile configuration, dtype) for the verify
// kernel, Dv for the combine kernel. Also the device-property cache.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "common.h"
#include "cuda/launch.h"
#include "cuda/combine.cuh"
#include "cuda/params.cuh"
#include "cuda/schedule.cuh"
#include "cuda/trace.cuh"
#if defined(FLASHVERIFY_TRACE)
#include <vector>
#endif

namespace fv {

template <int CFG, class T, bool MODS, bool KV8>
cudaError_t launch_verify(const VerifyParams& p, dim3 grid, cudaStream_t stream);
template <int CFG, class T, bool MODS, bool KV8>
cudaError_t verify_kernel_attributes(cudaFuncAttributes* fa);
template <int CFG, class T>
cudaError_t launch_verify_narrow(const VerifyParams& p, dim3 grid, cudaStream_t stream);
#if defined(FV_HAVE_WG_KERNEL)
// the Hopper MLA kernel (verify_wg.cuh; src/cuda/wg/verify_mla_wg.cu, sm_90a code)
template <class T, bool KV8>
cudaError_t launch_verify_wg(const VerifyParams& p, bool prod, dim3 grid, cudaStream_t stream);
template <class T, int HD, int ST, bool KV8>
cudaError_t launch_verify_wg_gqa(const VerifyParams& p, dim3 grid, cudaStream_t stream);
// its RING kernels (fp8 pools, 2 stages: Plan::fp8_ring; src/cuda/wg/verify_gqa_ring.cu)
template <class T, int HD>
cudaError_t launch_verify_wg_gqa_ring(const VerifyParams& p, dim3 grid, cudaStream_t stream);
#endif

namespace {

constexpr int kMaxDevices = 64;

fv_status cuda_fail(cudaError_t err, const char* what) {
  return fail(FV_ERR_CUDA, "fv_run: %s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

#if defined(FLASHVERIFY_TRACE)
// trace.cuh: the buffer (allocated on the first call outside a graph capture; latency studies only) and
// its dump at exit, one line a record: kind (v = verify CTA, c = combine block), index, smid, tag, then
// (globaltimer ns, clock64) for each event, 0 where the event did not happen
uint64_t* g_trace = nullptr;
constexpr size_t kTraceBytes = size_t(2) * kTraceBlocks * kTraceWords * sizeof(uint64_t);
void dump_trace() {
  const char* path = std::getenv("FV_TRACE_OUT");
  if (path == nullptr || g_trace == nullptr) return;
  std::vector<uint64_t> h(kTraceBytes / sizeof(uint64_t));
  if (cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpy(h.data(), g_trace, kTraceBytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::fprintf(stderr, "flashverify trace: could not read the buffer\n");
    return;
  }
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return;
  for (int b = 0; b < 2 * kTraceBlocks; ++b) {
    const uint64_t* r = &h[size_t(b) * kTraceWords];
    if (r[2] == 0) continue;
    std::fprintf(f, "%c,%d,%llu,%llu", b < kTraceBlocks ? 'v' : 'c', b % kTraceBlocks, (unsigned long long)r[0],
                 (unsigned long long)r[1]);
    for (int e = 0; e < kTraceEvents; ++e)
      std::fprintf(f, ",%llu,%llu", (unsigned long long)r[2 + 2 * e], (unsigned long long)r[3 + 2 * e]);
    std::fputc('\n', f);
  }
  std::fclose(f);
}
uint64_t* trace_buffer(cudaStream_t s) {
  if (g_trace != nullptr) return g_trace;
  cudaStreamCaptureStatus st;
  if (cudaStreamIsCapturing(s, &st) != cudaSuccess || st != cudaStreamCaptureStatusNone) return nullptr;
  if (cudaMalloc(&g_trace, kTraceBytes) != cudaSuccess || cudaMemset(g_trace, 0, kTraceBytes) != cudaSuccess) {
    g_trace = nullptr;
    return nullptr;
  }
  std::atexit(dump_trace);
  return g_trace;
}
#endif

// fp8 pools in the Hopper kernels: k_scale and v_scale, no other score modifier (logit cap, sliding window, xai
// temperature)
inline bool wg_takes_fp8(const VerifyParams& p) { return p.logit_cap == 0.f && p.window <= 0 && p.xai_len <= 0; }

template <class T, bool MODS, bool KV8>
cudaError_t launch_verify_cfg(int cfg, const VerifyParams& p, dim3 grid, cudaStream_t s) {
  switch (cfg) {
    case kMlaLarge: return launch_verify<kMlaLarge, T, MODS, KV8>(p, grid, s);
    case kMlaSmall: return launch_verify<kMlaSmall, T, MODS, KV8>(p, grid, s);
    case kGqa64: return launch_verify<kGqa64, T, MODS, KV8>(p, grid, s);
    case kGqa128: return launch_verify<kGqa128, T, MODS, KV8>(p, grid, s);
    case kGqa256: return launch_verify<kGqa256, T, MODS, KV8>(p, grid, s);
    case kGqa128Bm32: return launch_verify<kGqa128Bm32, T, MODS, KV8>(p, grid, s);
    case kGqa128Bn32: return launch_verify<kGqa128Bn32, T, MODS, KV8>(p, grid, s);
    case kGqa128Bm32S3: return launch_verify<kGqa128Bm32S3, T, MODS, KV8>(p, grid, s);
    case kGqa256Bn32: return launch_verify<kGqa256Bn32, T, MODS, KV8>(p, grid, s);
    case kMlaWg:
      // the Hopper kernel takes 16-bit pools without modifiers, and fp8 pools with their k_scale / v_scale but
      // no other modifier (logit cap, sliding window, xai temperature); anything else takes the large mma.sync
      // tile, whose geometry (and so the plan) is the same. fp8: the producer-warpgroup kernel where the rows are
      // 16-byte aligned (kv8_a16: its copies are 16 bytes), else the kernel whose compute warps copy 8 bytes at a time
#if defined(FV_HAVE_WG_KERNEL)
      // (and it is written for MLA's single KV head: grid.z == 1)
      if constexpr (!MODS && !KV8)
        if (grid.z == 1) return launch_verify_wg<T, false>(p, false, grid, s);
      if constexpr (KV8)
        if (grid.z == 1 && wg_takes_fp8(p)) return launch_verify_wg<T, true>(p, p.kv8_a16, grid, s);
#endif
      return launch_verify<kMlaLarge, T, MODS, KV8>(p, grid, s);
    case kGqaWg128:
    case kGqaWg128S5:
      // the Hopper kernel for GQA d128 (2 or 5 stages) takes 16-bit pools without modifiers, and fp8 pools with their
      // k_scale / v_scale but no other modifier; anything else takes the 64-row mma.sync tile, whose geometry (and so
      // the plan) is the same
#if defined(FV_HAVE_WG_KERNEL)
      if constexpr (!MODS && !KV8)
        return cfg == kGqaWg128 ? launch_verify_wg_gqa<T, 128, 2, false>(p, grid, s)
                                : launch_verify_wg_gqa<T, 128, 5, false>(p, grid, s);
      if constexpr (KV8)
        if (wg_takes_fp8(p))
          return cfg == kGqaWg128 ? launch_verify_wg_gqa<T, 128, 2, true>(p, grid, s)
                                  : launch_verify_wg_gqa<T, 128, 5, true>(p, grid, s);
#endif
      return launch_verify<kGqa128, T, MODS, KV8>(p, grid, s);
    case kGqa256Bn64: return launch_verify<kGqa256Bn64, T, MODS, KV8>(p, grid, s);
    case kGqaWg256:
      // the Hopper kernel for GQA d256 (16-bit pools without modifiers, fp8 pools as d128's), with the 64-key d256
      // mma.sync tile of the same plan for the rest
#if defined(FV_HAVE_WG_KERNEL)
      if constexpr (!MODS && !KV8) return launch_verify_wg_gqa<T, 256, 2, false>(p, grid, s);
      if constexpr (KV8)
        if (wg_takes_fp8(p)) return launch_verify_wg_gqa<T, 256, 2, true>(p, grid, s);
#endif
      return launch_verify<kGqa256Bn64, T, MODS, KV8>(p, grid, s);
    default: return cudaErrorInvalidValue;
  }
}

// fp8 pools always take the modifiers' instantiation (their k_scale / v_scale live there); `narrow` (Plan::fp8_narrow):
// the 32-row tiles' kernel with 64-key compact steps; `ring` (Plan::fp8_ring): the 2-stage Hopper GQA kernels' RING
// kernels where the Hopper kernel serves (no score modifier but the scales)
template <class T>
cudaError_t launch_verify_for(int cfg, bool narrow, bool ring, const VerifyParams& p, dim3 grid, cudaStream_t s) {
#if defined(FV_HAVE_WG_KERNEL)
  if (p.kv_fp8 && ring && wg_takes_fp8(p)) {
    if (cfg == kGqaWg128) return launch_verify_wg_gqa_ring<T, 128>(p, grid, s);
    if (cfg == kGqaWg256) return launch_verify_wg_gqa_ring<T, 256>(p, grid, s);
  }
#else
  (void)ring;
#endif
  if (p.kv_fp8 && narrow && cfg == kGqa128Bm32) return launch_verify_narrow<kGqa128Bm32, T>(p, grid, s);
  if (p.kv_fp8 && narrow && cfg == kGqa128Bm32S3) return launch_verify_narrow<kGqa128Bm32S3, T>(p, grid, s);
  if (p.kv_fp8) return launch_verify_cfg<T, true, true>(cfg, p, grid, s);
  return p.mods ? launch_verify_cfg<T, true, false>(cfg, p, grid, s) : launch_verify_cfg<T, false, false>(cfg, p, grid, s);
}

// The combine launch, from the plan: Plan::combine_blocks blocks (the planner checked them against the grid
// limit); Plan::combine_block8: one 8-warp block a unit (with wpr 8); Plan::pdl: a programmatic dependent launch
// (the kernel waits for the verify grid itself)
template <class T, int DV, int COLS>
cudaError_t launch_combine_dv(const VerifyParams& p, const Plan& plan, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(plan.combine_blocks));
  cfg.blockDim = dim3(plan.combine_block8 ? kCombineBlock8Threads : kCombineThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = plan.pdl ? 1 : 0;
  // 8-warp blocks, or wpr 16 in 16-warp blocks (combine.cuh says why those are kernels of their own), or any wpr;
  // 256-column units only the last (launch_combine_cols)
  cudaError_t err;
  if constexpr (COLS == 256)
    err = cudaLaunchKernelEx(&cfg, combine_kernel<T, DV, COLS>, p);
  else
    err = plan.combine_block8 ? cudaLaunchKernelEx(&cfg, combine_block8_kernel<T, DV, COLS>, p)
          : p.combine_wpr == kCombineWarps ? cudaLaunchKernelEx(&cfg, combine_block_kernel<T, DV, COLS>, p)
                                           : cudaLaunchKernelEx(&cfg, combine_kernel<T, DV, COLS>, p);
  if (err != cudaSuccess) cudaGetLastError();  // do not leave it for the next call to report
  return err;
}

// Plan::combine_cols: the columns a block merges (32, min(Dv, 128), or 256)
template <class T, int DV>
cudaError_t launch_combine_cols(const VerifyParams& p, const Plan& plan, cudaStream_t s) {
  constexpr int kWide = DV < 128 ? DV : 128;
  if (plan.combine_cols == 256) {
    // combine_kernel only: the planner takes 256 columns for Dv 256 / 512 without combine_block8 or wpr 16
    if constexpr (DV >= 256)
      if (!plan.combine_block8 && p.combine_wpr != kCombineWarps) return launch_combine_dv<T, DV, 256>(p, plan, s);
    return cudaErrorInvalidConfiguration;
  }
  return plan.combine_cols == 32 ? launch_combine_dv<T, DV, 32>(p, plan, s) : launch_combine_dv<T, DV, kWide>(p, plan, s);
}

template <class T>
cudaError_t launch_combine_for(int dv, const VerifyParams& p, const Plan& plan, cudaStream_t s) {
  switch (dv) {
    case 64: return launch_combine_cols<T, 64>(p, plan, s);
    case 128: return launch_combine_cols<T, 128>(p, plan, s);
    case 256: return launch_combine_cols<T, 256>(p, plan, s);
    default: return launch_combine_cols<T, 512>(p, plan, s);
  }
}

}  // namespace

fv_status cuda_current_device(DeviceProps* out) {
  static std::mutex mu;
  static DeviceProps cache[kMaxDevices];
  static bool cached[kMaxDevices] = {};
  int dev = 0, count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0) err = cudaGetDevice(&dev);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the (non-sticky) error so later calls start clean
    // Planning without a GPU (tests, workspace sizing on a build machine):
    // FLASHVERIFY_PLAN_DEVICE="num_sms,smem_per_block,smem_per_sm,cc_major,cc_minor". Used only when no
    // CUDA device exists, so it can never steer a real launch.
    if (const char* fake = std::getenv("FLASHVERIFY_PLAN_DEVICE")) {
      DeviceProps p;
      if (std::sscanf(fake, "%d,%d,%d,%d,%d", &p.num_sms, &p.max_smem_per_block, &p.max_smem_per_sm, &p.cc_major,
                      &p.cc_minor) == 5 && p.num_sms > 0) {
        *out = p;
        return FV_OK;
      }
    }
    return fail(FV_ERR_NO_DEVICE, "no usable CUDA device: %s",
                err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found none");
  }
  std::lock_guard<std::mutex> lock(mu);
  if (dev >= 0 && dev < kMaxDevices && cached[dev]) {
    *out = cache[dev];
    return FV_OK;
  }
  DeviceProps p;
  if ((err = cudaDeviceGetAttribute(&p.num_sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
      (err = cudaDeviceGetAttribute(&p.max_smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) !=
          cudaSuccess ||
      (err = cudaDeviceGetAttribute(&p.max_smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev)) !=
          cudaSuccess ||
      (err = cudaDeviceGetAttribute(&p.cc_major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
      (err = cudaDeviceGetAttribute(&p.cc_minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess) {
    cudaGetLastError();
    return fail(FV_ERR_NO_DEVICE, "querying CUDA device %d: %s", dev, cudaGetErrorString(err));
  }
  if (p.cc_major < 8)
    return fail(FV_ERR_NO_DEVICE, "CUDA device %d is sm_%d%d; flashverify needs sm_80 or newer", dev, p.cc_major,
                p.cc_minor);
  // which code the device loaded: a kernel's body is compiled for the PTX architecture it reports (ptxVersion), which
  // is older than the device's binary version where the driver JIT-compiled older PTX (a library built without this
  // GPU's architecture). A reported PTX version below 90 rules out what sm_90 code alone holds; none reported (0)
  // changes nothing.
  auto older_ptx = [](const cudaFuncAttributes& fa, int below) { return fa.ptxVersion > 0 && fa.ptxVersion < below; };
  // A library without code this device can load (no SASS of its major architecture, no PTX older than it) is
  // refused here, by fv_workspace_size as well as fv_run, rather than at the first launch (FV_ERR_CUDA).
  // Otherwise, the combine kernels (all built from this file for the same architectures): griddepcontrol.wait is
  // compiled in from sm_90 on
  cudaFuncAttributes fa{};
  err = cudaFuncGetAttributes(&fa, combine_kernel<__nv_bfloat16, 128, 128>);
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    cudaGetLastError();
    return fail(FV_ERR_NO_DEVICE,
                "CUDA device %d is sm_%d%d and this library has no code it can load (built for sm %s: %s); rebuild "
                "with CMAKE_CUDA_ARCHITECTURES including %d%d",
                dev, p.cc_major, p.cc_minor, cuda_arch_list(), cudaGetErrorString(err), p.cc_major, p.cc_minor);
  }
  if (err == cudaSuccess) {
    p.combine_waits = fa.binaryVersion >= 90 && !older_ptx(fa, 90);
  } else {
    cudaGetLastError();
    p.combine_waits = false;
  }
  // the large-tile verify kernels: their bodies exist for sm_90 - sm_11x code only (verify.cuh); a failed query keeps
  // them (the planner's choice as before)
  cudaFuncAttributes fl{};
  if (verify_kernel_attributes<kMlaLarge, __nv_bfloat16, false, false>(&fl) == cudaSuccess)
    p.large_kernels = !older_ptx(fl, 90);
  else
    cudaGetLastError();
  // resident combine blocks a multiprocessor, for the planner's one-wave rule (the widest kernel: the most
  // registers of any combine instantiation)
  int resident = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, combine_block_kernel<__nv_bfloat16, 512, 128>,
                                                    kCombineThreads, 0) == cudaSuccess && resident > 0) {
    p.combine_blocks_per_sm = resident;
  } else {
    cudaGetLastError();
  }
#if defined(FV_HAVE_WG_KERNEL)
  p.wg_kernel = true;
#endif
  if (dev >= 0 && dev < kMaxDevices) {
    cache[dev] = p;
    cached[dev] = true;
  }
  *out = p;
  return FV_OK;
}

fv_status cuda_run_fast(const fv_args& a, const Plan& plan, void* workspace, void* stream) {
  const fv_problem& pb = a.problem;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return fail(FV_ERR_NO_DEVICE, "fv_run: no CUDA device to launch on");
  }
  const TileConfig& cfg = *plan.cfg;
  VerifyParams p{};
  p.q = a.q;
  p.q_stride_token = a.q_stride_token;
  p.q_stride_head = a.q_stride_head;
  p.k_draft = a.k_draft;
  p.k_draft_stride_token = a.k_draft_stride_token;
  p.k_draft_stride_head = a.k_draft_stride_head;
  p.v_draft = a.v_draft;
  p.v_draft_stride_token = a.v_draft_stride_token;
  p.v_draft_stride_head = a.v_draft_stride_head;
  p.k_pool = a.k_pool;
  p.k_pool_stride_slot = a.k_pool_stride_slot;
  p.k_pool_stride_head = a.k_pool_stride_head;
  p.v_pool = a.v_pool;
  p.v_pool_stride_slot = a.v_pool_stride_slot;
  p.v_pool_stride_head = a.v_pool_stride_head;
  p.out = a.out;
  p.out_stride_token = a.out_stride_token;
  p.out_stride_head = a.out_stride_head;
  p.lse = a.lse;
  p.lse_stride_token = a.lse_stride_token;
  p.qo_indptr = a.qo_indptr.data;
  p.kv_indptr = a.kv_indptr.data;
  p.kv_indices = a.kv_indices.data;
  p.mask_indptr = a.mask_indptr.data;
  p.qo_i64 = a.qo_indptr.dtype == FV_INDEX_INT64;
  p.kv_indptr_i64 = a.kv_indptr.dtype == FV_INDEX_INT64;
  p.kv_indices_i64 = a.kv_indices.dtype == FV_INDEX_INT64;
  p.mask_indptr_i64 = a.mask_indptr.dtype == FV_INDEX_INT64;
  p.custom_mask = a.custom_mask;
  p.parents = a.parents;
  p.page_table = a.page_table;
  p.page_table_stride = a.page_table_stride;
  p.paged = pb.kv_addressing == FV_KV_PAGE_TABLE;
  p.page_size = pb.page_size;
  p.mask_kind = pb.mask_kind;
  p.out_fp32 = out_dtype_of(pb) == FV_DTYPE_FP32;
  p.batch = pb.batch_size;
  p.max_draft = pb.max_draft;
  p.num_q_heads = pb.num_q_heads;
  p.num_kv_heads = pb.num_kv_heads;
  p.group = plan.group;
  p.head_dim_v = pb.head_dim_v;
  p.scale_log2 = a.sm_scale * 1.4426950408889634f;
  const float k_scale = kv_scale_of(a.k_scale), v_scale = kv_scale_of(a.v_scale);
  p.scale_nat = a.sm_scale;
  p.scale_nat_prefix = a.sm_scale * k_scale;
  p.scale_log2_prefix = a.sm_scale * k_scale * 1.4426950408889634f;
  p.logit_cap = a.logit_cap;
  p.inv_logit_cap = a.logit_cap > 0.f ? 1.f / a.logit_cap : 0.f;
  p.v_scale = v_scale;
  p.window = effective_window(a);
  p.xai_len = a.xai_temperature_len > 0 ? a.xai_temperature_len : 0;
  p.sinks = a.sinks;
  p.window_kv_offsets = effective_window_offsets(a);
  p.kv_fp8 = kv_dtype_of(pb) == FV_DTYPE_FP8_E4M3;
  // fp8 rows may be copied 16 bytes at a time when every pool stride is a multiple of 16 bytes (the bases
  // are 16-byte aligned: validate.cpp); otherwise 8 bytes at a time. In the tiles that widen fp8 rows in
  // shared memory (MLA, and GQA tiles without in-register widening) 16-byte pair copies are opt-in
  // (FLASHVERIFY_FP8_PAIRS=1): they measured 1.4% slower than 8-byte copies on GQA 32/8 B=16 (bench/NOTES.md v8).
  static const bool pairs_env = env_is_1("FLASHVERIFY_FP8_PAIRS");
  // (a head stride counts only with more than one KV head: with one it is multiplied by 0)
  const bool one_kv_head = pb.num_kv_heads == 1;
  p.kv8_a16 = p.kv_fp8 && a.k_pool_stride_slot % 16 == 0 && (one_kv_head || a.k_pool_stride_head % 16 == 0) &&
              a.v_pool_stride_slot % 16 == 0 && (one_kv_head || a.v_pool_stride_head % 16 == 0);
  p.kv8_pairs = pairs_env && p.kv8_a16;
  p.mods = a.logit_cap > 0.f || p.window > 0 || p.xai_len > 0 || k_scale != 1.f || v_scale != 1.f || p.kv_fp8;
  // fp8 pools with a bf16 model: the Hopper MLA kernel's producer path multiplies in fp16 (verify_wg.cuh, F16) where
  // the scales leave fp16 room: |k_scale| and |v_scale| in [2^-12, 2^12] and within 2^6 of each other (P's two factors
  // then lie in [2^-7, 1]); FLASHVERIFY_FP8_MLA_F16=0 keeps bf16 products (read per call: tests and benchmark A/B)
  p.fp8_f16 = 0;
  // fp8 pools with a bf16 model and 16-byte aligned rows: the 2-stage Hopper GQA d128 and d256 kernels run S of their
  // prefix steps on e4m3 wgmma (verify_wg.cuh, S8); FLASHVERIFY_GQA8_S8=0 keeps S in bf16 (read per call: tests and
  // benchmark A/B), and so does d256 below 4 (request, KV head) pairs, where a CTA's segment is a few steps: GQA 8/1 N=8
  // P=32K batch 1 ran 32.8-33.2 us with S8 against 26.8-27.0 without; B=4 (S8) 54.4-55.8 against 55.0-56.7, B=16
  // 148.0-151.3 against 165.8-169.6 (bench/NOTES.md v39-v40). Where it is off, launch_verify_wg_gqa takes the kernel
  // built without S8. FLASHVERIFY_GQA8_S8_D256_PAIRS=n moves that threshold (benchmark A/B; read per call).
  p.fp8_s8 = p.kv8_a16 && pb.dtype == FV_DTYPE_BF16 && env_on_unless_0("FLASHVERIFY_GQA8_S8") &&
             (pb.head_dim_qk != 256 || int64_t(pb.batch_size) * pb.num_kv_heads >=
                                           env_int_in("FLASHVERIFY_GQA8_S8_D256_PAIRS", 0, 1 << 30, 4));
  p.f16_draft_row = p.f16_draft_score = p.f16_p_prefix = p.f16_p_draft = p.f16_out = 1.f;
  // The fp16-P factors both routes below set: prefix P times v_scale 2^-sigma, draft P times 2^(draft_exp - sigma),
  // the output times 2^sigma (exact powers of two besides v_scale).
  const auto set_f16_p_factors = [&p, v_scale](int sigma, int draft_exp) {
    p.f16_p_prefix = std::ldexp(v_scale, -sigma);
    p.f16_p_draft = std::ldexp(1.f, draft_exp - sigma);
    p.f16_out = std::ldexp(1.f, sigma);
  };
  const float ak = std::fabs(k_scale), av = std::fabs(v_scale);
  if (p.kv_fp8 && pb.dtype == FV_DTYPE_BF16 && ak >= 0x1p-12f && ak <= 0x1p12f && av >= 0x1p-12f && av <= 0x1p12f &&
      av <= ak * 0x1p6f && ak <= av * 0x1p6f && env_on_unless_0("FLASHVERIFY_FP8_MLA_F16")) {
    p.fp8_f16 = 1;
    const int kd_log2 = -static_cast<int>(std::lround(std::log2(ak)));  // kd ~ 1 / |k_scale|
    const int sigma = static_cast<int>(std::ceil(std::log2(std::max(av, std::ldexp(1.f, -kd_log2)))));
    p.f16_draft_row = std::ldexp(1.f, kd_log2);
    p.f16_draft_score = std::ldexp(1.f, -kd_log2);
    set_f16_p_factors(sigma, -kd_log2);
  }
  // fp16 models: P is fp16 too (normal from 2^-14, finite up to 65504), and v_scale folded into it as it stands
  // overflowed (|v_scale| >= 65520: Inf and NaN outputs) or pushed the prefix P into fp16's subnormals (|v_scale| =
  // 1e-4: most prefix terms kept a few bits; found by a review in v60). So the kernels that fold v_scale into an fp16 P
  // take it as the bf16 route's fp16 products do: prefix P times f16_p_prefix = v_scale 2^-sigma, draft P times
  // f16_p_draft = 2^-sigma, the output times f16_out = 2^sigma (exact powers of two), sigma = 0 for |v_scale| in
  // [2^-2, 2^15) (P as before), ilogb |v_scale| below (the prefix factor in [1, 2), the draft one up to 2^15) and
  // ilogb |v_scale| - 14 above (the prefix factor in [2^14, 2^15)). Below 2^-15 the prefix factor stays under 1, and
  // above 2^29 the draft factor under 2^-15 (fp16 then loses small draft P: such a scale makes prefix values of
  // 448 |v_scale|, past fp16's output range anyway).
  if (pb.dtype == FV_DTYPE_FP16) {
    const int e = std::ilogb(av);  // |v_scale| in [2^e, 2^(e + 1)); v_scale is never 0 here (0 means 1)
    const int sigma = e < -2 ? std::max(e, -15) : e > 14 ? e - 14 : 0;
    set_f16_p_factors(sigma, 0);
  }

  uint8_t* ws = static_cast<uint8_t*>(workspace);
  p.sched = reinterpret_cast<int32_t*>(ws + plan.off_sched);
  uint32_t* bits = reinterpret_cast<uint32_t*>(ws + plan.off_bits);
  if (pb.mask_kind == FV_MASK_BITS) {
    p.mask_bits = a.mask_bits;
    p.mask_bits_stride = a.mask_bits_stride;
  } else {
    p.mask_bits = bits;
    p.mask_bits_stride = plan.mask_words;
  }
  p.part_lse = reinterpret_cast<float*>(ws + plan.off_part_lse);
  p.part_o = reinterpret_cast<float*>(ws + plan.off_part_o);
  p.num_parts = plan.num_parts;
  p.combine_wpr = plan.combine_wpr;
  p.block_n = cfg.bn;
  p.overhead = plan.overhead;
  p.min_part_cost = plan.min_part_cost;
  if (pb.num_kv_splits > 0) p.min_part_cost = 1;  // a forced split count is honoured as far as the work allows

  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t err;
#if defined(FLASHVERIFY_TRACE)
  p.trace = trace_buffer(s);
#endif
  p.inline_plan = plan.inline_plan;
  p.bytes_direct = plan.inline_plan && pb.mask_kind == FV_MASK_BYTES;
  if (!plan.inline_plan) {
    const bool convert = plan.mask_words > 0;
    prepare_kernel<<<1 + (convert ? pb.batch_size : 0), kPrepareThreads, 0, s>>>(p, bits, plan.mask_words);
    err = cudaGetLastError();
    if (err != cudaSuccess) return cuda_fail(err, "prepare kernel launch");
  }

  const dim3 grid(static_cast<unsigned>(plan.m_tiles), static_cast<unsigned>(plan.num_parts),
                  static_cast<unsigned>(pb.num_kv_heads));
  err = pb.dtype == FV_DTYPE_BF16 ? launch_verify_for<__nv_bfloat16>(cfg.id, plan.fp8_narrow, plan.fp8_ring, p, grid, s)
                                  : launch_verify_for<__half>(cfg.id, plan.fp8_narrow, plan.fp8_ring, p, grid, s);
  if (err != cudaSuccess) return cuda_fail(err, cfg.name);

  if (plan.max_slots > 0) {
    err = pb.dtype == FV_DTYPE_BF16 ? launch_combine_for<__nv_bfloat16>(pb.head_dim_v, p, plan, s)
                                    : launch_combine_for<__half>(pb.head_dim_v, p, plan, s);
    if (err != cudaSuccess) return cuda_fail(err, "combine kernel launch");
  }
  return FV_OK;
}

const char* cuda_arch_list() { return FV_CUDA_ARCHS; }

int cuda_runtime_version() { return CUDART_VERSION; }

}  // namespace fv
