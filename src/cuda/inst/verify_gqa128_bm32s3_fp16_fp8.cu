// Generated instantiation (fp8 KV pools, with SGLang's score modifiers): configuration kGqa128Bm32S3, fp16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kGqa128Bm32S3, __half, true, true)
}  // namespace fv
