// Generated instantiation (fp8 KV pools, 64-key compact steps: verify_kernel_narrow): configuration kGqa128Bm32S3, fp16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY_NARROW(kGqa128Bm32S3, __half)
}  // namespace fv
