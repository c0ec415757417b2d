// Generated instantiation: configuration kGqa128Bm32S3, bf16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kGqa128Bm32S3, __nv_bfloat16, false, false)
}  // namespace fv
