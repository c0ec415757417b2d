// The Hopper wgmma building blocks (src/cuda/wgmma.cuh) on one MLA-shaped tile: S = Q K^T (64 x 64, depth 576,
// both operands in SW128 shared-memory tiles) and O = P V (64 x 512: P from the S accumulators in registers, V
// the first 512 columns of the K rows read transposed), against float64 products of the same rounded inputs.
// The MN-major descriptor is probed with both readings of its two byte offsets; the test requires the one
// wgmma.cuh documents and reports the other, so a wrong guess shows which one is right in a single run.
// O is also computed 256 and 128 columns at a time (m64n256k16 / m64n128k16, P from registers and from an SW128 P tile
// in shared memory: the Hopper kernels' PVW), where the LBO between 64-column V tiles is used.
// Built for sm_90a only (fv_wgmma_tests); skipped on other GPUs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../../src/cuda/mma.cuh"
#include "../../src/cuda/wgmma.cuh"
#include "../../src/round16.h"
#include "gpu_common.h"

namespace {

constexpr int kRows = 64, kKeys = 64, kDqk = 576, kDv = 512;
constexpr int kTileBytes = 64 * 128;                   // one SW128 tile: 64 rows x 64 columns
constexpr int kOperandBytes = (kDqk / 64) * kTileBytes;  // 9 tiles
[[maybe_unused]] constexpr float kPScale = 0.125f;  // P = S / 8 (device code built with wgmma only)

__device__ __forceinline__ uint32_t saddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

template <class T>
__device__ __forceinline__ float lo(uint32_t w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __uint_as_float(w << 16);
  else return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
}
template <class T>
__device__ __forceinline__ float hi(uint32_t w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __uint_as_float(w & 0xffff0000u);
  else return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
}

// O = P V with the wide forms, NT 64-column V tiles an instruction (m64n128k16: 2, m64n256k16: 4), for every column:
// out[0 ..] with P from registers (a), out[kRows * kDv ..] with P from the SW128 tile at ps
template <class T, int NT>
__device__ void wide_pv(const uint32_t (&a)[4][4], uint32_t ks, uint32_t ps, uint32_t mn_lbo, uint32_t mn_sbo,
                        float* out) {
#if FV_HAS_WGMMA
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t4 = threadIdx.x % 4;
  for (int form = 0; form < 2; ++form)
    for (int h = 0; h < kDv / 64 / NT; ++h) {
      float o[NT][32];
#pragma unroll
      for (int nb = 0; nb < NT; ++nb) fv::wg::zero_operands(o[nb]);
      fv::wg::fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const uint64_t db = fv::wg::desc_sw128(ks + NT * h * kTileBytes + kk * 2048, mn_lbo, mn_sbo);
        const uint64_t da = fv::wg::desc_sw128(ps + 32 * kk, 16, 1024);
        if (form == 0) fv::wg::mma_pv_wide_rs_tb<T>(o, a[kk], db);
        else fv::wg::mma_pv_wide_ss_tb<T>(o, da, db);
      }
      fv::wg::commit();
      fv::wg::wait<0>();
#pragma unroll
      for (int nb = 0; nb < NT; ++nb) fv::wg::fence_operands(o[nb]);
#pragma unroll
      for (int nb = 0; nb < NT; ++nb)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = 16 * warp + g + 8 * (e / 2), col = (NT * h + nb) * 64 + 8 * j + 2 * t4 + (e % 2);
            out[form * kRows * kDv + row * kDv + col] = o[nb][4 * j + e];
          }
    }
#else
  (void)a, (void)ks, (void)ps, (void)mn_lbo, (void)mn_sbo, (void)out;
#endif
}

// One warpgroup. mn_lbo / mn_sbo: the MN-major (V) descriptor's byte offsets. Writes S, the rounded P and O
// in row-major fp32; *has_wgmma = whether this build carries the instructions.
template <class T>
__global__ void __launch_bounds__(128) wgmma_tile(const T* q, const T* k, float* s_out, float* p_out, float* o_out,
                                                  float* o_wide_out, uint32_t mn_lbo, uint32_t mn_sbo, int* has_wgmma) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* qs = smem;
  uint8_t* ks = smem + kOperandBytes;
  uint8_t* ps = smem + 2 * kOperandBytes;  // P (64 x 64) as an SW128 tile
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
  // 1: built with wgmma; -1: the dynamic shared memory is not 1024-byte aligned (SW128 needs it)
  if (tid == 0) *has_wgmma = (saddr(smem) & 1023u) != 0 ? -1 : FV_HAS_WGMMA;
#if FV_HAS_WGMMA  // (the MMA helpers trap without wgmma)
  // rows of 72 16-byte chunks into 9 SW128 tiles
  for (int e = tid; e < kRows * (kDqk / 8); e += 128) {
    const int r = e / (kDqk / 8), cc = e % (kDqk / 8), kb = cc / 8, c = cc % 8;
    const uint32_t off = kb * kTileBytes + fv::wg::sw128_offset(r, c);
    *reinterpret_cast<uint4*>(qs + off) = *reinterpret_cast<const uint4*>(q + size_t(r) * kDqk + cc * 8);
    *reinterpret_cast<uint4*>(ks + off) = *reinterpret_cast<const uint4*>(k + size_t(r) * kDqk + cc * 8);
  }
  fv::wg::fence_proxy_async();
  __syncthreads();

  // S = Q K^T: 9 column tiles x 4 k16 steps
  float acc[32];
  fv::wg::zero_operands(acc);
  fv::wg::fence();
  for (int kb = 0; kb < kDqk / 64; ++kb)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t da = fv::wg::desc_sw128(saddr(qs) + kb * kTileBytes + 32 * j, 16, 1024);
      const uint64_t db = fv::wg::desc_sw128(saddr(ks) + kb * kTileBytes + 32 * j, 16, 1024);
      fv::wg::mma_m64n64k16_ss<T>(acc, da, db, kb + j > 0);
    }
  fv::wg::commit();
  fv::wg::wait<0>();
  fv::wg::fence_operands(acc);

  // S out; P = S / 8 rounded to T, as the A fragments of the four k16 steps over the keys
  uint32_t a[4][4];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 16 * warp + g + 8 * h, col = 8 * j + 2 * t4;
      s_out[row * kKeys + col] = acc[4 * j + 2 * h];
      s_out[row * kKeys + col + 1] = acc[4 * j + 2 * h + 1];
      const uint32_t w = fv::pack2<T>(acc[4 * j + 2 * h] * kPScale, acc[4 * j + 2 * h + 1] * kPScale);
      p_out[row * kKeys + col] = lo<T>(w);
      p_out[row * kKeys + col + 1] = hi<T>(w);
      a[j / 2][(j % 2) * 2 + h] = w;  // n-tile 2kk: a0 (row g), a1 (row g + 8); 2kk + 1: a2, a3
      // keys 8 j + 2 t4 are bytes 4 t4 of chunk j of the row
      *reinterpret_cast<uint32_t*>(ps + fv::wg::sw128_offset(row, j) + 4 * t4) = w;
    }
  fv::wg::fence_proxy_async();
  __syncthreads();

  // O = P V, 64 columns at a time: V's tile nb holds d 64 nb .. 64 nb + 63 of every key row
  for (int nb = 0; nb < kDv / 64; ++nb) {
    float o[32];
    fv::wg::zero_operands(o);
    fv::wg::fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint64_t db = fv::wg::desc_sw128(saddr(ks) + nb * kTileBytes + kk * 2048, mn_lbo, mn_sbo);
      fv::wg::mma_m64n64k16_rs_tb<T>(o, a[kk], db);
    }
    fv::wg::commit();
    fv::wg::wait<0>();
    fv::wg::fence_operands(o);
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = 16 * warp + g + 8 * (e / 2), col = nb * 64 + 8 * j + 2 * t4 + (e % 2);
        o_out[row * kDv + col] = o[4 * j + e];
      }
  }

  // O = P V, 256 columns at a time (V tiles 4 h .. 4 h + 3, mn_lbo apart) into o_wide_out[0] (P from registers) and
  // [1] (P from the P tile), then 128 at a time (V tiles 2 h, 2 h + 1) into [2] and [3]
  wide_pv<T, 4>(a, saddr(ks), saddr(ps), mn_lbo, mn_sbo, o_wide_out);
  wide_pv<T, 2>(a, saddr(ks), saddr(ps), mn_lbo, mn_sbo, o_wide_out + 2 * kRows * kDv);
#else
  (void)q, (void)k, (void)qs, (void)ks, (void)ps, (void)s_out, (void)p_out, (void)o_out, (void)o_wide_out, (void)mn_lbo,
      (void)mn_sbo, (void)g, (void)t4, (void)warp;
#endif
}

struct Errors {
  double s_rel = 0, o_rel = 0, o256_rs_rel = 0, o256_ss_rel = 0, o128_rs_rel = 0, o128_ss_rel = 0;
  int p_wrong = 0;  // elements of P that are not the kernel's own S / 8 rounded once to T (O's reference uses P)
};

template <class T>
Errors run_tile(uint32_t mn_lbo, uint32_t mn_sbo, int* has_wgmma) {
  const int dtype = std::is_same_v<T, __half> ? FV_DTYPE_FP16 : FV_DTYPE_BF16;
  std::mt19937 rng(static_cast<uint32_t>(fvt::session_seed()));  // fresh inputs each session (FV_SEED repeats one)
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<T> q(kRows * kDqk), k(kKeys * kDqk);
  for (auto& x : q) x = T(u(rng));
  for (auto& x : k) x = T(u(rng));
  std::vector<float> qf(q.size()), kf(k.size());
  for (size_t i = 0; i < q.size(); ++i) qf[i] = fvt::bits_to_float(reinterpret_cast<const uint16_t&>(q[i]), dtype);
  for (size_t i = 0; i < k.size(); ++i) kf[i] = fvt::bits_to_float(reinterpret_cast<const uint16_t&>(k[i]), dtype);

  T *dq, *dk;
  float *ds, *dp, *dout, *dout_wide;
  int* dflag;
  cudaMalloc(&dq, q.size() * sizeof(T));
  cudaMalloc(&dk, k.size() * sizeof(T));
  cudaMalloc(&ds, kRows * kKeys * 4);
  cudaMalloc(&dp, kRows * kKeys * 4);
  cudaMalloc(&dout, kRows * kDv * 4);
  cudaMalloc(&dout_wide, 4 * kRows * kDv * 4);
  cudaMalloc(&dflag, 4);
  cudaMemcpy(dq, q.data(), q.size() * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(dk, k.data(), k.size() * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemset(ds, 0xff, kRows * kKeys * 4);  // NaN poison
  cudaMemset(dp, 0xff, kRows * kKeys * 4);
  cudaMemset(dout, 0xff, kRows * kDv * 4);
  cudaMemset(dout_wide, 0xff, 4 * kRows * kDv * 4);
  cudaMemset(dflag, 0, 4);
  const int smem = 2 * kOperandBytes + kTileBytes;
  EXPECT_EQ(cudaFuncSetAttribute(wgmma_tile<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), cudaSuccess);
  wgmma_tile<T><<<1, 128, smem>>>(dq, dk, ds, dp, dout, dout_wide, mn_lbo, mn_sbo, dflag);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaGetLastError());
  std::vector<float> s(kRows * kKeys), p(kRows * kKeys), o(kRows * kDv), o_wide(4 * kRows * kDv);
  int flag = 0;
  cudaMemcpy(s.data(), ds, s.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(p.data(), dp, p.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(o.data(), dout, o.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(o_wide.data(), dout_wide, o_wide.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(&flag, dflag, 4, cudaMemcpyDeviceToHost);
  cudaFree(dq), cudaFree(dk), cudaFree(ds), cudaFree(dp), cudaFree(dout), cudaFree(dout_wide), cudaFree(dflag);
  *has_wgmma = flag;

  Errors err;
  for (size_t i = 0; i < p.size(); ++i) {
    const double want = fvt::bits_to_float(std::is_same_v<T, __half> ? fv::round_to_fp16(double(s[i]) / 8)
                                                                     : fv::round_to_bf16(double(s[i]) / 8), dtype);
    err.p_wrong += !(p[i] == want);  // (NaN: wrong)
  }
  err.s_rel = fvg::matrix_rel_l2(kRows, kKeys, s, [&](int i, int j) {
    double r = 0;
    for (int d = 0; d < kDqk; ++d) r += double(qf[i * kDqk + d]) * kf[j * kDqk + d];
    return r;
  });
  auto o_ref = [&](int i, int n) {
    double r = 0;
    for (int j = 0; j < kKeys; ++j) r += double(p[i * kKeys + j]) * kf[j * kDqk + n];
    return r;
  };
  err.o_rel = fvg::matrix_rel_l2(kRows, kDv, o, o_ref);
  auto form_rel = [&](int form) {
    const std::vector<float> of(o_wide.begin() + form * kRows * kDv, o_wide.begin() + (form + 1) * kRows * kDv);
    return fvg::matrix_rel_l2(kRows, kDv, of, o_ref);
  };
  err.o256_rs_rel = form_rel(0);
  err.o256_ss_rel = form_rel(1);
  err.o128_rs_rel = form_rel(2);
  err.o128_ss_rel = form_rel(3);
  return err;
}

template <class T>
void check_tile(const char* name) {
  // fp32 accumulation of 576 (S) and 64 (O) products of 16-bit values: relative L2 errors near 1e-6 (the
  // tensor cores' sums truncate); 1e-4 fails any layout error (those are O(1)). With N = 64 the MN-major
  // descriptor's LBO is never used: the probe tells the SBO readings apart; the m64n256k16 products use it.
  constexpr double kTol = 1e-4;
  int has = 0;
  const Errors doc = run_tile<T>(64 * 128, 1024, &has);  // wgmma.cuh: LBO = next 64-column tile, SBO = next 8 keys
  ASSERT_NE(has, -1) << "dynamic shared memory is not 1024-byte aligned";
  ASSERT_EQ(has, 1) << "fv_wgmma_tests was not compiled for sm_90a (FV_HAS_WGMMA = 0)";
  const Errors alt = run_tile<T>(1024, 64 * 128, &has);
  std::printf("[ wgmma %s ] FV_SEED=%llu S rel L2 %.2e; O rel L2 %.2e (LBO 8192, SBO 1024: documented) / %.2e (LBO 1024, "
              "SBO 8192)\n", name, static_cast<unsigned long long>(fvt::session_seed()), doc.s_rel, doc.o_rel, alt.o_rel);
  EXPECT_LE(doc.s_rel, kTol) << "S = Q K^T from K-major SW128 tiles (SBO 1024) is wrong";
  EXPECT_EQ(doc.p_wrong, 0) << "P is not S / 8 rounded to " << name << " (O's reference is built from P)";
  EXPECT_LE(doc.o_rel, kTol) << "O = P V with the documented MN-major offsets is wrong"
                             << (alt.o_rel <= kTol ? "; the swapped offsets (LBO 1024, SBO 8192) are right" : "");
  std::printf("[ wgmma %s ] m64n256k16 O rel L2: P from registers %.2e, from shared memory %.2e (documented offsets); "
              "%.2e / %.2e (swapped)\n", name, doc.o256_rs_rel, doc.o256_ss_rel, alt.o256_rs_rel, alt.o256_ss_rel);
  EXPECT_LE(doc.o256_rs_rel, kTol) << "m64n256k16 O = P V (P from registers) with the documented offsets is wrong";
  EXPECT_LE(doc.o256_ss_rel, kTol) << "m64n256k16 O = P V (P from an SW128 tile) with the documented offsets is wrong";
  std::printf("[ wgmma %s ] m64n128k16 O rel L2: P from registers %.2e, from shared memory %.2e (documented offsets)\n",
              name, doc.o128_rs_rel, doc.o128_ss_rel);
  EXPECT_LE(doc.o128_rs_rel, kTol) << "m64n128k16 O = P V (P from registers) with the documented offsets is wrong";
  EXPECT_LE(doc.o128_ss_rel, kTol) << "m64n128k16 O = P V (P from an SW128 tile) with the documented offsets is wrong";
}

TEST(Wgmma, MlaTileProductsMatchFloat64) {
  REQUIRE_GPU();
  if (!fvg::on_sm90()) GTEST_SKIP() << "wgmma needs an sm_90 GPU";
  check_tile<__nv_bfloat16>("bf16");
  check_tile<__half>("fp16");
}

}  // namespace
