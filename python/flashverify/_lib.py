"""ctypes mirror of include/flashverify/flashverify.h and the library loader.

The structs here must match the header field for field; `load()` compares their sizes with the
library's own (`fv_struct_sizes`) and refuses a mismatch.
"""
from __future__ import annotations

import ctypes
import glob
import os
from typing import List, Optional

# ---- enums (flashverify.h)
FV_OK = 0
STATUS_NAMES = {
    0: "FV_OK", 1: "FV_ERR_NULL_POINTER", 2: "FV_ERR_INVALID_VALUE", 3: "FV_ERR_HEAD_COUNT",
    4: "FV_ERR_UNSUPPORTED_HEAD_DIM", 5: "FV_ERR_UNSUPPORTED_DTYPE", 6: "FV_ERR_BAD_LENGTH",
    7: "FV_ERR_INCONSISTENT_LENGTHS", 8: "FV_ERR_MASK_INDPTR", 9: "FV_ERR_BAD_STRIDE",
    10: "FV_ERR_WORKSPACE_TOO_SMALL", 11: "FV_ERR_UNSUPPORTED", 12: "FV_ERR_NO_DEVICE", 13: "FV_ERR_CUDA",
    14: "FV_ERR_BAD_INDEX", 15: "FV_ERR_BAD_MASK", 16: "FV_ERR_INTERNAL",
}

DTYPE_BF16, DTYPE_FP16, DTYPE_FP32, DTYPE_FP64, DTYPE_FP8_E4M3 = 1, 2, 3, 4, 5
INDEX_INT32, INDEX_INT64 = 0, 1
DEVICE_CUDA, DEVICE_CPU = 0, 1
IMPL_AUTO, IMPL_FAST, IMPL_NAIVE, IMPL_ORACLE = 0, 1, 2, 3
MASK_BYTES, MASK_BITS, MASK_PARENTS, MASK_CAUSAL = 0, 1, 2, 3
KV_TOKEN_SLOTS, KV_PAGE_TABLE = 0, 1
PROFILE_AUTO, PROFILE_SMALL_SMEM, PROFILE_LARGE_SMEM = 0, 1, 2
FLAG_CHECK_INDICES = 1


class FvIndex(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("reserved", ctypes.c_int32)]


class FvProblem(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_int32), ("impl", ctypes.c_int32), ("dtype", ctypes.c_int32),
        ("out_dtype", ctypes.c_int32), ("batch_size", ctypes.c_int32), ("max_draft", ctypes.c_int32),
        ("num_q_heads", ctypes.c_int32), ("num_kv_heads", ctypes.c_int32), ("head_dim_qk", ctypes.c_int32),
        ("head_dim_v", ctypes.c_int32), ("mask_kind", ctypes.c_int32), ("kv_addressing", ctypes.c_int32),
        ("page_size", ctypes.c_int32), ("num_kv_splits", ctypes.c_int32), ("profile", ctypes.c_int32),
        ("flags", ctypes.c_int32), ("kv_dtype", ctypes.c_int32),
    ]


_i64 = ctypes.c_int64
_ptr = ctypes.c_void_p


class FvArgs(ctypes.Structure):
    _fields_ = [
        ("problem", FvProblem),
        ("q", _ptr), ("q_stride_token", _i64), ("q_stride_head", _i64),
        ("out", _ptr), ("out_stride_token", _i64), ("out_stride_head", _i64),
        ("lse", _ptr), ("lse_stride_token", _i64),
        ("k_draft", _ptr), ("k_draft_stride_token", _i64), ("k_draft_stride_head", _i64),
        ("v_draft", _ptr), ("v_draft_stride_token", _i64), ("v_draft_stride_head", _i64),
        ("k_pool", _ptr), ("k_pool_stride_slot", _i64), ("k_pool_stride_head", _i64),
        ("v_pool", _ptr), ("v_pool_stride_slot", _i64), ("v_pool_stride_head", _i64),
        ("num_slots", _i64),
        ("qo_indptr", FvIndex), ("kv_indptr", FvIndex), ("kv_indices", FvIndex),
        ("page_table", _ptr), ("page_table_stride", _i64),
        ("custom_mask", _ptr), ("mask_indptr", FvIndex),
        ("mask_bits", _ptr), ("mask_bits_stride", _i64),
        ("parents", _ptr),
        ("sm_scale", ctypes.c_float),
        ("logit_cap", ctypes.c_float), ("sliding_window", ctypes.c_int32), ("xai_temperature_len", ctypes.c_int32),
        ("sinks", _ptr), ("window_kv_offsets", _ptr),
        ("k_scale", ctypes.c_float), ("v_scale", ctypes.c_float),
    ]


class FlashVerifyError(RuntimeError):
    """A status other than FV_OK from the library; `status` is its name, the message names the argument."""

    def __init__(self, status: int, message: str):
        self.status = STATUS_NAMES.get(status, str(status))
        self.code = status
        super().__init__(f"{self.status}: {message}")


class LibraryNotFound(ImportError):
    pass


_LIB: Optional[ctypes.CDLL] = None


def candidate_paths() -> List[str]:
    """Where the library is looked for, in order."""
    paths = []
    env = os.environ.get("FLASHVERIFY_LIBRARY")
    if env:
        paths.append(env)
    here = os.path.dirname(os.path.abspath(__file__))
    paths += sorted(glob.glob(os.path.join(here, "lib", "libflashverify.so*")))
    # a development checkout: <repo>/python/flashverify -> <repo>/build*/libflashverify.so
    repo = os.path.dirname(os.path.dirname(here))
    paths += sorted(glob.glob(os.path.join(repo, "build*", "libflashverify.so")))
    return paths


def load() -> ctypes.CDLL:
    global _LIB
    if _LIB is not None:
        return _LIB
    tried = []
    env = os.environ.get("FLASHVERIFY_LIBRARY")
    if env and not os.path.exists(env):
        # named explicitly: a missing file must not silently load another build
        raise LibraryNotFound(f"FLASHVERIFY_LIBRARY={env}: no such file")
    for path in candidate_paths():
        if not os.path.exists(path):
            tried.append(f"{path} (missing)")
            continue
        lib = ctypes.CDLL(path)
        _declare(lib)
        pb, ab = ctypes.c_size_t(), ctypes.c_size_t()
        lib.fv_struct_sizes(ctypes.byref(pb), ctypes.byref(ab))
        if pb.value != ctypes.sizeof(FvProblem) or ab.value != ctypes.sizeof(FvArgs):
            raise ImportError(
                f"{path}: struct sizes differ from the Python mirror (fv_problem {pb.value} vs "
                f"{ctypes.sizeof(FvProblem)}, fv_args {ab.value} vs {ctypes.sizeof(FvArgs)}): "
                "library and package come from different versions")
        _LIB = lib
        return lib
    raise LibraryNotFound(
        "libflashverify.so not found; set FLASHVERIFY_LIBRARY or `pip install .`. Tried: "
        + (", ".join(tried) if tried else "no candidate paths"))


def _declare(lib: ctypes.CDLL) -> None:
    lib.fv_problem_init.argtypes = [ctypes.POINTER(FvProblem)]
    lib.fv_problem_init.restype = None
    lib.fv_args_init.argtypes = [ctypes.POINTER(FvArgs)]
    lib.fv_args_init.restype = None
    lib.fv_workspace_size.argtypes = [ctypes.POINTER(FvProblem), ctypes.POINTER(ctypes.c_size_t)]
    lib.fv_workspace_size.restype = ctypes.c_int
    lib.fv_run.argtypes = [ctypes.POINTER(FvArgs), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    lib.fv_run.restype = ctypes.c_int
    lib.fv_status_string.argtypes = [ctypes.c_int]
    lib.fv_status_string.restype = ctypes.c_char_p
    lib.fv_last_error.argtypes = []
    lib.fv_last_error.restype = ctypes.c_char_p
    lib.fv_version.argtypes = []
    lib.fv_version.restype = ctypes.c_int32
    lib.fv_build_info.argtypes = []
    lib.fv_build_info.restype = ctypes.c_char_p
    lib.fv_struct_sizes.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    lib.fv_struct_sizes.restype = None


def check(status: int) -> None:
    if status != FV_OK:
        raise FlashVerifyError(status, load().fv_last_error().decode())


def new_args() -> FvArgs:
    a = FvArgs()
    load().fv_args_init(ctypes.byref(a))
    return a


def workspace_size(problem: FvProblem) -> int:
    n = ctypes.c_size_t()
    check(load().fv_workspace_size(ctypes.byref(problem), ctypes.byref(n)))
    return n.value


def run(args: FvArgs, workspace_ptr: int, workspace_bytes: int, stream: int) -> None:
    check(load().fv_run(ctypes.byref(args), ctypes.c_void_p(workspace_ptr or None), workspace_bytes,
                        ctypes.c_void_p(stream or None)))
