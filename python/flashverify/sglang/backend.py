"""FlashVerifyBackend: SGLang's Triton attention backend with flashverify serving target verify.

The subclass changes one thing. TritonAttnBackend.forward_extend saves the draft tokens' K/V into the
pool, builds every argument, and calls `self.extend_attention_fwd(...)`. That attribute is replaced by a
dispatcher: on a target-verify call whose layer flashverify supports it runs flashverify on exactly the
tensors the parent prepared (same pool, same qo/kv indptr, kv_indices, custom mask, mask_indptr, scale);
everything else goes to the original Triton function, and so does a call with any argument the backend
does not know at a value other than its default (flashverify._sglang_args). So the KV save, the metadata,
both generations of CUDA-graph hooks and every other mode stay SGLang's own code.

Environment:
  FLASHVERIFY_DISABLE=1   never serve (everything goes to Triton)
  FLASHVERIFY_SHADOW=N    on average every N-th served call (N = 1: every one) that is not being captured
                          into a CUDA graph also runs Triton into a scratch output, logs the difference, and
                          on a mismatch keeps Triton's result and sends every later eager call to Triton. The
                          gap between two checks is drawn from 1 .. 2N - 1, so that a period shared with the
                          model's layer count cannot check the same layers on every step. A mismatch: relative
                          L2 difference over the call above 2e-2
                          (6e-2 with an fp8 KV cache, which Triton reads with q rounded to fp8), or above
                          4x that in any one (token, head) row. CUDA-graph replays never pass through Python:
                          graphs captured before a mismatch keep running flashverify until SGLang captures
                          them again, so shadow-check a deployment that uses CUDA graphs with
                          --disable-cuda-graph, or read a mismatch as "restart without flashverify".
                          Each check costs a host synchronisation (the comparison's result is read on the host)
                          and allocates a scratch output and float copies of both outputs; it is a debugging
                          mode, not for a latency-sensitive deployment. Off by default.
`stats` counts served calls (calls through Python: a CUDA-graph capture counts once, its replays not at all),
fallbacks by reason, and shadow checks. A fallback's reason is logged once, at
WARNING where the library refused the call (with the library's message, which names the argument), at INFO
for calls flashverify does not serve by design (other forward modes, score_mod, ...).
"""
from __future__ import annotations

import collections
import inspect
import logging
import math
import os
import random
from typing import Optional

import torch
from sglang.srt.layers.attention.triton_backend import TritonAttnBackend

from .. import _lib
from .._api import SUPPORTED_HEAD_DIMS, Workspace, verify_attention
from .._sglang_args import CallBinder

logger = logging.getLogger(__name__)

stats = collections.Counter()
SHADOW_TOLERANCE = 2e-2
# with an fp8 KV cache SGLang's Triton kernel also rounds q (and P) to fp8 before its dot products
# (`q.to(k.dtype)`), flashverify keeps them in 16 bits: the two differ by that rounding
SHADOW_TOLERANCE_FP8 = 6e-2
# one (token, head) row may differ by this many times the tolerance: a call-wide L2 norm dilutes one bad request
SHADOW_ROW_FACTOR = 4.0
_FP8_KV = (torch.uint8, getattr(torch, "float8_e4m3fn", torch.uint8))


def _as_slot_rows(buf: torch.Tensor) -> Optional[torch.Tensor]:
    if buf.dim() == 3:
        return buf
    # [pages, page_size, H, D] with evenly spaced pages. (A head-major [pages, H, page_size, D] pool has the same
    # shape and strides when page_size == H: the dispatcher sends SGLang's "hnd" layout to Triton before this)
    if buf.dim() == 4 and buf.stride(0) == buf.shape[1] * buf.stride(1):
        return torch.as_strided(buf, (buf.shape[0] * buf.shape[1], buf.shape[2], buf.shape[3]),
                                (buf.stride(1), buf.stride(2), buf.stride(3)), buf.storage_offset())
    return None


def _scalar(x) -> float:
    # k_scale / v_scale arrive as None or a host number (SGLang passes layer.k_scale_float); a CUDA tensor goes to
    # Triton before this is reached (_unsupported: "scale_tensor"), as reading it would sync the host
    if x is None:
        return 1.0
    return float(x)


def _device_scalar(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type != "cpu"


def _shadow_every_from_env() -> int:
    raw = os.environ.get("FLASHVERIFY_SHADOW", "0") or "0"
    try:
        n = int(raw)
    except ValueError:
        logger.warning("flashverify: FLASHVERIFY_SHADOW=%r is not a whole number: shadow checks are off", raw)
        return 0
    return max(n, 0)


class FlashVerifyBackend(TritonAttnBackend):
    def __init__(self, model_runner, *args, **kwargs):
        super().__init__(model_runner, *args, **kwargs)
        self._triton_extend = self.extend_attention_fwd
        self._triton_signature = inspect.signature(
            getattr(self._triton_extend, "__wrapped__", self._triton_extend))
        self._binder = CallBinder(self._triton_signature)
        # (as the parent's Triton function: torch.compile must not trace the ctypes call and the counters)
        _no_compile = getattr(getattr(torch, "compiler", None), "disable", None)
        self.extend_attention_fwd = _no_compile(self._extend_dispatch) if _no_compile else self._extend_dispatch
        self._target_verify = False
        self._disabled = os.environ.get("FLASHVERIFY_DISABLE", "") == "1"
        self._shadow_every = _shadow_every_from_env()
        self._shadow_rng = random.Random(0x5eed)
        self._shadow_next = self._shadow_gap()
        self._served = 0
        self._workspace: Optional[Workspace] = None
        self._workspace_in_graph = False  # whether a CUDA graph was captured with the current workspace
        # buffers replaced by larger ones that a captured graph may still use (workspaces used under capture,
        # window-offset copies) stay alive; a workspace no graph used is released when a larger one replaces it
        self._retired = []
        self._ws_need = {}
        self._logged = set()
        self._sinks_cache = {}
        self._woff_cache = {}
        if self._disabled:
            self._log_once("disabled", "flashverify: FLASHVERIFY_DISABLE=1, every call goes to Triton")

    # ---- hooks -------------------------------------------------------------------------------------
    def forward_extend(self, q, k, v, layer, forward_batch, *args, **kwargs):
        self._target_verify = forward_batch.forward_mode.is_target_verify()
        if self._target_verify and getattr(self, "enable_deterministic", False):
            # --enable-deterministic-inference: the parent runs target verify through its unified Triton kernel
            # (extend_attention_fwd_unified), which never reaches the dispatcher below; counted so that it shows
            stats["fallback:deterministic"] += 1
            self._log_once("fb:deterministic", "flashverify: --enable-deterministic-inference: target verify runs "
                           "SGLang's unified Triton kernel, not flashverify", logging.WARNING)
        try:
            return super().forward_extend(q, k, v, layer, forward_batch, *args, **kwargs)
        finally:
            self._target_verify = False

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int, *args, **kwargs):
        super().init_cuda_graph_state(max_bs, max_num_tokens, *args, **kwargs)
        # the workspace every captured graph will use: sized for the largest batch, allocated now
        try:
            layer = self._first_full_layer()
            k_buf = self.token_to_kv_pool.get_key_buffer(layer)
            v_buf = self.token_to_kv_pool.get_value_buffer(layer)
            dims = (k_buf.shape[-1], v_buf.shape[-1])
            # an fp8 cache is sized with the bf16 model dtype (required_bytes covers fp8 and 16-bit caches)
            ws_dtype = torch.bfloat16 if k_buf.dtype in _FP8_KV else k_buf.dtype
            if dims in SUPPORTED_HEAD_DIMS and ws_dtype in (torch.bfloat16, torch.float16):
                need = Workspace.required_bytes(
                    batch_size=max_bs, max_draft=max(1, self.num_draft_tokens or 1), num_q_heads=self.num_head,
                    num_kv_heads=k_buf.shape[-2], head_dim_qk=dims[0], head_dim_v=dims[1], dtype=ws_dtype,
                    device=k_buf.device)
                if self._workspace is None or self._workspace.nbytes < need:
                    self._set_workspace(Workspace(need, device=k_buf.device))
        except Exception as e:  # the backend still works: eager calls size it on first use
            self._log_once("ws-init", f"flashverify: no workspace preallocated ({e}); the first eager verify call "
                           "(SGLang's warm-up before each capture) sizes it, and a graph captured with none uses "
                           "Triton for verify")

    def _first_full_layer(self) -> int:
        # the first layer whose KV buffers the pool hands out (hybrid pools raise for their linear-attention
        # layers, which may come first). SGLang's HybridLinearKVPool has no layer_num (it does not run the base
        # class's __init__): its full-attention layer ids are the keys of full_attention_layer_id_mapping
        pool = self.token_to_kv_pool
        start = getattr(pool, "start_layer", 0) or 0
        mapping = getattr(pool, "full_attention_layer_id_mapping", None)
        if isinstance(mapping, dict) and mapping:
            candidates = sorted(mapping)
        else:
            candidates = range(start, start + max(1, int(getattr(pool, "layer_num", 1) or 1)))
        for layer in candidates:
            try:
                pool.get_key_buffer(layer)
                return layer
            except Exception:
                continue
        return start

    def _set_workspace(self, ws: Workspace) -> None:
        if self._workspace is not None and self._workspace_in_graph:
            self._retired.append(self._workspace)
        self._workspace = ws
        self._workspace_in_graph = False

    def _shadow_gap(self) -> int:
        n = self._shadow_every
        return n if n <= 1 else self._shadow_rng.randint(1, 2 * n - 1)

    def _shadow_due(self) -> bool:
        """Whether this served call (outside capture) is shadow-checked: the drawn gap counted down."""
        if not self._shadow_every:
            return False
        self._shadow_next -= 1
        if self._shadow_next > 0:
            return False
        self._shadow_next = self._shadow_gap()
        return True

    # ---- dispatch ----------------------------------------------------------------------------------
    def _log_once(self, key: str, msg: str, level: int = logging.INFO) -> None:
        if key not in self._logged:
            self._logged.add(key)
            logger.log(level, msg)

    def _fallback(self, reason: str, args, kwargs, error: Optional[BaseException] = None):
        stats["fallback:" + reason] += 1
        if error is not None:
            self._log_once("fb:" + reason, f"flashverify: falling back to Triton for {reason}: {error}",
                           logging.WARNING)
        elif reason != "not-target-verify":
            self._log_once("fb:" + reason, f"flashverify: falling back to Triton for {reason}")
        return self._triton_extend(*args, **kwargs)

    def _unsupported(self, a) -> Optional[str]:
        if not self._target_verify:
            return "not-target-verify"
        if self._disabled:
            return "disabled"
        if a.get("score_mod") is not None:
            return "score_mod"
        if a.get("lse_extend") is not None or a.get("skip_prefix") or a.get("skip_extend"):
            return "dcp"
        name = self._binder.unexpected(a)
        if name is not None:
            return "arg:" + name
        q, k_buffer = a["q_extend"], a["k_buffer"]
        if q.dtype not in (torch.bfloat16, torch.float16) or k_buffer.dtype not in (q.dtype, *_FP8_KV):
            return "kv_dtype"
        if (a["k_extend"].shape[-1], a["v_extend"].shape[-1]) not in SUPPORTED_HEAD_DIMS:
            return "head_dim"
        if a["custom_mask"] is None and not a["is_causal"]:
            return "non_causal"
        if getattr(getattr(self, "token_to_kv_pool", None), "kv_cache_layout", None) == "hnd":
            # SGLANG_USE_HND_KVCACHE: [pages, H, page_size, D] buffers, which _as_slot_rows cannot tell from
            # [pages, page_size, H, D] when page_size == H (other layouts: by their strides, or to Triton there)
            return "kv_layout:hnd"
        if _device_scalar(a.get("k_scale")) or _device_scalar(a.get("v_scale")):
            return "scale_tensor"  # (reading it would sync the host, and cannot happen under capture)
        if any(x is not None and float(x) == 0.0 for x in (a.get("k_scale"), a.get("v_scale"))):
            return "zero_scale"  # (Triton multiplies by 0; the C ABI reads 0 as "no scale", i.e. 1)
        return None

    def _extend_dispatch(self, *args, **kwargs):
        a = self._binder.bind(args, kwargs)
        reason = self._unsupported(a)
        if reason is not None:
            return self._fallback(reason, args, kwargs)

        q, o = a["q_extend"], a["o_extend"]
        k_ext, v_ext = a["k_extend"], a["v_extend"]
        # kv_indices hold token slots at every page size; a paged [pages, page_size, H, D] buffer whose pages
        # are evenly spaced is the same memory as [slots, H, D]
        k_buf, v_buf = _as_slot_rows(a["k_buffer"]), _as_slot_rows(a["v_buffer"])
        if k_buf is None or v_buf is None:
            return self._fallback("page_layout", args, kwargs)
        mla = (k_ext.shape[-1], v_ext.shape[-1]) == (576, 512)
        if mla:
            # MLA's V is the first 512 columns of the latent row. The pool's value buffer is that view;
            # the parent passes v.contiguous() (a copy of the same columns) for the draft tokens, so the
            # draft V is taken as the view of k_extend too. (An assumption about SGLang's MLA path, where
            # forward_mla passes v = k_nope and k = cat(k_nope, k_pe); comparing the values would need a
            # device read on every call, so only the pool's layout is checked. The equivalence tests run
            # SGLang's own MLA verify calls through it.)
            if v_buf.data_ptr() != k_buf.data_ptr() or v_buf.stride() != k_buf.stride():
                return self._fallback("mla_v_not_view_of_k", args, kwargs)
            v_ext = k_ext[..., :512]
        batch = a["qo_indptr"].shape[0] - 1
        max_draft = int(a["max_len_extend"])
        try:
            ws = self._ensure_workspace(q, k_ext, v_ext, batch, max_draft,
                                        mask="bytes" if a["custom_mask"] is not None else "causal")
        except (_lib.FlashVerifyError, _lib.LibraryNotFound, ValueError, TypeError, OSError, ImportError,
                AttributeError) as e:
            # (the library cannot size this problem: e.g. FV_ERR_NO_DEVICE on a GPU older than sm_80, a head count
            # it does not take, or the library missing; or it cannot be loaded: OSError from dlopen, ImportError
            # for a library of another ABI version, AttributeError for a file without its symbols)
            return self._fallback(f"workspace-size:{type(e).__name__}:{getattr(e, 'status', '')}", args, kwargs, e)
        if ws is None:
            return self._fallback("workspace", args, kwargs)
        # SGLang's per-layer score modifiers, passed through (SGLang's order and conventions)
        window = a.get("sliding_window_size")
        window = int(window) if window is not None and int(window) > 0 else -1
        woff = a.get("window_kv_offsets") if window > 0 and a["custom_mask"] is not None else None
        try:
            sinks = a.get("sinks")
            if sinks is not None:
                sinks = self._sinks_fp32(sinks)
            if woff is not None:
                woff = self._window_offsets_i32(woff, batch)
            verify_attention(
                q, k_ext, v_ext, k_buf, v_buf, a["qo_indptr"], a["kv_indptr"], a["kv_indices"],
                custom_mask=a["custom_mask"], mask_indptr=a["mask_indptr"] if a["custom_mask"] is not None else None,
                causal=a["custom_mask"] is None, sm_scale=_triton_sm_scale(a["sm_scale"], q), max_draft=max_draft,
                workspace=ws, out=o, sinks=sinks, window_kv_offsets=woff,
                logit_cap=float(a.get("logit_cap") or 0.0), sliding_window=window,
                xai_temperature_len=int(a.get("xai_temperature_len") or -1),
                k_scale=_scalar(a.get("k_scale")), v_scale=_scalar(a.get("v_scale")))
        except (_lib.FlashVerifyError, ValueError, TypeError, RuntimeError) as e:
            return self._fallback(f"error:{type(e).__name__}:{getattr(e, 'status', '')}", args, kwargs, e)
        stats["served"] += 1
        self._served += 1
        capturing = torch.cuda.is_current_stream_capturing()
        if capturing:
            self._workspace_in_graph = True
        elif self._shadow_due():
            self._shadow_check(args, kwargs, o)
        return o

    def _sinks_fp32(self, sinks: torch.Tensor) -> torch.Tensor:
        # the ABI takes float32 sinks. Other dtypes are converted into a float32 buffer of the layer's own on
        # every call (a small device copy, captured with the rest of a graph), so that weights updated in place
        # reach the kernel as they reach Triton
        if sinks.dtype == torch.float32 and sinks.is_contiguous():
            return sinks
        key = (sinks.data_ptr(), sinks.dtype, tuple(sinks.shape), sinks.device)
        buf = self._sinks_cache.get(key)
        if buf is None:
            if torch.cuda.is_current_stream_capturing():
                raise ValueError("sinks: a non-float32 sinks tensor met first under graph capture")
            buf = torch.empty(sinks.shape, dtype=torch.float32, device=sinks.device)
            self._sinks_cache[key] = buf
        buf.copy_(sinks.detach())
        return buf

    def _window_offsets_i32(self, woff: torch.Tensor, batch: int) -> torch.Tensor:
        # the ABI takes int32 offsets. SGLang's CUDA-graph buffer is int32; its eager path hands seq_lens -
        # window_kv_lens, int64: those are copied into an int32 buffer of the device's own on every call (a small
        # device copy), instead of the call going to Triton
        if woff.dtype == torch.int32 and woff.is_contiguous():
            return woff
        buf = self._woff_cache.get(woff.device)
        if buf is None or buf.shape[0] < batch:
            if torch.cuda.is_current_stream_capturing():
                raise ValueError("window_kv_offsets: a non-int32 offsets tensor met first under graph capture")
            if buf is not None:
                self._retired.append(buf)
            buf = torch.empty(max(batch, 64), dtype=torch.int32, device=woff.device)
            self._woff_cache[woff.device] = buf
        out = buf[:batch]
        out.copy_(woff[:batch].detach())
        return out

    def _ensure_workspace(self, q, k_ext, v_ext, batch, max_draft, mask) -> Optional[Workspace]:
        key = (batch, max_draft, q.shape[1], k_ext.shape[1], k_ext.shape[-1], v_ext.shape[-1], q.dtype, mask, q.device)
        need = self._ws_need.get(key)
        if need is None:
            need = Workspace.required_bytes(batch_size=batch, max_draft=max_draft, num_q_heads=q.shape[1],
                                            num_kv_heads=k_ext.shape[1], head_dim_qk=k_ext.shape[-1],
                                            head_dim_v=v_ext.shape[-1], dtype=q.dtype, mask=mask, device=q.device)
            self._ws_need[key] = need
        if self._workspace is not None and self._workspace.nbytes >= need:
            return self._workspace
        if torch.cuda.is_current_stream_capturing():
            return None  # never allocate inside a captured region
        try:
            ws = Workspace(need, device=q.device)
        except RuntimeError as e:  # (torch.cuda.OutOfMemoryError among them): Triton serves this call
            self._log_once(f"ws-fail:{need}", f"flashverify: no workspace of {need} bytes ({e})")
            return None
        self._set_workspace(ws)
        self._log_once(f"ws:{need}", f"flashverify: workspace {need} bytes")
        return self._workspace

    def _shadow_check(self, args, kwargs, o):
        bound = self._triton_signature.bind(*args, **kwargs)
        ref = torch.empty_like(o)
        bound.arguments["o_extend"] = ref
        self._triton_extend(*bound.args, **bound.kwargs)
        err, row_err = shadow_errors(o, ref)
        stats["shadow_checks"] += 1
        logger.info("flashverify shadow check %d: relative L2 difference to Triton %.2e (worst (token, head) row %.2e)",
                    stats["shadow_checks"], err, row_err)
        tol = SHADOW_TOLERANCE_FP8 if bound.arguments["k_buffer"].dtype in _FP8_KV else SHADOW_TOLERANCE
        if not (err <= tol and row_err <= SHADOW_ROW_FACTOR * tol):  # NaN counts as a mismatch
            stats["shadow_mismatch"] += 1
            logger.error("flashverify: output differs from Triton by %.2e, worst (token, head) row %.2e (tolerance %.0e, "
                         "rows %.0e); Triton's output is used, and Triton serves every later eager call (CUDA graphs "
                         "captured before now keep flashverify until they are captured again)",
                         err, row_err, tol, SHADOW_ROW_FACTOR * tol)
            o.copy_(ref)
            self._disabled = True


def _triton_sm_scale(sm_scale, q: torch.Tensor) -> float:
    # SGLang's extend kernel: `sm_scale = sm_scale or 1.0 / (Lq**0.5)` (None and 0 both mean 1 / sqrt(q's head dim))
    return float(sm_scale) if sm_scale else 1.0 / math.sqrt(q.shape[-1])


def shadow_errors(o: torch.Tensor, ref: torch.Tensor):
    """Relative L2 difference of o to ref ([tokens, heads, head_dim]) over the whole call, and the largest over
    one (token, head) row (a row of zeros in ref is measured against 1e-6 of the largest row norm), as two floats
    (one host read). Per head, not per token: one wrong head among Hq = 128 moves its token's row by ~1/11 of
    its own error."""
    if o.numel() == 0:  # (a call without draft tokens: nothing to differ)
        return 0.0, 0.0
    d = (o.float() - ref.float()).reshape(-1, o.shape[-1])
    r = ref.float().reshape(-1, o.shape[-1])
    r_rows = r.norm(dim=1)
    whole = d.norm() / r.norm().clamp_min(1e-30)
    floor = (r_rows.max() * 1e-6).clamp_min(1e-30)
    rows = (d.norm(dim=1) / torch.maximum(r_rows, floor)).max()
    both = torch.stack([whole, rows]).tolist()
    return both[0], both[1]
