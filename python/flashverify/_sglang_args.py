"""Which arguments of SGLang's Triton `extend_attention_fwd` the SGLang backend serves, checked by name.

The backend binds each call to the real function's signature. An argument it neither passes on to
flashverify nor knows to be a pure tuning hint must be at the function's own default, else the call goes
to Triton: an argument added by a later SGLang (or a fork) could change what the kernel computes
(`skip_prefix_custom_mask=False` applies the mask's prefix columns, which flashverify never reads;
`identity_kv_indices=True` ignores kv_indices, which flashverify follows). Torch-free, so that the CPU
tests check it.
"""
from __future__ import annotations

import inspect
from typing import Any, Mapping, Optional

# passed on to flashverify, or checked by the backend itself (page_size: kv_indices hold token slots at
# every page size; the backend views an evenly paged buffer as slot rows and falls back otherwise)
HANDLED = frozenset({
    "q_extend", "k_extend", "v_extend", "o_extend", "k_buffer", "v_buffer", "qo_indptr", "kv_indptr",
    "kv_indices", "custom_mask", "is_causal", "mask_indptr", "max_len_extend", "k_scale", "v_scale",
    "sm_scale", "logit_cap", "sliding_window_size", "sinks", "window_kv_offsets", "xai_temperature_len",
    "page_size",
})

# launch-configuration hints of some SGLang versions: they choose how Triton computes, not what
HINTS = frozenset({"config", "force_v2_prefill", "total_prefix_len", "total_extend_len", "min_len_extend",
                   "max_bs"})


def _is_default(value: Any, default: Any) -> bool:
    if default is inspect.Parameter.empty:
        return False
    if value is default:
        return True
    plain = (bool, int, float, str)
    return isinstance(default, plain) and type(value) in plain and value == default


def unexpected_argument(signature: inspect.Signature, arguments: Mapping[str, Any]) -> Optional[str]:
    """The name of the first argument in `arguments` (a call bound to `signature`, defaults applied) that
    is neither handled nor a hint and differs from its default; None when there is none."""
    for name, value in arguments.items():
        if name in HANDLED or name in HINTS:
            continue
        param = signature.parameters.get(name)
        if param is None:
            return name
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra = [k for k in value if k not in HANDLED and k not in HINTS]
            if extra:
                return extra[0]
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            if value:
                return name
            continue
        if not _is_default(value, param.default):
            return name
    return None
