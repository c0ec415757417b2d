// Generated instantiation: configuration kGqa64, fp16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kGqa64, __half, false, false)
}  // namespace fv
