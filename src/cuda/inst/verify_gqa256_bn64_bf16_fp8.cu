// Generated instantiation (fp8 KV pools, with SGLang's score modifiers): configuration kGqa256Bn64, bf16.
#include "../verify_launch.cuh"

namespace fv {
FV_INSTANTIATE_VERIFY(kGqa256Bn64, __nv_bfloat16, true, true)
}  // namespace fv
