// Generated instantiation (with SGLang's score modifiers): configuration kMlaSmall, fp16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kMlaSmall, __half, true, false)
}  // namespace fv
