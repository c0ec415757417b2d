// Generated instantiation: configuration kMlaLarge, fp16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kMlaLarge, __half, false, false)
}  // namespace fv
