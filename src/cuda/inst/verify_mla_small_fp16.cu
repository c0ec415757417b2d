// Generated instantiation: configuration kMlaSmall, fp16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kMlaSmall, __half, false, false)
}  // namespace fv
