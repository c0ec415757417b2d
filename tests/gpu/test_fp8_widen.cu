// The fast kernel's in-register fp8 widening (src/cuda/mma.cuh, e4m3x4_frag) against cuda_fp8.h's scalar
// conversion, for every e4m3 code in each of the four byte positions of a word, in both model dtypes. The
// random problems cannot show a wrong subnormal or a wrong large exponent: their codes span 2^-9 .. 1.875
// and the relative L2 bound hides the small ones.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <vector>

#include "../../src/cuda/mma.cuh"
#include "gpu_common.h"

namespace {

// out[w * 4 + j]: the value e4m3x4_frag gives for byte j of word w (bits of T); word w holds code w in byte
// w % 4 and three other codes around it
template <class T>
__global__ void widen_all_codes(uint16_t* out) {
  const int w = blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= 1024) return;
  const uint32_t c = w & 255, pos = w >> 8;
  uint32_t word = 0;
  for (uint32_t j = 0; j < 4; ++j) word |= ((j == pos ? c : (c * 37u + 11u * j + 5u) & 255u)) << (8 * j);
  uint32_t even, odd;
  fv::e4m3x4_frag<T>(word, even, odd);
  out[w * 4 + 0] = static_cast<uint16_t>(even & 0xffffu);  // x0
  out[w * 4 + 2] = static_cast<uint16_t>(even >> 16);      // x2
  out[w * 4 + 1] = static_cast<uint16_t>(odd & 0xffffu);   // x1
  out[w * 4 + 3] = static_cast<uint16_t>(odd >> 16);       // x3
}

float e4m3_to_float(uint32_t code) {  // OCP e4m3: bias 7, S.1111.111 NaN, subnormals m * 2^-9
  const uint32_t e = (code >> 3) & 15, m = code & 7;
  float v;
  if (e == 15 && m == 7) v = NAN;
  else if (e == 0) v = std::ldexp(static_cast<float>(m), -9);
  else v = std::ldexp(1.f + m / 8.f, static_cast<int>(e) - 7);
  return (code & 0x80) ? -v : v;
}


template <class T>
void check_codes(bool fp16) {
  uint16_t* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4096 * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0xff, 4096 * 2), cudaSuccess);
  widen_all_codes<T><<<4, 256>>>(d);
  std::vector<uint16_t> h(4096);
  ASSERT_EQ(cudaMemcpy(h.data(), d, 4096 * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  int bad = 0, checked = 0;
  for (uint32_t w = 0; w < 1024; ++w) {
    const uint32_t c = w & 255, pos = w >> 8;
    for (uint32_t j = 0; j < 4; ++j) {
      const uint32_t code = j == pos ? c : (c * 37u + 11u * j + 5u) & 255u;
      const float got = fvt::bits_to_float(h[w * 4 + j], fp16 ? FV_DTYPE_FP16 : FV_DTYPE_BF16), want = e4m3_to_float(code);
      bool ok;
      if (std::isnan(want)) ok = fp16 ? std::isnan(got) : got == ((code & 0x80) ? -480.f : 480.f);  // flashverify.h, kv_dtype
      else ok = got == want && std::signbit(got) == std::signbit(want);
      ++checked;
      if (!ok && ++bad <= 5)
        ADD_FAILURE() << (fp16 ? "fp16" : "bf16") << ": code 0x" << std::hex << code << std::dec << " in byte " << j
                      << " widened to " << got << ", want " << want;
    }
  }
  EXPECT_EQ(bad, 0) << bad << " of " << checked << " widened values wrong";
  std::printf("[ fp8      ] %s: %d widened values (every code in every byte position) exact\n", fp16 ? "fp16" : "bf16",
              checked - bad);
}

TEST(Fp8, InRegisterWideningIsExactForEveryCode) {
  REQUIRE_GPU();
  ASSERT_NO_FATAL_FAILURE(check_codes<__nv_bfloat16>(false));
  ASSERT_NO_FATAL_FAILURE(check_codes<__half>(true));
}

}  // namespace
