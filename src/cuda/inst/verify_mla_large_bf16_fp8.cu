// Generated instantiation (fp8 KV pools, with SGLang's score modifiers): configuration kMlaLarge, bf16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kMlaLarge, __nv_bfloat16, true, true)
}  // namespace fv
