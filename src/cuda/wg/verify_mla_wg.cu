// The Hopper MLA kernels' instantiations (verify_wg.cuh) and the GQA kernels' except the 2-stage fp8 ones
// (verify_gqa8_wg.cu) and RING (verify_gqa_ring.cu). Compiled for sm_90a only (CMakeLists.txt: the flashverify_wg
// object library), as wgmma exists on no other target.
#include "../verify_wg.cuh"

namespace fv {

template cudaError_t launch_verify_wg<__nv_bfloat16, false>(const VerifyParams&, bool, dim3, cudaStream_t);
template cudaError_t launch_verify_wg<__half, false>(const VerifyParams&, bool, dim3, cudaStream_t);
template cudaError_t launch_verify_wg<__nv_bfloat16, true>(const VerifyParams&, bool, dim3, cudaStream_t);
template cudaError_t launch_verify_wg<__half, true>(const VerifyParams&, bool, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__nv_bfloat16, 128, 2, false>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__half, 128, 2, false>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__nv_bfloat16, 128, 5, false>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__half, 128, 5, false>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__nv_bfloat16, 128, 5, true>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__half, 128, 5, true>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__nv_bfloat16, 256, 2, false>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__half, 256, 2, false>(const VerifyParams&, dim3, cudaStream_t);

}  // namespace fv
