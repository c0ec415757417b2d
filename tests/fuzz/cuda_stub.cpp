// The CUDA side for the fuzz build (clang, no nvcc): planning sees an H200, so the CUDA path's validation
// and planner run; launching reports that there is no device.
#include "common.h"
#include "cuda/launch.h"

namespace fv {

fv_status cuda_current_device(DeviceProps* props) {
  *props = DeviceProps{132, 232448, 233472, 9, 0};
  return FV_OK;
}

fv_status cuda_run_fast(const fv_args&, const Plan&, void*, void*) {
  return fail(FV_ERR_NO_DEVICE, "fv_run: fuzz build has no CUDA device");
}

fv_status cuda_check_inputs(const fv_args&, void*) { return fail(FV_ERR_NO_DEVICE, "fv_run: fuzz build has no CUDA device"); }

fv_status cuda_run_naive(const fv_args&, void*) { return fail(FV_ERR_NO_DEVICE, "fv_run: fuzz build has no CUDA device"); }

const char* cuda_arch_list() { return "none (fuzz build)"; }

int cuda_runtime_version() { return 0; }

}  // namespace fv
