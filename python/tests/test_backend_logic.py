"""FlashVerifyBackend's own decisions, without a GPU and without SGLang: the fallback rules that do not need a
kernel (zero or device-tensor scales, a library that cannot size the workspace), the scale default SGLang's
Triton kernel applies, when a replaced workspace is kept alive, the FLASHVERIFY_SHADOW parsing and the shadow
checks' cadence. Where SGLang is not installed its TritonAttnBackend is replaced by a stub holding the real
function's signature (modal-projects/sglang 8905cbd42, python/sglang/kernels/ops/attention/extend_attention.py).
Where SGLang is installed the backend tests here are skipped with that reason (the stub would shadow the real
parent; SGLang's own backend tests run FlashVerifyBackend over the real class: python/tests/sglang_kit, device-check
stage sglang); the last tests, on flashverify._api alone, run either way. Needs torch (CPU is enough): skipped with
the reason without it."""
import logging
import math
import sys
import types

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")


def extend_attention_fwd(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr, kv_indptr,
                         kv_indices, custom_mask, is_causal, mask_indptr, max_len_extend, k_scale, v_scale,
                         sm_scale=None, logit_cap=0.0, skip_prefix_custom_mask=True, sliding_window_size=-1,
                         sinks=None, window_kv_offsets=None, xai_temperature_len=-1, lse_extend=None,
                         skip_prefix=False, skip_extend=False, page_size: int = 1, score_mod=None,
                         aux_tensors=None):
    """SGLang's signature; the stub's Triton: records the call and writes 7 into the output."""
    TRITON_CALLS.append(o_extend)
    o_extend.fill_(7.0)


TRITON_CALLS = []


def _sglang_present() -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("sglang.srt.layers.attention.triton_backend") is not None
    except ImportError:  # no sglang, or only the extracted Triton kernels (a partial `sglang` package)
        return False


STUB_NAMES = ("sglang", "sglang.srt", "sglang.srt.layers", "sglang.srt.layers.attention",
              "sglang.srt.layers.attention.triton_backend")


@pytest.fixture(scope="module")
def B():
    """flashverify.sglang.backend imported over the stub parent; afterwards sys.modules is as it was (other tests
    check that `import flashverify` does not pull the backend in)."""
    if _sglang_present():
        pytest.skip("SGLang is installed: its backend tests (python/tests/sglang_kit) cover the real parent")
    saved = {n: sys.modules.get(n) for n in STUB_NAMES + ("flashverify.sglang", "flashverify.sglang.backend")}

    class TritonAttnBackend:
        def __init__(self, model_runner, *args, **kwargs):
            self.extend_attention_fwd = extend_attention_fwd
            self.num_draft_tokens = 4
            self.enable_deterministic = False

        def forward_extend(self, q, k, v, layer, forward_batch, *args, **kwargs):
            return "parent"

    for name in STUB_NAMES[:-1]:
        sys.modules.setdefault(name, types.ModuleType(name))
    mod = types.ModuleType(STUB_NAMES[-1])
    mod.TritonAttnBackend = TritonAttnBackend
    sys.modules[STUB_NAMES[-1]] = mod
    try:
        from flashverify.sglang import backend
        yield backend
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


from flashverify import _lib  # noqa: E402


def make_backend(B, monkeypatch, shadow=None):
    if shadow is None:
        monkeypatch.delenv("FLASHVERIFY_SHADOW", raising=False)
    else:
        monkeypatch.setenv("FLASHVERIFY_SHADOW", shadow)
    monkeypatch.delenv("FLASHVERIFY_DISABLE", raising=False)
    be = B.FlashVerifyBackend(model_runner=None)
    be._target_verify = True
    return be


def call_args(**over):
    """A target-verify call in SGLang's argument names: MLA shapes, 2 requests of 4 draft tokens."""
    t, hq = 8, 16
    a = dict(q_extend=torch.randn(t, hq, 576, dtype=torch.bfloat16),
             k_extend=torch.randn(t, 1, 576, dtype=torch.bfloat16),
             v_extend=torch.randn(t, 1, 512, dtype=torch.bfloat16),
             o_extend=torch.zeros(t, hq, 512, dtype=torch.bfloat16),
             k_buffer=torch.randn(64, 1, 576, dtype=torch.bfloat16),
             qo_indptr=torch.tensor([0, 4, 8], dtype=torch.int32),
             kv_indptr=torch.tensor([0, 10, 20], dtype=torch.int32),
             kv_indices=torch.arange(20, dtype=torch.int64),
             custom_mask=None, is_causal=True, mask_indptr=None, max_len_extend=4, k_scale=1.0, v_scale=1.0)
    a["v_buffer"] = a["k_buffer"][..., :512]
    a.update(over)
    return a


def test_sm_scale_defaults_as_sglangs_triton_kernel(B):
    q = torch.zeros(2, 3, 576)
    assert B._triton_sm_scale(None, q) == pytest.approx(1 / math.sqrt(576))
    assert B._triton_sm_scale(0.0, q) == pytest.approx(1 / math.sqrt(576))
    assert B._triton_sm_scale(0.125, q) == 0.125


@pytest.mark.parametrize("over,reason", [
    (dict(k_scale=0.0), "zero_scale"),
    (dict(v_scale=0), "zero_scale"),
    (dict(k_scale=torch.ones((), device="meta")), "scale_tensor"),
])
def test_scales_triton_reads_differently_go_to_triton(B, monkeypatch, over, reason):
    be = make_backend(B, monkeypatch)
    TRITON_CALLS.clear()
    before = B.stats["fallback:" + reason]
    a = call_args(**over)
    be._extend_dispatch(**a)
    assert B.stats["fallback:" + reason] == before + 1
    assert len(TRITON_CALLS) == 1 and bool((a["o_extend"] == 7).all())


def test_workspace_sizing_error_falls_back_with_the_message(B, monkeypatch, caplog):
    be = make_backend(B, monkeypatch)

    def refuse(*args, **kwargs):
        raise _lib.FlashVerifyError(9, "head_dim_qk = 576 needs sm_80 or newer (test)")

    monkeypatch.setattr(B.Workspace, "required_bytes", staticmethod(refuse))
    TRITON_CALLS.clear()
    a = call_args()
    with caplog.at_level(logging.INFO, logger=B.__name__):
        be._extend_dispatch(**a)
        be._extend_dispatch(**call_args())
    assert len(TRITON_CALLS) == 2 and bool((a["o_extend"] == 7).all())
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "needs sm_80" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]  # once, with the library's message


def test_a_replaced_workspace_stays_alive_only_if_a_graph_used_it(B, monkeypatch):
    be = make_backend(B, monkeypatch)

    class Ws:
        def __init__(self, n):
            self.nbytes = n

    first, second, third = Ws(1), Ws(2), Ws(3)
    be._set_workspace(first)
    be._set_workspace(second)  # `first` served no captured graph: released
    assert first not in be._retired
    be._workspace_in_graph = True  # what a call served under capture sets
    be._set_workspace(third)
    assert second in be._retired and be._workspace is third and not be._workspace_in_graph


@pytest.mark.parametrize("raw,want", [("", 0), ("0", 0), ("1", 1), ("5", 5), ("-3", 0), ("yes", 0)])
def test_shadow_setting(B, monkeypatch, caplog, raw, want):
    with caplog.at_level(logging.WARNING, logger=B.__name__):
        be = make_backend(B, monkeypatch, shadow=raw)
    assert be._shadow_every == want
    assert any("FLASHVERIFY_SHADOW" in r.getMessage() for r in caplog.records) == (raw == "yes")


def test_shadow_cadence_is_not_locked_to_the_layer_count(B, monkeypatch):
    # 61 layers a step (DeepSeek-V3), a check on average every 61st call: a fixed period would check one layer
    # on every step; the drawn gaps reach many
    be = make_backend(B, monkeypatch, shadow="61")
    layers, steps, checked, gaps, last = 61, 200, set(), [], -1
    for call in range(layers * steps):
        if be._shadow_due():  # (what the dispatcher asks after each call it served outside capture)
            checked.add(call % layers)
            gaps.append(call - last)
            last = call
    assert len(checked) > layers // 2, sorted(checked)
    assert 0.8 * steps <= len(gaps) <= 1.2 * steps  # on average every 61st call
    assert max(gaps) <= 2 * 61 - 1
    be1 = make_backend(B, monkeypatch, shadow="1")
    assert all(be1._shadow_due() for _ in range(10))  # N = 1: every call
    be0 = make_backend(B, monkeypatch)
    assert not any(be0._shadow_due() for _ in range(10))  # off


def test_deterministic_mode_is_counted_not_silent(B, monkeypatch, caplog):
    # SGLang's deterministic mode sends target verify to extend_attention_fwd_unified, past the dispatcher
    be = make_backend(B, monkeypatch)
    be.enable_deterministic = True
    verify = types.SimpleNamespace(forward_mode=types.SimpleNamespace(is_target_verify=lambda: True))
    before = B.stats["fallback:deterministic"]
    with caplog.at_level(logging.WARNING, logger=B.__name__):
        assert be.forward_extend(None, None, None, None, verify) == "parent"
        assert be.forward_extend(None, None, None, None, verify) == "parent"
    assert B.stats["fallback:deterministic"] == before + 2
    assert sum("deterministic" in r.getMessage() for r in caplog.records) == 1
    assert be._target_verify is False



def test_shadow_errors_find_one_wrong_head(B):
    # 8 tokens x 128 heads (MLA Hq = 128); flashverify's output off by bf16 rounding everywhere, and one head of one
    # token 30% off: the call-wide figure and that token's row (all heads) stay under the tolerances, the (token,
    # head) row does not
    tol, row_tol = B.SHADOW_TOLERANCE, B.SHADOW_ROW_FACTOR * B.SHADOW_TOLERANCE
    g = torch.Generator().manual_seed(5)
    ref = torch.randn(8, 128, 512, generator=g)
    o = ref.to(torch.bfloat16).float()
    whole, worst = B.shadow_errors(o, ref)
    assert whole < 5e-3 and worst < 1e-2  # bf16 rounding only
    o[3, 77] += 0.3 * torch.randn(512, generator=g)
    whole, worst = B.shadow_errors(o, ref)
    token_row = ((o[3] - ref[3]).norm() / ref[3].norm()).item()
    assert whole < tol and token_row < row_tol  # what a per-token row check passed
    assert worst > row_tol
    o[5, 0] = float("nan")
    whole, worst = B.shadow_errors(o, ref)
    assert not (whole <= tol and worst <= row_tol)  # NaN never passes


def test_zero_scale_in_a_cpu_tensor_goes_to_triton(B, monkeypatch):
    # the C ABI reads a scale of 0 as 1; Triton multiplies by it: a CPU tensor holding 0 is a zero scale too
    be = make_backend(B, monkeypatch)
    TRITON_CALLS.clear()
    before = B.stats["fallback:zero_scale"]
    be._extend_dispatch(**call_args(v_scale=torch.zeros(())))
    assert B.stats["fallback:zero_scale"] == before + 1 and len(TRITON_CALLS) == 1


def test_head_major_pools_go_to_triton(B, monkeypatch):
    # SGLANG_USE_HND_KVCACHE pools are [pages, H, page_size, D]: with page_size == H their shape and strides are those
    # of [pages, page_size, H, D], so the pool's layout label decides
    be = make_backend(B, monkeypatch)
    be.token_to_kv_pool = types.SimpleNamespace(kv_cache_layout="hnd")
    TRITON_CALLS.clear()
    before = B.stats["fallback:kv_layout:hnd"]
    be._extend_dispatch(**call_args())
    assert B.stats["fallback:kv_layout:hnd"] == before + 1 and len(TRITON_CALLS) == 1


def test_dispatch_under_capture_and_after(B, monkeypatch):
    """_extend_dispatch end to end with the kernel stubbed (it writes 3) and capture switched by hand: a call served
    under capture marks the workspace as used by a graph and is never shadow-checked; one that needs a larger
    workspace under capture goes to Triton rather than allocate; eagerly the larger workspace replaces it and the
    old one is kept alive (a graph holds it); every eager call is shadow-checked with FLASHVERIFY_SHADOW=1 (Triton's
    stub writes 7: a mismatch, so Triton's output is used and the backend turns itself off); int64 window offsets
    reach the kernel as int32, and met first under capture they go to Triton."""
    be = make_backend(B, monkeypatch, shadow="1")
    served, capturing, need = [], [False], [1024]

    def kernel(q, k_ext, v_ext, k_buf, v_buf, qo, kv, idx, *, out, workspace, **kw):
        served.append(dict(kw, workspace=workspace))
        out.fill_(3.0)

    monkeypatch.setattr(B, "verify_attention", kernel)
    monkeypatch.setattr(B.Workspace, "required_bytes", staticmethod(lambda **kw: need[0]))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    be._workspace = None
    be._retired.clear()
    TRITON_CALLS.clear()
    mask = torch.ones(2 * 4 * 14, dtype=torch.bool)
    woff64 = torch.tensor([3, 5], dtype=torch.int64)
    swa = dict(custom_mask=mask, is_causal=False, mask_indptr=torch.tensor([0, 56, 112], dtype=torch.int32),
               sliding_window_size=8, window_kv_offsets=woff64)

    capturing[0] = True  # no workspace yet: nothing is allocated under capture
    a = call_args()
    be._extend_dispatch(**a)
    assert len(served) == 0 and len(TRITON_CALLS) == 1 and be._workspace is None
    capturing[0] = False  # SGLang's eager warm-up sizes it; served and shadow-checked
    a = call_args()
    be._extend_dispatch(**a)
    assert len(served) == 1 and len(TRITON_CALLS) == 2 and be._workspace is not None
    first = be._workspace
    assert B.stats["shadow_mismatch"] >= 1 and bool((a["o_extend"] == 7).all()) and be._disabled
    be._disabled = False  # (as after a restart) capture: served, marked, not shadow-checked
    capturing[0] = True
    a = call_args()
    be._extend_dispatch(**a)
    assert len(served) == 2 and len(TRITON_CALLS) == 2 and bool((a["o_extend"] == 3).all())
    assert be._workspace_in_graph and served[-1]["workspace"] is first
    need[0] = 4096  # a larger batch under capture (a shape not sized before): Triton, no allocation
    be._ws_need.clear()
    be._extend_dispatch(**call_args())
    assert len(served) == 2 and len(TRITON_CALLS) == 3 and be._workspace is first
    be._extend_dispatch(**call_args(**swa))  # int64 offsets met first under capture: Triton
    assert len(served) == 2 and len(TRITON_CALLS) == 4
    capturing[0] = False  # eagerly: a new workspace, the captured one kept alive
    be._shadow_every = 0
    be._extend_dispatch(**call_args(**swa))
    assert len(served) == 3 and be._workspace is not first and first in be._retired
    woff = served[-1]["window_kv_offsets"]
    assert woff.dtype == torch.int32 and woff.tolist() == [3, 5] and served[-1]["sliding_window"] == 8


def test_first_full_attention_layer_of_hybrid_pools(B, monkeypatch):
    """The layer the CUDA-graph workspace is sized from: the first one whose buffers the pool hands out. SGLang's
    HybridLinearKVPool has no layer_num and raises for linear-attention ids: its full-attention layers are the keys
    of full_attention_layer_id_mapping; a plain pool whose first layers raise is scanned from start_layer."""
    class HybridLinear:
        full_attention_layer_id_mapping = {7: 1, 3: 0}

        def get_key_buffer(self, layer_id):
            if layer_id not in self.full_attention_layer_id_mapping:
                raise ValueError(f"{layer_id=} not in full attention layers")
            return torch.zeros(4, 1, 8)

    class Plain(HybridLinear):
        full_attention_layer_id_mapping = None
        start_layer, layer_num = 2, 4

        def get_key_buffer(self, layer_id):
            if layer_id < 4:
                raise ValueError("linear layer")
            return torch.zeros(4, 1, 8)

    be = make_backend(B, monkeypatch)
    be.token_to_kv_pool = HybridLinear()
    assert be._first_full_layer() == 3
    be.token_to_kv_pool = Plain()
    assert be._first_full_layer() == 4


def test_tensor_subclasses_are_tensors():
    from flashverify import _api

    class Parameterish(torch.Tensor):  # (as SGLang's parameter classes: defined outside torch)
        pass

    Parameterish.__module__ = "sglang.srt.layers.parameter"
    t = torch.zeros(4, 2, 8).as_subclass(Parameterish)
    w = _api._T("q", t)
    assert w.is_torch and w.shape == (4, 2, 8) and w.strides == (16, 8, 1) and w.dtype == "float32"


def test_workspace_must_be_contiguous_bytes():
    from flashverify import _api

    for ws in (torch.empty(1, dtype=torch.uint8).expand(10**6), torch.empty(16, dtype=torch.float32)):
        with pytest.raises(TypeError, match="workspace: expected a contiguous uint8 tensor"):
            _api.run_on_tensors(*([None] * 15), ws, 0.1, 8, True, 1, 0, 0, 0)


# v59 review findings: a library that cannot be loaded, a shadow check of an empty call, score modifiers through
# **kwargs, Workspace(device=0)
def test_unloadable_library_falls_back_instead_of_raising(B, monkeypatch, tmp_path):
    # a library file that exists but cannot be dlopen'ed (wrong arch / missing libcudart / truncated)
    bad = tmp_path / "libflashverify.so"
    bad.write_bytes(b"not an ELF file")
    from flashverify import _lib
    monkeypatch.setattr(_lib, "_LIB", None)
    monkeypatch.setenv("FLASHVERIFY_LIBRARY", str(bad))
    be = make_backend(B, monkeypatch)
    TRITON_CALLS.clear()
    a = call_args()
    be._extend_dispatch(**a)  # (v59: OSError escaped from Workspace.required_bytes -> _lib.load())
    assert len(TRITON_CALLS) == 1


def test_shadow_check_of_a_call_without_tokens(B, monkeypatch):
    # FLASHVERIFY_SHADOW=1 and a target-verify call with 0 draft rows: verify_attention returns at once, then the
    # shadow comparison reduces over an empty tensor
    o = torch.empty(0, 16, 512)
    assert B.shadow_errors(o, o.clone()) == (0.0, 0.0)  # (v59: RuntimeError from r_rows.max())


def test_handled_arguments_that_arrive_through_var_keyword_are_not_dropped(B, monkeypatch):
    # a fork / later SGLang whose extend_attention_fwd takes the score modifiers through **kwargs: the binder files
    # them under "kwargs", unexpected_argument() calls them handled, and the dispatcher's a.get("sinks") etc. are None
    import inspect
    from flashverify._sglang_args import CallBinder

    def fork_extend(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
                    custom_mask, is_causal, mask_indptr, max_len_extend, k_scale, v_scale, sm_scale=None,
                    logit_cap=0.0, **kwargs):
        TRITON_CALLS.append(o_extend)
        o_extend.fill_(7.0)

    be = make_backend(B, monkeypatch)
    be._triton_extend = fork_extend
    be._triton_signature = inspect.signature(fork_extend)
    be._binder = CallBinder(be._triton_signature)
    served = []

    def kernel(*args, out, **kw):
        served.append(kw)
        out.fill_(3.0)

    monkeypatch.setattr(B, "verify_attention", kernel)
    monkeypatch.setattr(B.Workspace, "required_bytes", staticmethod(lambda **kw: 1024))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    TRITON_CALLS.clear()
    sinks = torch.full((16,), 2.0)
    be._extend_dispatch(**call_args(sinks=sinks, sliding_window_size=8, xai_temperature_len=64))
    # either Triton serves it, or flashverify gets the modifiers (v59: flashverify served it without them)
    assert len(TRITON_CALLS) == 1 or (served and served[-1]["sinks"] is not None
                                      and served[-1]["sliding_window"] == 8)


def test_workspace_on_device_index_0_is_allocated_there(monkeypatch):
    from flashverify._api import Workspace
    seen = []
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: seen.append(kw.get("device")) or None)
    Workspace(1024, device=0)  # required_bytes(device=0) sizes on cuda:0 ...
    assert seen[-1] == 0  # ... and the buffer goes there (v59: to "cuda", the current device, by `0 or "cuda"`)
