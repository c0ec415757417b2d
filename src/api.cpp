// The C ABI: validate, plan, dispatch. Nothing throws across it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "common.h"
#include "cuda/launch.h"
#include "plan.h"

namespace fv {
namespace {

fv_status plan_for(const fv_problem& p, const char* fn, Plan* plan) {
  DeviceProps props;
  const bool needs_device = p.device == FV_DEVICE_CUDA;
  if (needs_device) {
    fv_status st = cuda_current_device(&props);
    if (st != FV_OK) return st;
  }
  fv_status st = make_plan(p, props, plan);
  if (st != FV_OK) {
    std::string msg = std::string(fn) + ": " + fv_last_error();
    return fail(st, "%s", msg.c_str());
  }
  return FV_OK;
}

template <class F>
fv_status guarded(const char* fn, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(FV_ERR_INTERNAL, "%s: out of host memory", fn);
  } catch (const std::exception& e) {
    return fail(FV_ERR_INTERNAL, "%s: %s", fn, e.what());
  } catch (...) {
    return fail(FV_ERR_INTERNAL, "%s: unknown exception", fn);
  }
}

}  // namespace

bool check_mode_from_env() {
  // exactly "1", as documented ("false", "off" or "no" must not turn on a mode that refuses every captured call)
  static const bool on = fv::env_is_1("FLASHVERIFY_CHECK");
  return on;
}

}  // namespace fv

extern "C" {

FV_API void fv_problem_init(fv_problem* p) {
  if (!p) return;
  std::memset(p, 0, sizeof *p);
  p->device = FV_DEVICE_CUDA;
  p->impl = FV_IMPL_AUTO;
  p->mask_kind = FV_MASK_BYTES;
  p->kv_addressing = FV_KV_TOKEN_SLOTS;
  p->page_size = 1;
  p->profile = FV_PROFILE_AUTO;
}

FV_API void fv_args_init(fv_args* a) {
  if (!a) return;
  std::memset(a, 0, sizeof *a);
  fv_problem_init(&a->problem);
}

FV_API fv_status fv_workspace_size(const fv_problem* problem, size_t* bytes) {
  const char* fn = "fv_workspace_size";
  return fv::guarded(fn, [&]() -> fv_status {
    if (!problem) return fv::fail(FV_ERR_NULL_POINTER, "%s: problem is NULL", fn);
    if (!bytes) return fv::fail(FV_ERR_NULL_POINTER, "%s: bytes is NULL", fn);
    *bytes = 0;
    fv_status st = fv::validate_problem(*problem, fn);
    if (st != FV_OK) return st;
    fv::Plan plan;
    st = fv::plan_for(*problem, fn, &plan);
    if (st != FV_OK) return st;
    *bytes = plan.total;
    return FV_OK;
  });
}

FV_API fv_status fv_plan_config(const fv_problem* problem, char* name, size_t size) {
  const char* fn = "fv_plan_config";
  return fv::guarded(fn, [&]() -> fv_status {
    if (!problem) return fv::fail(FV_ERR_NULL_POINTER, "%s: problem is NULL", fn);
    if (!name) return fv::fail(FV_ERR_NULL_POINTER, "%s: name is NULL", fn);
    if (size == 0) return fv::fail(FV_ERR_INVALID_VALUE, "%s: size is 0", fn);
    name[0] = '\0';
    fv_status st = fv::validate_problem(*problem, fn);
    if (st != FV_OK) return st;
    fv::Plan plan;
    st = fv::plan_for(*problem, fn, &plan);
    if (st != FV_OK) return st;
    if (problem->device == FV_DEVICE_CUDA && plan.impl != FV_IMPL_NAIVE && plan.cfg == nullptr)
      return fv::fail(FV_ERR_INTERNAL, "%s: the plan has no tile configuration", fn);
    const char* n = problem->device == FV_DEVICE_CPU ? "oracle" : plan.impl == FV_IMPL_NAIVE ? "naive" : plan.cfg->name;
    const size_t len = std::strlen(n);
    if (len >= size)
      return fv::fail(FV_ERR_INVALID_VALUE, "%s: the name '%s' needs %zu bytes, size is %zu", fn, n, len + 1, size);
    std::memcpy(name, n, len + 1);
    return FV_OK;
  });
}

FV_API fv_status fv_run(const fv_args* args, void* workspace, size_t workspace_bytes, void* stream) {
  const char* fn = "fv_run";
  return fv::guarded(fn, [&]() -> fv_status {
    if (!args) return fv::fail(FV_ERR_NULL_POINTER, "%s: args is NULL", fn);
    fv_status st = fv::validate_args(*args, fn);
    if (st != FV_OK) return st;
    const fv_problem& p = args->problem;
    fv::Plan plan;
    st = fv::plan_for(p, fn, &plan);
    if (st != FV_OK) return st;
    if (workspace_bytes < plan.total)
      return fv::fail(FV_ERR_WORKSPACE_TOO_SMALL, "%s: workspace_bytes (%zu) is less than the %zu this problem needs",
                      fn, workspace_bytes, plan.total);
    if (plan.total > 0 && workspace == nullptr)
      return fv::fail(FV_ERR_NULL_POINTER, "%s: workspace is NULL but %zu bytes are needed", fn, plan.total);
    // the kernels read and write it in 16-byte vectors (and bulk copies) at offsets the plan aligns to 256 bytes
    if (plan.total > 0 && reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
      return fv::fail(FV_ERR_BAD_STRIDE, "%s: workspace (%p) must be 16-byte aligned (cudaMalloc's pointers are)", fn,
                      workspace);
    if (p.device == FV_DEVICE_CPU) {
      st = fv::validate_device_data(*args, fn);
      if (st != FV_OK) return st;
      return fv::run_reference(*args);
    }
    if (p.batch_size == 0) return FV_OK;
    if ((p.flags & FV_FLAG_CHECK_INDICES) || fv::check_mode_from_env()) {
      st = fv::cuda_check_inputs(*args, stream);
      if (st != FV_OK) return st;
    }
    if (plan.impl == FV_IMPL_NAIVE) return fv::cuda_run_naive(*args, stream);
    return fv::cuda_run_fast(*args, plan, workspace, stream);
  });
}

FV_API const char* fv_status_string(fv_status s) {
  switch (s) {
    case FV_OK: return "success";
    case FV_ERR_NULL_POINTER: return "a required pointer is NULL";
    case FV_ERR_INVALID_VALUE: return "a value is outside its range";
    case FV_ERR_HEAD_COUNT: return "num_q_heads is not a positive multiple of num_kv_heads";
    case FV_ERR_UNSUPPORTED_HEAD_DIM: return "unsupported head dimensions";
    case FV_ERR_UNSUPPORTED_DTYPE: return "unsupported data type";
    case FV_ERR_BAD_LENGTH: return "a negative or out-of-range length";
    case FV_ERR_INCONSISTENT_LENGTHS: return "lengths are inconsistent";
    case FV_ERR_MASK_INDPTR: return "mask_indptr disagrees with the lengths";
    case FV_ERR_BAD_STRIDE: return "a stride or alignment is invalid";
    case FV_ERR_WORKSPACE_TOO_SMALL: return "the workspace is too small";
    case FV_ERR_UNSUPPORTED: return "unsupported combination";
    case FV_ERR_NO_DEVICE: return "no usable CUDA device";
    case FV_ERR_CUDA: return "a CUDA call failed";
    case FV_ERR_BAD_INDEX: return "an index is out of range";
    case FV_ERR_BAD_MASK: return "the tree mask is not a tree";
    case FV_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

FV_API const char* fv_last_error(void) { return fv::last_error(); }

FV_API int32_t fv_version(void) {
  return (FLASHVERIFY_VERSION_MAJOR << 16) | (FLASHVERIFY_VERSION_MINOR << 8) | FLASHVERIFY_VERSION_PATCH;
}

FV_API const char* fv_build_info(void) {
  static const std::string info = [] {
    char buf[256];
    const int rt = fv::cuda_runtime_version();
    std::snprintf(buf, sizeof buf, "flashverify %d.%d.%d, CUDA %d.%d, sm %s", FLASHVERIFY_VERSION_MAJOR,
                  FLASHVERIFY_VERSION_MINOR, FLASHVERIFY_VERSION_PATCH, rt / 1000, (rt % 1000) / 10,
                  fv::cuda_arch_list());
    return std::string(buf);
  }();
  return info.c_str();
}

FV_API void fv_struct_sizes(size_t* problem_bytes, size_t* args_bytes) {
  if (problem_bytes) *problem_bytes = sizeof(fv_problem);
  if (args_bytes) *args_bytes = sizeof(fv_args);
}

}  // extern "C"
