// Tensor-core and copy primitives that every target from sm_80 to sm_120 has: mma.sync m16n8k16
// (bf16/fp16 in, fp32 accumulate), ldmatrix, and cp.async with zero-fill.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>
#include <cstdint>

namespace fv {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1. src_bytes = 0 fills the destination with zeros and reads
// nothing (the source address is not dereferenced).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// 8 bytes global -> shared (through L1: .cg takes 16-byte copies only); the fp8 KV rows
__device__ __forceinline__ void cp_async_8(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// 16 bytes of shared memory at a shared-space address, loaded / stored as four 32-bit words
__device__ __forceinline__ uint4 lds_128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts_128(uint32_t addr, const uint4& v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// D += A(16x16, row) * B(16x8, col); fragments as the PTX ISA lays them out.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats -> one 32-bit register of two 16-bit elements (low half = x).
template <class T>
__device__ __forceinline__ uint32_t pack2(float x, float y);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float x, float y) {
  __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float x, float y) {
  __half2 v = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Four fp8 e4m3 values (one 32-bit word, little end first) -> two 32-bit words of T pairs. Exact: every
// e4m3 value is representable in fp16 and bf16.
template <class T>
__device__ __forceinline__ void e4m3x4_to(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const __half2_raw a = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  const __half2_raw b = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
  if constexpr (std::is_same<T, __half>::value) {
    lo = static_cast<uint32_t>(a.x) | (static_cast<uint32_t>(a.y) << 16);
    hi = static_cast<uint32_t>(b.x) | (static_cast<uint32_t>(b.y) << 16);
  } else {
    const float2 fa = __half22float2(__half2(a)), fb = __half22float2(__half2(b));
    lo = pack2<T>(fa.x, fa.y);
    hi = pack2<T>(fb.x, fb.y);
  }
}

// Sixteen fp8 e4m3 values (a 16-byte chunk) -> sixteen T values in order: the first eight in lo, the others in hi
template <class T>
__device__ __forceinline__ void e4m3x16_to(const uint4& w, uint4& lo, uint4& hi) {
  e4m3x4_to<T>(w.x, lo.x, lo.y);
  e4m3x4_to<T>(w.y, lo.z, lo.w);
  e4m3x4_to<T>(w.z, hi.x, hi.y);
  e4m3x4_to<T>(w.w, hi.z, hi.w);
}

// Byte permute: result byte i = byte sel[4i+3:4i] of {b, a} (a = bytes 0-3, b = bytes 4-7).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// Four fp8 e4m3 values x0..x3 (one 32-bit word, x0 the low byte) -> the T pairs (x0, x2) and (x1, x3): the
// order in which the verify kernel's in-register fp8 fragments are laid out (verify.cuh, kFrag8).
// bf16: integer bit moves and one bf16 multiply a pair, no conversion-pipe instruction: the sign and the
// 7 exponent-mantissa bits go to their bf16 places, which reads the value as 2^-120 times itself (e4m3's
// exponent bias is 7, bf16's 127); one fma by 2^120 restores it exactly, subnormals included. An e4m3 NaN
// code (S.1111.111) becomes +-480 on this path (the shared-memory widening, e4m3x4_to, keeps NaN; see
// flashverify.h, fv_problem.kv_dtype). fp16: one byte permute and the e4m3x2 -> f16x2 conversion (one
// instruction on sm_89+, emulated before), exact, NaN kept.
template <class T>
__device__ __forceinline__ void e4m3x4_frag(uint32_t w, uint32_t& even, uint32_t& odd);
template <>
__device__ __forceinline__ void e4m3x4_frag<__nv_bfloat16>(uint32_t w, uint32_t& even, uint32_t& odd) {
  const uint32_t s = w << 8;
  const uint32_t o = (w & 0x80008000u) | ((w & 0x7f007f00u) >> 4);
  const uint32_t e = (s & 0x80008000u) | ((s & 0x7f007f00u) >> 4);
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(odd) : "r"(o), "r"(0x7b807b80u), "r"(0x80008000u));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(even) : "r"(e), "r"(0x7b807b80u), "r"(0x80008000u));
}
template <>
__device__ __forceinline__ void e4m3x4_frag<__half>(uint32_t w, uint32_t& even, uint32_t& odd) {
  e4m3x4_to<__half>(prmt(w, 0u, 0x3120u), even, odd);  // bytes x0 x2 x1 x3, widened in order
}

// Programmatic dependent launch (sm_90+). The primary grid lets its dependent grid be scheduled; the
// dependent waits until the primary grid has completed and its writes are visible. Both are no-ops on
// older architectures and when the launch carried no programmatic edge.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// 2^x for the softmax numerators: the MUFU instruction alone (flushes results below 2^-126 to 0, which
// no row sum can notice) instead of exp2f's denormal-range fix-up around it
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <class T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_float<float>(float x) { return x; }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }

}  // namespace fv
