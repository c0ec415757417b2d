// Generated instantiation: configuration kMlaSmall, bf16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kMlaSmall, __nv_bfloat16, false, false)
}  // namespace fv
