// The Hopper GQA kernels' RING instantiations (verify_wg.cuh: fp8 pools, 2 stages; the planner's Plan::fp8_ring), in
// their own translation unit so that the two wgmma units compile side by side. sm_90a only (CMakeLists.txt).
#include "../verify_wg.cuh"

namespace fv {

template cudaError_t launch_verify_wg_gqa_ring<__nv_bfloat16, 128>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa_ring<__half, 128>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa_ring<__nv_bfloat16, 256>(const VerifyParams&, dim3, cudaStream_t);
template cudaError_t launch_verify_wg_gqa_ring<__half, 256>(const VerifyParams&, dim3, cudaStream_t);

}  // namespace fv
