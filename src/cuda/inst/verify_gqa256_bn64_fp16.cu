// Generated instantiation: configuration kGqa256Bn64, fp16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kGqa256Bn64, __half, false, false)
}  // namespace fv
