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
            # (a handled name that arrives here is not where the backend reads it: it would be dropped, so it
            # goes to Triton as an unknown one does; hints alone are harmless)
            extra = [k for k in value if k not in HINTS]
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


class CallBinder:
    """`signature.bind(*args, **kwargs)` + `apply_defaults()` + `unexpected_argument`, for one function, with
    the work that does not depend on the call done once: the backend binds every call it sees, and inspect's
    binding costs tens of microseconds a call. Signatures with *args or **kwargs take inspect's way."""

    def __init__(self, signature: inspect.Signature):
        self.signature = signature
        params = list(signature.parameters.values())
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        self._simple = all(p.kind in kinds for p in params)
        self._positional = tuple(p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self._names = frozenset(p.name for p in params)
        self._order = tuple(p.name for p in params)
        self._defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        self._checked = tuple((p.name, p.default) for p in params if p.name not in HANDLED and p.name not in HINTS)

    def bind(self, args, kwargs) -> dict:
        """The call's arguments by name, defaults filled in, in the signature's order. A call the function
        would refuse raises inspect's TypeError."""
        if self._simple and len(args) <= len(self._positional):
            given = dict(zip(self._positional, args))
            if all(k in self._names and k not in given for k in kwargs):
                given.update(kwargs)
                if all(n in given or n in self._defaults for n in self._order):
                    return {n: given[n] if n in given else self._defaults[n] for n in self._order}
        bound = self.signature.bind(*args, **kwargs)  # (raises the TypeError the call deserves)
        bound.apply_defaults()
        return dict(bound.arguments)

    def unexpected(self, arguments: Mapping[str, Any]) -> Optional[str]:
        """unexpected_argument(self.signature, arguments) for arguments bind() returned."""
        if not self._simple:
            return unexpected_argument(self.signature, arguments)
        for name, default in self._checked:
            if not _is_default(arguments[name], default):
                return name
        return None
