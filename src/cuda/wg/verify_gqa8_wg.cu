// The 2-stage Hopper GQA kernels for fp8 pools (verify_wg.cuh): a bf16 model's with S8 and without (launch_verify_wg_gqa
// picks one by p.fp8_s8), an fp16 model's. In a translation unit of their own so that the wgmma units compile side by
// side. sm_90a only (CMakeLists.txt).
#include "../verify_wg.cuh"

namespace fv {

template cudaError_t launch_verify_wg_gqa<__nv_bfloat16, 128, 2, true>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__half, 128, 2, true>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__nv_bfloat16, 256, 2, true>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa<__half, 256, 2, true>(const VerifyParams&, dim3, cudaStream_t);

}  // namespace fv
