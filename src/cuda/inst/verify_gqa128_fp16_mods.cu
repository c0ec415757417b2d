// Generated instantiation (with SGLang's score modifiers): configuration kGqa128, fp16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kGqa128, __half, true, false)
}  // namespace fv
