// What `mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32` compiles to on each architecture (no GPU needed):
//   for a in 89 90 120; do nvcc -arch=sm_$a -c bench/probes/mma_e4m3_probe.cu -o /tmp/m$a.o &&
//     cuobjdump -sass /tmp/m$a.o | grep -oE 'QMMA[^ ]*|HMMA[^ ]*|F2FP[^ ]*' | sort | uniq -c; done
// CUDA 13.0 (v18): sm_89 and sm_120 one QMMA.16832.F32.E4M3.E4M3 (native); sm_90 12 F2FP.F16.E4M3.UNPACK_B and
// 2 HMMA.16816.F32 (emulated: the H200 has e4m3 tensor math only through wgmma).
#include <cstdint>
__global__ void k(const uint32_t* a, const uint32_t* b, float* c) {
  uint32_t a0 = a[threadIdx.x], a1 = a[threadIdx.x + 32], a2 = a[threadIdx.x + 64], a3 = a[threadIdx.x + 96];
  uint32_t b0 = b[threadIdx.x], b1 = b[threadIdx.x + 32];
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  c[threadIdx.x * 4] = d0; c[threadIdx.x * 4 + 1] = d1; c[threadIdx.x * 4 + 2] = d2; c[threadIdx.x * 4 + 3] = d3;
}
