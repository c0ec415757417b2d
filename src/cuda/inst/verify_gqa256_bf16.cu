// Generated instantiation: configuration kGqa256, bf16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kGqa256, __nv_bfloat16, false, false)
}  // namespace fv
