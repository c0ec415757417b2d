// Generated instantiation: configuration kGqa256Bn64, bf16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kGqa256Bn64, __nv_bfloat16, false, false)
}  // namespace fv
