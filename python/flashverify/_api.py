"""Argument checking and the two entry points: `reference` (numpy, the float64 CPU oracle) and
`verify_attention` (torch, CUDA). Both describe one verify call the way SGLang hands it over; see
include/flashverify/flashverify.h for the semantics of every field."""
from __future__ import annotations

import ctypes
import sys
from typing import Any, Optional, Sequence, Tuple

from . import _lib

SUPPORTED_HEAD_DIMS = ((576, 512), (64, 64), (128, 128), (256, 256))


# ---------------------------------------------------------------------------------------------------
# a minimal view of numpy arrays and torch tensors: pointer, dtype name, shape, element strides, device

_TORCH_DTYPE_NAMES = {}  # torch dtype -> its name without "torch." (str() of a dtype costs a microsecond a call)


class _T:
    __slots__ = ("name", "obj", "ptr", "dtype", "shape", "strides", "device", "dev_index", "is_torch")

    def __init__(self, name: str, obj: Any):
        self.name, self.obj = name, obj
        torch = sys.modules.get("torch")
        mod = type(obj).__module__
        # (a torch.Tensor subclass defined outside torch included; the module test keeps the tests' stand-ins)
        if (torch is not None and isinstance(obj, torch.Tensor)) or mod.startswith("torch"):
            self.is_torch = True
            self.ptr = obj.data_ptr()
            dtype = obj.dtype
            name = _TORCH_DTYPE_NAMES.get(dtype)
            if name is None:
                name = _TORCH_DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
            self.dtype = name
            self.shape = tuple(obj.shape)
            self.strides = obj.stride()
            if obj.is_cuda:
                self.device, self.dev_index = "cuda", obj.get_device()
            else:
                self.device, self.dev_index = str(obj.device), None
        elif mod.startswith("numpy"):
            self.is_torch = False
            self.ptr = obj.ctypes.data
            self.dtype = "bool" if obj.dtype.kind == "b" else str(obj.dtype)
            self.shape = tuple(obj.shape)
            # the C ABI takes strides in elements: a byte stride (or an address) off the item size, e.g. a field of a
            # structured array, has none
            if any(s % obj.itemsize for s in obj.strides) or self.ptr % obj.itemsize:
                raise ValueError(f"{name}: strides {list(obj.strides)} (bytes) or its address are not multiples of its "
                                 f"item size ({obj.itemsize}): copy it (np.ascontiguousarray)")
            self.strides = tuple(s // obj.itemsize for s in obj.strides)
            self.device = "cpu"
            self.dev_index = None
        else:
            raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(obj).__name__}")


def _wrap(name: str, obj: Any) -> Optional[_T]:
    return None if obj is None else _T(name, obj)


def _require_rank(t: _T, rank: int, what: str) -> None:
    if len(t.shape) != rank:
        raise ValueError(f"{t.name}: expected {what} ({rank} dims), got shape {list(t.shape)}")


def _require_last_contiguous(t: _T) -> None:
    if t.shape and t.shape[-1] > 1 and t.strides[-1] != 1:
        raise ValueError(f"{t.name}: the last dimension must be contiguous (stride 1), got strides {list(t.strides)}")


def _require_contiguous_1d(t: _T) -> None:
    """The library reads flat arrays (indices, masks, parents, sinks) as contiguous: a strided view would be read
    wrongly."""
    if t.shape and t.shape[0] > 1 and t.strides[0] != 1:
        raise ValueError(f"{t.name}: must be contiguous, got stride {t.strides[0]}")


def _i32(name: str, v) -> int:
    """An int for a C int32 field: ctypes would wrap a larger one silently (sliding_window = 2**32 + 2 read as 2)."""
    v = int(v)
    if not -2**31 <= v < 2**31:
        raise ValueError(f"{name} = {v} does not fit the C ABI's 32-bit field")
    return v


def _host_int(t: _T, i: int) -> int:
    """Entry i of a host (numpy or CPU torch) index array."""
    return int(t.obj[i])


_FLOAT_CODES = {"bfloat16": _lib.DTYPE_BF16, "float16": _lib.DTYPE_FP16, "float32": _lib.DTYPE_FP32}
_FP8_NAMES = ("uint8", "float8_e4m3fn")  # fp8 e4m3 KV pools


def _index(t: Optional[_T], device: str) -> _lib.FvIndex:
    ix = _lib.FvIndex()
    if t is None:
        return ix
    if t.dtype not in ("int32", "int64"):
        raise TypeError(f"{t.name}: expected int32 or int64, got {t.dtype}")
    if t.device != device:
        raise TypeError(f"{t.name}: is on {t.device}, the call runs on {device}")
    _require_rank(t, 1, "a 1-D index array")
    _require_contiguous_1d(t)
    if t.ptr == 0:
        # (an empty torch tensor has no storage; the C ABI takes a NULL index array as a missing argument)
        raise ValueError(f"{t.name}: has no storage (an empty tensor, data_ptr 0): pass at least one element, "
                         f"e.g. a 1-element array when every prefix is empty")
    ix.data = t.ptr
    ix.dtype = _lib.INDEX_INT64 if t.dtype == "int64" else _lib.INDEX_INT32
    return ix


def build_args(*, device: str, q, k_draft, v_draft, k_pool, v_pool, out, lse, qo_indptr, kv_indptr,
               kv_indices, custom_mask, mask_indptr, mask_bits, parents, causal: bool, page_table,
               page_size: int, sm_scale: float, max_draft: int, impl: int, num_kv_splits: int,
               profile: int, sinks=None, window_kv_offsets=None, logit_cap: float = 0.0,
               sliding_window: int = 0, xai_temperature_len: int = 0, k_scale: float = 1.0,
               v_scale: float = 1.0, check_indices: bool = False) -> Tuple[_lib.FvArgs, list]:
    """Checks every tensor (dtype, device, rank, shapes agreeing, contiguous last dim) and fills fv_args.
    Returns the args and the wrapped tensors (kept alive by the caller)."""
    T = {n: _wrap(n, o) for n, o in dict(
        q=q, k_draft=k_draft, v_draft=v_draft, k_pool=k_pool, v_pool=v_pool, out=out, lse=lse,
        qo_indptr=qo_indptr, kv_indptr=kv_indptr, kv_indices=kv_indices, custom_mask=custom_mask,
        mask_indptr=mask_indptr, mask_bits=mask_bits, parents=parents, page_table=page_table, sinks=sinks,
        window_kv_offsets=window_kv_offsets).items()}
    for name in ("q", "k_draft", "v_draft", "k_pool", "v_pool", "out", "qo_indptr", "kv_indptr"):
        if T[name] is None:
            raise ValueError(f"{name} is required")
    for t in T.values():
        if t is not None and t.device != device:
            raise TypeError(f"{t.name}: is on {t.device}, expected {device}")
    gpus = sorted({t.dev_index for t in T.values() if t is not None and t.dev_index is not None})
    if len(gpus) > 1:
        on = ", ".join(f"{t.name}: cuda:{t.dev_index}" for t in T.values() if t is not None and t.dev_index is not None)
        raise TypeError(f"tensors are on different GPUs ({on}); every tensor of a call must be on q's GPU")

    q_, kd, vd, kp, vp, o = (T[n] for n in ("q", "k_draft", "v_draft", "k_pool", "v_pool", "out"))
    _require_rank(q_, 3, "[tokens, q_heads, head_dim_qk]")
    _require_rank(kd, 3, "[tokens, kv_heads, head_dim_qk]")
    _require_rank(vd, 3, "[tokens, kv_heads, head_dim_v]")
    _require_rank(kp, 3, "[slots, kv_heads, head_dim_qk]")
    _require_rank(vp, 3, "[slots, kv_heads, head_dim_v]")
    _require_rank(o, 3, "[tokens, q_heads, head_dim_v]")
    for t in (q_, kd, vd, kp, vp, o):
        _require_last_contiguous(t)
    tokens, hq, dqk = q_.shape
    hkv, dv = kd.shape[1], vd.shape[2]
    if (dqk, dv) not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"q/v_draft: head dims (qk {dqk}, v {dv}) not supported; supported: {SUPPORTED_HEAD_DIMS}")
    if hkv < 1 or hq % hkv:
        raise ValueError(f"q: {hq} q heads is not a multiple of k_draft's {hkv} kv heads")
    expect = {"k_draft": (tokens, hkv, dqk), "v_draft": (tokens, hkv, dv), "out": (tokens, hq, dv)}
    for name, shape in expect.items():
        if T[name].shape != shape:
            raise ValueError(f"{name}: expected shape {list(shape)} to match q, got {list(T[name].shape)}")
    if kp.shape[1:] != (hkv, dqk) or vp.shape[1:] != (hkv, dv) or vp.shape[0] != kp.shape[0]:
        raise ValueError(f"k_pool/v_pool: expected [slots, {hkv}, {dqk}] and [slots, {hkv}, {dv}], "
                         f"got {list(kp.shape)} and {list(vp.shape)}")
    dt = q_.dtype
    if dt not in _FLOAT_CODES or (device == "cuda" and dt == "float32"):
        raise TypeError(f"q: dtype {dt} not supported on {device} (bfloat16, float16"
                        f"{', float32' if device == 'cpu' else ''})")
    for t in (kd, vd):
        if t.dtype != dt:
            raise TypeError(f"{t.name}: dtype {t.dtype} differs from q's {dt}")
    # the pools: q's dtype, or an fp8 e4m3 KV cache (SGLang stores it as uint8 and views it as float8_e4m3fn)
    kv_fp8 = kp.dtype in _FP8_NAMES
    for t in (kp, vp):
        if t.dtype != dt and t.dtype not in _FP8_NAMES:
            raise TypeError(f"{t.name}: dtype {t.dtype} is neither q's {dt} nor an fp8 e4m3 cache (uint8 / float8_e4m3fn)")
        if (t.dtype in _FP8_NAMES) != kv_fp8:
            raise TypeError(f"k_pool/v_pool: dtypes {kp.dtype} and {vp.dtype} differ")
    out_codes = {**_FLOAT_CODES, "float64": _lib.DTYPE_FP64}
    if o.dtype not in out_codes:
        raise TypeError(f"out: dtype {o.dtype} not supported")
    if T["lse"] is not None:
        if T["lse"].dtype != "float32" or T["lse"].shape != (tokens, hq):
            raise ValueError(f"lse: expected float32 [{tokens}, {hq}], got {T['lse'].dtype} {list(T['lse'].shape)}")
        if hq > 1 and T["lse"].strides[1] != 1:
            raise ValueError(f"lse: the head dimension must be contiguous, got strides {list(T['lse'].strides)}")

    batch = T["qo_indptr"].shape[0] - 1 if len(T["qo_indptr"].shape) == 1 else -1
    if batch < 0:
        raise ValueError(f"qo_indptr: expected [batch + 1], got shape {list(T['qo_indptr'].shape)}")
    for name in ("kv_indptr", "mask_indptr"):
        if T[name] is not None and (len(T[name].shape) != 1 or T[name].shape[0] < batch + 1):
            raise ValueError(f"{name}: has shape {list(T[name].shape)}, batch {batch} needs [{batch + 1}]")

    mask_given = [n for n in ("custom_mask", "mask_bits", "parents") if T[n] is not None]
    if len(mask_given) + bool(causal) != 1:
        raise ValueError("give exactly one tree mask: custom_mask (+ mask_indptr), mask_bits, parents, or "
                         f"causal=True; got {mask_given + (['causal'] if causal else [])}")

    a = _lib.new_args()
    p = a.problem
    p.device = _lib.DEVICE_CUDA if device == "cuda" else _lib.DEVICE_CPU
    p.impl = impl
    p.dtype = _FLOAT_CODES[dt]
    p.out_dtype = out_codes[o.dtype]
    p.batch_size = batch
    p.max_draft = _i32("max_draft", max_draft)
    p.num_q_heads, p.num_kv_heads, p.head_dim_qk, p.head_dim_v = hq, hkv, dqk, dv
    p.num_kv_splits = _i32("num_kv_splits", num_kv_splits)
    p.profile = int(profile)
    p.kv_dtype = _lib.DTYPE_FP8_E4M3 if kv_fp8 else 0
    a.q, a.q_stride_token, a.q_stride_head = q_.ptr, q_.strides[0], q_.strides[1]
    a.out, a.out_stride_token, a.out_stride_head = o.ptr, o.strides[0], o.strides[1]
    if T["lse"] is not None:
        a.lse, a.lse_stride_token = T["lse"].ptr, T["lse"].strides[0]
    a.k_draft, a.k_draft_stride_token, a.k_draft_stride_head = kd.ptr, kd.strides[0], kd.strides[1]
    a.v_draft, a.v_draft_stride_token, a.v_draft_stride_head = vd.ptr, vd.strides[0], vd.strides[1]
    a.k_pool, a.k_pool_stride_slot, a.k_pool_stride_head = kp.ptr, kp.strides[0], kp.strides[1]
    a.v_pool, a.v_pool_stride_slot, a.v_pool_stride_head = vp.ptr, vp.strides[0], vp.strides[1]
    a.num_slots = kp.shape[0]
    a.qo_indptr = _index(T["qo_indptr"], device)
    a.kv_indptr = _index(T["kv_indptr"], device)
    if T["page_table"] is not None and T["kv_indices"] is not None:
        raise ValueError("pass kv_indices (token slots) or page_table, not both")
    if T["mask_indptr"] is not None and T["custom_mask"] is None:
        raise ValueError("mask_indptr applies to custom_mask (SGLang's byte mask) only")
    if T["page_table"] is not None:
        pt = T["page_table"]
        if pt.dtype != "int32" or len(pt.shape) != 2 or pt.strides[1] != 1 or pt.shape[0] < batch:
            raise ValueError(f"page_table: expected a row-major int32 [{batch} (batch), pages], got {pt.dtype} "
                             f"{list(pt.shape)} strides {list(pt.strides)}")
        p.kv_addressing = _lib.KV_PAGE_TABLE
        p.page_size = _i32("page_size", page_size)
        a.page_table, a.page_table_stride = pt.ptr, pt.strides[0]
    else:
        if T["kv_indices"] is None:
            raise ValueError("kv_indices is required (or page_table)")
        a.kv_indices = _index(T["kv_indices"], device)
    if T["custom_mask"] is not None:
        cm = T["custom_mask"]
        if cm.dtype not in ("uint8", "bool") or len(cm.shape) != 1:
            raise TypeError(f"custom_mask: expected a flat uint8 or bool array, got {cm.dtype} {list(cm.shape)}")
        _require_contiguous_1d(cm)
        if T["mask_indptr"] is None:
            raise ValueError("custom_mask needs mask_indptr")
        p.mask_kind = _lib.MASK_BYTES
        a.custom_mask = cm.ptr
        a.mask_indptr = _index(T["mask_indptr"], device)
    elif T["mask_bits"] is not None:
        mb = T["mask_bits"]
        words = (int(max_draft) + 31) // 32
        if mb.dtype not in ("int32", "uint32") or len(mb.shape) != 2 or mb.strides[1] != 1:
            raise TypeError(f"mask_bits: expected int32/uint32 [tokens, words], got {mb.dtype} {list(mb.shape)}")
        if mb.shape[0] < tokens or mb.shape[1] < words:
            raise ValueError(f"mask_bits: expected at least [{tokens}, {words}] (q's rows, max_draft {max_draft} bits), "
                             f"got {list(mb.shape)}")
        p.mask_kind = _lib.MASK_BITS
        a.mask_bits, a.mask_bits_stride = mb.ptr, mb.strides[0]
    elif T["parents"] is not None:
        pa = T["parents"]
        if pa.dtype != "int32" or pa.shape != (tokens,):
            raise TypeError(f"parents: expected int32 [{tokens}], got {pa.dtype} {list(pa.shape)}")
        _require_contiguous_1d(pa)
        p.mask_kind = _lib.MASK_PARENTS
        a.parents = pa.ptr
    else:
        p.mask_kind = _lib.MASK_CAUSAL
    a.sm_scale = float(sm_scale)
    # SGLang's score modifiers
    if T["sinks"] is not None:
        sk = T["sinks"]
        if sk.dtype != "float32" or sk.shape != (hq,):
            raise TypeError(f"sinks: expected float32 [{hq}] (one per q head), got {sk.dtype} {list(sk.shape)}")
        _require_contiguous_1d(sk)
        a.sinks = sk.ptr
    if T["window_kv_offsets"] is not None:
        wo = T["window_kv_offsets"]
        if wo.dtype != "int32" or len(wo.shape) != 1 or wo.shape[0] < batch or (batch > 1 and wo.strides[0] != 1):
            raise TypeError(f"window_kv_offsets: expected contiguous int32 [{batch}], got {wo.dtype} {list(wo.shape)}")
        if p.mask_kind != _lib.MASK_BYTES:
            raise ValueError("window_kv_offsets: applies to custom_mask (SGLang's byte mask) only")
        a.window_kv_offsets = wo.ptr
    a.logit_cap = float(logit_cap or 0.0)
    a.sliding_window = _i32("sliding_window", sliding_window) if sliding_window and sliding_window > 0 else 0
    a.xai_temperature_len = (_i32("xai_temperature_len", xai_temperature_len)
                             if xai_temperature_len and xai_temperature_len > 0 else 0)
    a.k_scale = float(k_scale) if k_scale is not None else 1.0
    a.v_scale = float(v_scale) if v_scale is not None else 1.0
    if check_indices:
        p.flags |= _lib.FLAG_CHECK_INDICES
    if device == "cpu":
        # host arrays: the ends of the indptr arrays must lie inside the arrays they index (the C ABI is not told
        # those lengths; on CUDA the lengths live on the device and are the caller's to keep in range)
        ends = [("qo_indptr", "q's rows", tokens)]
        if T["page_table"] is None:
            ends.append(("kv_indptr", "kv_indices' entries", T["kv_indices"].shape[0]))
        if T["custom_mask"] is not None:
            ends.append(("mask_indptr", "custom_mask's entries", T["custom_mask"].shape[0]))
        for name, what, n in ends:
            end = _host_int(T[name], batch)
            if end > n:
                raise ValueError(f"{name}[{batch}] = {end} is past the {n} of {what}")
        # a page table's rows hold its shape's columns: the C ABI is given the row stride only, which for a view of
        # fewer columns would let a long prefix read the columns past the view
        if T["page_table"] is not None and int(page_size) > 0:
            cols = T["page_table"].shape[1]
            for b in range(batch):
                plen = _host_int(T["kv_indptr"], b + 1) - _host_int(T["kv_indptr"], b)
                pages = -(-plen // int(page_size))
                if pages > cols:
                    raise ValueError(f"page_table: request {b}'s prefix ({plen} tokens) needs {pages} pages, the "
                                     f"table has {cols} columns")
    return a, list(T.values())


def _no_tokens(q, k_draft, v_draft, out) -> bool:
    """True for a call with no draft tokens (q has 0 rows): there is nothing to compute and nothing is launched
    or read (an empty tensor may have no storage, which the C ABI would take for a missing argument). k_draft,
    v_draft and out must have 0 rows too."""
    if len(getattr(q, "shape", ())) != 3 or q.shape[0] != 0:
        return False
    for name, t in (("k_draft", k_draft), ("v_draft", v_draft), ("out", out)):
        if t is not None and (len(getattr(t, "shape", ())) < 1 or t.shape[0] != 0):
            raise ValueError(f"{name}: q has 0 rows (no draft tokens), {name} has shape {list(getattr(t, 'shape', ()))}")
    return True


# ---------------------------------------------------------------------------------------------------

def reference(q, k_draft, v_draft, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices=None, *,
              sm_scale: float, custom_mask=None, mask_indptr=None, mask_bits=None, parents=None,
              causal: bool = False, page_table=None, page_size: int = 1, max_draft: Optional[int] = None,
              **modifiers):
    """The float64 CPU oracle on numpy arrays (float16 or float32 inputs). Returns (out, lse): out float64
    [tokens, q_heads, head_dim_v], lse float32 [tokens, q_heads] (natural log; -inf for a row that sees
    nothing). Every length, index and mask entry is validated first (FlashVerifyError names the bad one).
    `modifiers`: SGLang's score modifiers as in verify_attention (sinks, window_kv_offsets, logit_cap,
    sliding_window, xai_temperature_len, k_scale, v_scale). No draft tokens (q with 0 rows): empty out and lse.
    """
    import numpy as np

    for name, t in (("q", q), ("v_draft", v_draft)):
        if len(getattr(t, "shape", ())) != 3:
            raise ValueError(f"{name}: expected [tokens, heads, head_dim] (3 dims), got shape "
                             f"{list(getattr(t, 'shape', ()))}")
    tokens, hq = q.shape[0], q.shape[1]
    out = np.full((tokens, hq, v_draft.shape[2]), np.nan, dtype=np.float64)
    lse = np.full((tokens, hq), np.nan, dtype=np.float32)
    if _no_tokens(q, k_draft, v_draft, None):
        return out, lse
    if max_draft is None:
        qo = np.asarray(qo_indptr)
        max_draft = int(np.max(np.diff(qo))) if qo.shape[0] > 1 else 1
    a, keep = build_args(device="cpu", q=q, k_draft=k_draft, v_draft=v_draft, k_pool=k_pool, v_pool=v_pool,
                         out=out, lse=lse, qo_indptr=qo_indptr, kv_indptr=kv_indptr, kv_indices=kv_indices,
                         custom_mask=custom_mask, mask_indptr=mask_indptr, mask_bits=mask_bits, parents=parents,
                         causal=causal, page_table=page_table, page_size=page_size, sm_scale=sm_scale,
                         max_draft=max(1, max_draft), impl=_lib.IMPL_ORACLE, num_kv_splits=0, profile=0,
                         **modifiers)
    _lib.run(a, 0, 0, 0)
    del keep
    return out, lse


class Workspace:
    """Device scratch for the fast kernel, allocated once (for the largest batch it will serve) and reused
    by every call: nothing is allocated per call. `nbytes` is what fv_workspace_size reported."""

    def __init__(self, nbytes: int, device=None):
        import torch

        self.nbytes = int(nbytes)
        self.buffer = torch.empty(max(self.nbytes, 1), dtype=torch.uint8,
                                  device=device if device is not None else "cuda")  # (device 0 is cuda:0)

    @staticmethod
    def required_bytes(*, batch_size: int, max_draft: int, num_q_heads: int, num_kv_heads: int,
                       head_dim_qk: int, head_dim_v: int, dtype="bfloat16", mask: str = "bytes",
                       impl: str = "fast", num_kv_splits: int = 0, profile: str = "auto", device=None,
                       kv_dtype=None) -> int:
        """fv_workspace_size for these shapes on `device` (default: the current CUDA device). The size
        grows with batch_size, so the largest batch covers all smaller ones. `kv_dtype`: "fp8" for an fp8 e4m3
        cache, `dtype`'s for a 16-bit one, None (default): enough for either (the planner may pick another tile
        for an fp8 cache, and with it another workspace size)."""
        # (ctypes would wrap an out-of-range int silently: batch_size 2**32 + 1 sized as batch 1)
        ints = {n: _i32(n, v) for n, v in dict(batch_size=batch_size, max_draft=max_draft, num_q_heads=num_q_heads,
                                               num_kv_heads=num_kv_heads, head_dim_qk=head_dim_qk,
                                               head_dim_v=head_dim_v, num_kv_splits=num_kv_splits).items()}
        import torch

        p = _lib.FvProblem()
        _lib.load().fv_problem_init(ctypes.byref(p))
        p.device = _lib.DEVICE_CUDA
        p.impl = {"fast": _lib.IMPL_FAST, "naive": _lib.IMPL_NAIVE}[impl]
        p.dtype = _FLOAT_CODES[str(dtype).replace("torch.", "")]
        p.batch_size, p.max_draft = ints["batch_size"], ints["max_draft"]
        p.num_q_heads, p.num_kv_heads = ints["num_q_heads"], ints["num_kv_heads"]
        p.head_dim_qk, p.head_dim_v = ints["head_dim_qk"], ints["head_dim_v"]
        p.mask_kind = {"bytes": _lib.MASK_BYTES, "bits": _lib.MASK_BITS, "parents": _lib.MASK_PARENTS,
                       "causal": _lib.MASK_CAUSAL}[mask]
        p.num_kv_splits = ints["num_kv_splits"]
        p.profile = {"auto": 0, "small_smem": 1, "large_smem": 2}[profile]
        if kv_dtype is None:
            kv_codes = (0, _lib.DTYPE_FP8_E4M3)
        else:
            kv_codes = (_lib.DTYPE_FP8_E4M3 if str(kv_dtype).replace("torch.", "") in ("fp8", *_FP8_NAMES) else 0,)
        with torch.cuda.device(device if device is not None else torch.cuda.current_device()):
            sizes = []
            for code in kv_codes:
                p.kv_dtype = code
                sizes.append(_lib.workspace_size(p))
            return max(sizes)

    @classmethod
    def for_shapes(cls, device=None, **shapes) -> "Workspace":
        return cls(cls.required_bytes(device=device, **shapes), device=device)


def verify_attention(q, k_draft, v_draft, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices=None, *,
                     sm_scale: float, max_draft: int, workspace: Optional[Workspace] = None,
                     custom_mask=None, mask_indptr=None, mask_bits=None, parents=None, causal: bool = False,
                     page_table=None, page_size: int = 1, out=None, lse=None, impl: str = "fast",
                     num_kv_splits: int = 0, profile: str = "auto", sinks=None, window_kv_offsets=None,
                     logit_cap: float = 0.0, sliding_window: int = -1, xai_temperature_len: int = -1,
                     k_scale: float = 1.0, v_scale: float = 1.0, check_indices: bool = False):
    """Tree-verify attention on CUDA tensors, queued on the current stream; returns `out`.

    q [T, Hq, Dqk]; k_draft [T, Hkv, Dqk]; v_draft [T, Hkv, Dv]; k_pool [slots, Hkv, Dqk]; v_pool
    [slots, Hkv, Dv] (MLA: the strided view k_pool[..., :512]); qo_indptr / kv_indptr [B + 1] int32 or
    int64 (lengths are read on the device: CUDA-graph safe); kv_indices int32/int64 token slots (may be
    over-allocated) or page_table + page_size; one mask: custom_mask (bool/uint8, SGLang's layout) +
    mask_indptr, mask_bits, parents, or causal=True. `max_draft` bounds every request's draft count.
    SGLang's per-layer score modifiers, all off by default: sinks (float32 [Hq]), logit_cap,
    sliding_window (+ window_kv_offsets int32 [B] for the byte mask's layout, read with a window only, as
    SGLang reads them), xai_temperature_len, k_scale / v_scale (prefix keys / values; 0 means 1, the C ABI's
    convention). check_indices=True validates every index on the device
    first (synchronises; not under CUDA-graph capture). A call with no draft tokens (q with 0 rows) launches
    nothing and returns `out` (0 rows) as it is.
    Wrong dtypes, devices, shapes or strides raise TypeError / ValueError naming the tensor before any
    launch; a bad value the library catches raises FlashVerifyError.
    """
    import torch

    from . import _torch_op  # noqa: F401  registers torch.ops.flashverify.verify_attention

    if out is None:
        out = torch.empty((q.shape[0], q.shape[1], v_draft.shape[2]), dtype=q.dtype, device=q.device)
    impl_code = {"fast": _lib.IMPL_FAST, "naive": _lib.IMPL_NAIVE}.get(impl)
    if impl_code is None:
        raise ValueError(f"impl: expected 'fast' or 'naive', got {impl!r}")
    profile_code = {"auto": 0, "small_smem": 1, "large_smem": 2}[profile]
    ws = workspace.buffer if workspace is not None else None
    scalars = (float(sm_scale), int(max_draft), bool(causal), int(page_size), int(impl_code), int(num_kv_splits),
               int(profile_code))
    modifiers = (float(logit_cap or 0.0), int(sliding_window if sliding_window is not None else -1),
                 int(xai_temperature_len if xai_temperature_len is not None else -1),
                 float(1.0 if k_scale is None else k_scale), float(1.0 if v_scale is None else v_scale))
    if not torch.compiler.is_compiling():
        # eager (also under CUDA-graph capture): check shapes and dtypes once and launch; wrong inputs raise
        # here, before anything is queued. (Not through the dispatcher: profilers see the kernels, not the
        # op, and the version counters of out / lse are not bumped.)
        run_on_tensors(q, k_draft, v_draft, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices, custom_mask,
                       mask_indptr, mask_bits, parents, page_table, out, lse, ws, *scalars, sinks,
                       window_kv_offsets, *modifiers, bool(check_indices))
        return out
    # while torch.compile traces, the tensors are fakes without storage: the op checks them when it runs
    torch.ops.flashverify.verify_attention(
        q, k_draft, v_draft, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
        mask_bits, parents, page_table, out, lse, ws, *scalars, sinks, window_kv_offsets, *modifiers,
        bool(check_indices))
    return out


def run_on_tensors(q, k_draft, v_draft, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices, custom_mask,
                   mask_indptr, mask_bits, parents, page_table, out, lse, workspace, sm_scale: float,
                   max_draft: int, causal: bool, page_size: int, impl: int, num_kv_splits: int,
                   profile: int, sinks=None, window_kv_offsets=None, logit_cap: float = 0.0,
                   sliding_window: int = -1, xai_temperature_len: int = -1, k_scale: float = 1.0,
                   v_scale: float = 1.0, check_indices: bool = False) -> None:
    """The body of the torch op: build fv_args and launch on the current stream."""
    import torch

    if _no_tokens(q, k_draft, v_draft, out):
        return
    if workspace is not None and (workspace.dtype != torch.uint8 or not workspace.is_contiguous()):
        # (numel() of an expanded view counts bytes it does not own; another dtype's would under-report)
        raise TypeError(f"workspace: expected a contiguous uint8 tensor (Workspace.buffer), got {workspace.dtype} "
                        f"shape {list(workspace.shape)} strides {list(workspace.stride())}")
    a, keep = build_args(device="cuda", q=q, k_draft=k_draft, v_draft=v_draft, k_pool=k_pool, v_pool=v_pool,
                         out=out, lse=lse, qo_indptr=qo_indptr, kv_indptr=kv_indptr, kv_indices=kv_indices,
                         custom_mask=custom_mask, mask_indptr=mask_indptr, mask_bits=mask_bits, parents=parents,
                         causal=causal, page_table=page_table, page_size=page_size, sm_scale=sm_scale,
                         max_draft=max_draft, impl=impl, num_kv_splits=num_kv_splits, profile=profile,
                         sinks=sinks, window_kv_offsets=window_kv_offsets, logit_cap=logit_cap,
                         sliding_window=sliding_window, xai_temperature_len=xai_temperature_len,
                         k_scale=k_scale, v_scale=v_scale, check_indices=check_indices)
    if workspace is not None and workspace.device != q.device:
        raise TypeError(f"workspace: is on {workspace.device}, the call runs on {q.device}")
    ws_ptr, ws_bytes = (workspace.data_ptr(), workspace.numel()) if workspace is not None else (0, 0)
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        _lib.run(a, ws_ptr, ws_bytes, stream)
    del keep


def build_info() -> str:
    return _lib.load().fv_build_info().decode()


def version() -> Tuple[int, int, int]:
    v = _lib.load().fv_version()
    return (v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF
