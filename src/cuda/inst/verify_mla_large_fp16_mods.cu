// Generated instantiation (with SGLang's score modifiers): configuration kMlaLarge, fp16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kMlaLarge, __half, true, false)
}  // namespace fv
