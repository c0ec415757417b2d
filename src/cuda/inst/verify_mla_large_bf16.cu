// Generated instantiation: configuration kMlaLarge, bf16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kMlaLarge, __nv_bfloat16, false, false)
FV_INSTANTIATE_VERIFY_ATTRIBUTES(kMlaLarge, __nv_bfloat16, false, false)
}  // namespace fv
