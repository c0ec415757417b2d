// The CUDA side as the host-side API sees it (implemented in src/cuda/*.cu). Plain C++ declarations:
// api.cpp includes no CUDA header.
#pragma once

#include "flashverify/flashverify.h"
#include "plan.h"

namespace fv {

// Properties of the current CUDA device, cached per device ordinal. FV_ERR_NO_DEVICE when there is none.
fv_status cuda_current_device(DeviceProps* props);

// Queues the fast kernel's launches (prepare, split-KV verify, combine) on `stream`.
fv_status cuda_run_fast(const fv_args& args, const Plan& plan, void* workspace, void* stream);

// Index-checking mode: checks every length, slot, page id and parent on the device, synchronises `stream`
// and returns the first bad entry as an error (the CPU validator's message). Refused under capture.
fv_status cuda_check_inputs(const fv_args& args, void* stream);

// Queues the naive reference kernel on `stream`.
fv_status cuda_run_naive(const fv_args& args, void* stream);

// The architectures this library was compiled for, e.g. "80;86;89;90;120".
const char* cuda_arch_list();
int cuda_runtime_version();

}  // namespace fv
