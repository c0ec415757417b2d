// Hopper warpgroup MMA (wgmma, sm_90a only) for the Hopper MLA kernel (verify_wg.cuh):
// shared-memory matrix descriptors for 128-byte-swizzled tiles, the fence / commit / wait trio, and the three
// m64n64k16 forms the verify kernel needs: S = Q K^T with both operands in shared memory, and O += P V with V
// read transposed from the K rows and P either in registers (the S accumulators' layout) or in a shared tile; and the
// fp8 e4m3 form m64n64k32 of S (the fp8 GQA d128 kernel's prefix steps: verify_wg.cuh, S8).
//
// Shared-memory layout of every operand ("SW128"): a tile of R rows x 64 16-bit elements (128 bytes a row)
// stores element chunk c (16 bytes, 8 elements) of row r at r * 128 + ((c ^ (r % 8)) * 16), rows at a
// 128-byte stride, so 8 rows form a 1024-byte swizzle atom; tiles must start on 1024-byte boundaries. A
// 576-wide MLA row is 9 such tiles of 64 columns, placed one after another (R * 128 bytes apart).
//  - K-major operand (Q as A, K as B of S = Q K^T): the k16 step j of column tile kb starts at
//    tile(kb) + 32 j; the 8-row groups are 1024 bytes apart (SBO); LBO is unused for swizzled K-major.
//  - MN-major operand (V as B of O = P V: N = d runs along a 128-byte row, K = keys down the rows): the k16
//    step kk (keys 16 kk ..) starts at tile + 2048 kk; the two 8-key atoms of a step are 1024 bytes apart
//    (SBO); 64-column N tiles are R * 128 bytes apart (LBO: CUTLASS's meaning; unused by the N = 64 MMAs here,
//    so the GPU test cannot check it).
// These descriptor choices are what tests/gpu/test_wgmma.cu checks on the GPU (it passes on the H200: S and O
// within 1e-6 of float64 with them, 0.95 with the MN-major offsets swapped).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../smem_layout.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FV_HAS_WGMMA 1
#else
#define FV_HAS_WGMMA 0
#endif

// device code built without wgmma must never reach an MMA: it would leave its accumulators unchanged
#if defined(__CUDA_ARCH__)
#define FV_WG_UNAVAILABLE() __trap()
#else
#define FV_WG_UNAVAILABLE() ((void)0)
#endif

namespace fv {
namespace wg {

// Byte offset of 16-byte chunk `c` (0..7) of row `r` inside an SW128 tile (smem_layout.h)
using ::fv::sw128_offset;

// Matrix descriptor: start address, leading / stride byte offsets (all >> 4), 128-byte swizzle (mode 1, bits 62-63)
__device__ __forceinline__ uint64_t desc_sw128(uint32_t smem_byte_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= uint64_t((smem_byte_addr >> 4) & 0x3FFFu);
  d |= uint64_t((lbo_bytes >> 4) & 0x3FFFu) << 16;
  d |= uint64_t((sbo_bytes >> 4) & 0x3FFFu) << 32;
  d |= uint64_t(1) << 62;
  return d;
}

// The descriptor `byte_off` bytes (a multiple of 16) after descriptor d's start address: one 32-bit add on its low
// word. The 14-bit address field cannot carry into the reserved bits 14-15 above it: shared-memory byte addresses are
// below 2^18 (sm_90's 228 KB). desc_sw128(a + off, l, s) == desc_plus(desc_sw128(a, l, s), off) for a + off < 2^18.
__device__ __forceinline__ uint64_t desc_plus(uint64_t d, uint32_t byte_off) {
  const uint32_t lo = static_cast<uint32_t>(d) + (byte_off >> 4), hi = static_cast<uint32_t>(d >> 32);
  return (uint64_t(hi) << 32) | lo;
}

// Shared-memory writes by ordinary stores become visible to wgmma's operand reads (the async proxy) only
// after this fence (cp.async writes too, once waited for)
__device__ __forceinline__ void fence_proxy_async() {
#if FV_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// setmaxnreg: this warpgroup's register budget from here on (INC: raise it, else lower it); every warp of the
// warpgroup executes it
template <int N, bool INC>
__device__ __forceinline__ void set_max_regs() {
#if FV_HAS_WGMMA
  if constexpr (INC) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
  else asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

__device__ __forceinline__ void fence() {
#if FV_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if FV_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wait() {
#if FV_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Accumulator registers must not be touched by other instructions between fence and wait; this keeps the
// compiler from moving their uses across (the same idea as CUTLASS's warpgroup_fence_operand)
__device__ __forceinline__ void fence_operand(float& x) { asm volatile("" : "+f"(x)::"memory"); }
// ... for a whole m64n64 accumulator tile (a thread's 32 registers)
__device__ __forceinline__ void fence_operands(float (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) fence_operand(d[i]);
}
// a zeroed accumulator tile, fenced for the MMAs that accumulate into it
__device__ __forceinline__ void zero_operands(float (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  fence_operands(d);
}

#define FV_WG_D32                                                                                             \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),  \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),   \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),  \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define FV_WG_D32_LIST                                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"

// d (64 x 64 fp32, warp w of the warpgroup holds rows 16 w + g (+ 8): d[4 j + e] is row g + 8 (e / 2), column
// 8 j + 2 t4 + e % 2) += A (64 x 16, K-major SW128) * B (16 x 64: 64 K-major rows of 16), both from shared
// memory. accumulate = 0 overwrites d.
template <class T>
__device__ __forceinline__ void mma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
#if FV_HAS_WGMMA
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FV_WG_D32_LIST ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : FV_WG_D32
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FV_WG_D32_LIST ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : FV_WG_D32
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  }
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  FV_WG_UNAVAILABLE();
#endif
}

// d += A (64 x 16 from registers: the mma.sync m16n8k16 A fragment of the warp's 16 rows, a[0..3]) * B (16 x 64 from
// shared memory, SW128: MN-major with TB = 1, imm-trans-b = 1; K-major, 64 rows of 16, with TB = 0); always accumulates
template <class T, int TB>
__device__ __forceinline__ void mma_m64n64k16_rs_b(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
#if FV_HAS_WGMMA
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FV_WG_D32_LIST
        ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
        : FV_WG_D32
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1), "n"(TB));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FV_WG_D32_LIST
        ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
        : FV_WG_D32
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1), "n"(TB));
  }
#else
  (void)d, (void)a, (void)desc_b;
  FV_WG_UNAVAILABLE();
#endif
}
// B transposed (V in the P V products)
template <class T>
__device__ __forceinline__ void mma_m64n64k16_rs_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  mma_m64n64k16_rs_b<T, 1>(d, a, desc_b);
}
// B K-major (the transposed P V of an fp8 MLA design, bench/NOTES.md v55 plan P3: O^T = V^T P^T, A = V^T widened in
// registers, B = the P tile; tests/gpu/test_wgmma_fp8.cu)
template <class T>
__device__ __forceinline__ void mma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  mma_m64n64k16_rs_b<T, 0>(d, a, desc_b);
}

// d += A (64 x 16, K-major SW128 from shared memory) * B (16 x 64, MN-major SW128: transposed); always
// accumulates
template <class T>
__device__ __forceinline__ void mma_m64n64k16_ss_tb(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
#if FV_HAS_WGMMA
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FV_WG_D32_LIST ", %32, %33, p, 1, 1, 0, 1;\n}\n"
        : FV_WG_D32
        : "l"(desc_a), "l"(desc_b), "r"(1));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FV_WG_D32_LIST ", %32, %33, p, 1, 1, 0, 1;\n}\n"
        : FV_WG_D32
        : "l"(desc_a), "l"(desc_b), "r"(1));
  }
#else
  (void)d, (void)desc_a, (void)desc_b;
  FV_WG_UNAVAILABLE();
#endif
}

// d (as above) += A (64 x 32 fp8 e4m3, K-major SW128: 128 values a 128-byte row) * B (32 x 64 e4m3: 64 K-major rows of
// 32), both from shared memory; the k32 step j of a tile starts 32 j bytes in, as the 16-bit k16 step does (fp8 wgmma
// has no transposed form: both operands K-major). accumulate = 0 overwrites d.
__device__ __forceinline__ void mma_m64n64k32_e4m3_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
#if FV_HAS_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " FV_WG_D32_LIST ", %32, %33, p, 1, 1;\n}\n"
      : FV_WG_D32
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  FV_WG_UNAVAILABLE();
#endif
}

// Wide forms of the two P V products above: one m64nNk16 (N = 128 or 256) over a warpgroup's N / 64 column tiles of O
// instead of N / 64 m64n64k16s, so that an A operand in shared memory is read once a key step (the Hopper kernels' PVW:
// verify_wg.cuh). d is the tiles in column order (accumulator j = 8 nb + j' of the wide form is tile nb's j'), B the
// N / 64 MN-major SW128 tiles LBO bytes apart (desc_sw128's lbo: the tile size); always accumulates.
#define FV_WG_D_TILE(T) \
  "+f"(d[T][0]), "+f"(d[T][1]), "+f"(d[T][2]), "+f"(d[T][3]), "+f"(d[T][4]), "+f"(d[T][5]), "+f"(d[T][6]), \
  "+f"(d[T][7]), "+f"(d[T][8]), "+f"(d[T][9]), "+f"(d[T][10]), "+f"(d[T][11]), "+f"(d[T][12]), "+f"(d[T][13]), \
  "+f"(d[T][14]), "+f"(d[T][15]), "+f"(d[T][16]), "+f"(d[T][17]), "+f"(d[T][18]), "+f"(d[T][19]), "+f"(d[T][20]), \
  "+f"(d[T][21]), "+f"(d[T][22]), "+f"(d[T][23]), "+f"(d[T][24]), "+f"(d[T][25]), "+f"(d[T][26]), "+f"(d[T][27]), \
  "+f"(d[T][28]), "+f"(d[T][29]), "+f"(d[T][30]), "+f"(d[T][31])
#define FV_WG_D_TILES_2 FV_WG_D_TILE(0), FV_WG_D_TILE(1)
#define FV_WG_D_TILES_4 FV_WG_D_TILE(0), FV_WG_D_TILE(1), FV_WG_D_TILE(2), FV_WG_D_TILE(3)
#define FV_WG_D64_LIST \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, " \
  "%60, %61, %62, %63}"
#define FV_WG_D128_LIST \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, " \
  "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, " \
  "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, " \
  "%116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
// One wide P V wgmma of shape SHAPE on 16-bit type TY ("bf16" / "f16"): LIST / OPS the accumulators' PTX list and
// operands, N their count (the operand number of A or of A's descriptor); RS: A from registers, SS: from shared memory
#define FV_WG_PV_RS(SHAPE, TY, LIST, OPS, A0, A1, A2, A3, B, S)                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #S ", 0;\n"                                       \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY " " LIST ", {%" #A0 ", %" #A1 \
               ", %" #A2 ", %" #A3 "}, %" #B ", p, 1, 1, 1;\n}\n"                                       \
               : OPS                                                                                  \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1))
#define FV_WG_PV_SS(SHAPE, TY, LIST, OPS, A, B, S)                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #S ", 0;\n"                                       \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY " " LIST ", %" #A ", %" #B          \
               ", p, 1, 1, 0, 1;\n}\n"                                                                    \
               : OPS                                                                                  \
               : "l"(desc_a), "l"(desc_b), "r"(1))
// O (NT column tiles) += P V with one m64n128k16 (NT = 2) or m64n256k16 (NT = 4); A from registers
template <class T, int NT>
__device__ __forceinline__ void mma_pv_wide_rs_tb(float (&d)[NT][32], const uint32_t (&a)[4], uint64_t desc_b) {
  static_assert(NT == 2 || NT == 4, "m64n128k16 or m64n256k16");
#if FV_HAS_WGMMA
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (NT == 2 && kBf16)
    FV_WG_PV_RS("m64n128k16", "bf16", FV_WG_D64_LIST, FV_WG_D_TILES_2, 64, 65, 66, 67, 68, 69);
  else if constexpr (NT == 2)
    FV_WG_PV_RS("m64n128k16", "f16", FV_WG_D64_LIST, FV_WG_D_TILES_2, 64, 65, 66, 67, 68, 69);
  else if constexpr (kBf16)
    FV_WG_PV_RS("m64n256k16", "bf16", FV_WG_D128_LIST, FV_WG_D_TILES_4, 128, 129, 130, 131, 132, 133);
  else
    FV_WG_PV_RS("m64n256k16", "f16", FV_WG_D128_LIST, FV_WG_D_TILES_4, 128, 129, 130, 131, 132, 133);
#else
  (void)d, (void)a, (void)desc_b;
  FV_WG_UNAVAILABLE();
#endif
}
// ... A from shared memory (desc_a)
template <class T, int NT>
__device__ __forceinline__ void mma_pv_wide_ss_tb(float (&d)[NT][32], uint64_t desc_a, uint64_t desc_b) {
  static_assert(NT == 2 || NT == 4, "m64n128k16 or m64n256k16");
#if FV_HAS_WGMMA
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (NT == 2 && kBf16)
    FV_WG_PV_SS("m64n128k16", "bf16", FV_WG_D64_LIST, FV_WG_D_TILES_2, 64, 65, 66);
  else if constexpr (NT == 2)
    FV_WG_PV_SS("m64n128k16", "f16", FV_WG_D64_LIST, FV_WG_D_TILES_2, 64, 65, 66);
  else if constexpr (kBf16)
    FV_WG_PV_SS("m64n256k16", "bf16", FV_WG_D128_LIST, FV_WG_D_TILES_4, 128, 129, 130);
  else
    FV_WG_PV_SS("m64n256k16", "f16", FV_WG_D128_LIST, FV_WG_D_TILES_4, 128, 129, 130);
#else
  (void)d, (void)desc_a, (void)desc_b;
  FV_WG_UNAVAILABLE();
#endif
}
#undef FV_WG_PV_RS
#undef FV_WG_PV_SS
#undef FV_WG_D_TILE
#undef FV_WG_D_TILES_2
#undef FV_WG_D_TILES_4
#undef FV_WG_D64_LIST
#undef FV_WG_D128_LIST

#undef FV_WG_D32
#undef FV_WG_D32_LIST

}  // namespace wg
}  // namespace fv
