// Launcher of one verify-kernel instantiation. Each (configuration, dtype) pair is compiled in its own
// file under inst/ so the heavy instantiations build in parallel.
#pragma once

#include <cuda_runtime.h>

#include "verify.cuh"

namespace fv {

// MODS selects the instantiation with SGLang's score modifiers (p.mods), KV8 the one for fp8 KV pools.
template <int CFG, class T, bool MODS, bool KV8>
cudaError_t launch_verify(const VerifyParams& p, dim3 grid, cudaStream_t stream) {
  constexpr TileConfig C = kTileConfigs[CFG];
  return launch_with_smem(verify_kernel<CFG, T, MODS, KV8>, grid, C.threads(), C.smem_bytes(), p, stream);
}

// the attributes of the kernel the device loaded (the device query reads its PTX version: cuda_current_device)
template <int CFG, class T, bool MODS, bool KV8>
cudaError_t verify_kernel_attributes(cudaFuncAttributes* fa) {
  return cudaFuncGetAttributes(fa, verify_kernel<CFG, T, MODS, KV8>);
}

#define FV_INSTANTIATE_VERIFY(CFG, T, MODS, KV8) \
  template cudaError_t launch_verify<CFG, T, MODS, KV8>(const VerifyParams&, dim3, cudaStream_t);
// (only the instantiations the device query reads: kMlaLarge bf16, in its unit)
#define FV_INSTANTIATE_VERIFY_ATTRIBUTES(CFG, T, MODS, KV8) \
  template cudaError_t verify_kernel_attributes<CFG, T, MODS, KV8>(cudaFuncAttributes*);

// the fp8 32-row tiles with 64-key compact steps (verify_kernel_narrow)
template <int CFG, class T>
cudaError_t launch_verify_narrow(const VerifyParams& p, dim3 grid, cudaStream_t stream) {
  constexpr TileConfig C = kTileConfigs[CFG];
  return launch_with_smem(verify_kernel_narrow<CFG, T>, grid, C.threads(), C.smem_bytes(), p, stream);
}

#define FV_INSTANTIATE_VERIFY_NARROW(CFG, T) \
  template cudaError_t launch_verify_narrow<CFG, T>(const VerifyParams&, dim3, cudaStream_t);

}  // namespace fv
