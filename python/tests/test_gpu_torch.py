"""GPU: the torch op on SGLang-layout inputs against SGLang's own Triton `extend_attention_fwd` (run from
its public source, extracted by ../shared/tools/extract-sglang-kernels into .sglang-kernels/, kept out of
git) and against a float64 torch reference; CUDA-graph capture -> rewrite the metadata in place -> replay;
argument errors raised before any launch. Skipped with the reason where torch, CUDA or the extracted
kernels are missing."""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashverify  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.environ.get("FV_SGLANG_KERNELS", os.path.join(REPO, ".sglang-kernels"))


def sglang_extend_or_none():
    """SGLang's kernel where it was extracted, else None: the tests below check flashverify against the oracle
    first and skip (with the reason) only the comparison with Triton."""
    return _import_extend() if os.path.isdir(os.path.join(KERNELS, "sglang")) else None


def check_oracle_half(out, ref, extend):
    """flashverify's output against the float64 oracle; then a skip (with the reason) unless SGLang's kernel
    is here for the comparison with it that follows."""
    assert not torch.isnan(out).any()
    assert rel(out, ref) <= 1e-2, rel(out, ref)
    if extend is None:
        pytest.skip(f"flashverify matched the float64 oracle; the comparison with SGLang's Triton kernel needs its "
                    f"kernels extracted at {KERNELS} (../shared/tools/extract-sglang-kernels)")


def _import_extend():
    if KERNELS not in sys.path:
        sys.path.insert(0, KERNELS)
    try:
        from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd
    except ImportError:
        from sglang.srt.layers.attention.triton_ops.extend_attention import extend_attention_fwd
    return extend_attention_fwd


def tree_parents(rng, n, kind):
    if kind == "chain":
        return [-1] + list(range(n - 1))
    par = [-1]
    for i in range(1, n):
        par.append(int(rng.integers(0, i)))
    return par


# Fresh inputs every session: each batch's seed is its test's number plus this one (FV_SEED repeats a session, as in
# the C++ suites); printed with -s and in a failure's traceback
SESSION_SEED = int(os.environ.get("FV_SEED") or np.random.SeedSequence().entropy % 1_000_000_007)
print(f"[ seed     ] python GPU tests: FV_SEED={SESSION_SEED}")


class SGLangBatch:
    """Inputs exactly as TritonAttnBackend hands them to extend_attention_fwd in target verify."""

    def __init__(self, seed, *, mla, batch, n, hq, hkv=1, d=128, max_prefix=3000, mask_dtype=torch.bool,
                 qo_dtype=torch.int32, dtype=torch.bfloat16, padded=1, extra_slots=64, tree="random"):
        self.seed = SESSION_SEED + seed
        rng = np.random.default_rng(self.seed)
        dev = "cuda"
        self.mla, self.n, self.batch = mla, n, batch
        dqk, dv = (576, 512) if mla else (d, d)
        self.hq, self.hkv, self.dqk, self.dv = hq, hkv, dqk, dv
        prefixes = [int(x) for x in rng.integers(1, max_prefix, batch)]
        for b in range(min(padded, batch - 1)):
            prefixes[batch - 1 - b] = -1  # SGLang's CUDA-graph padding: prefix 1 at slot 0
        plen = [1 if p < 0 else p for p in prefixes]
        total = sum(p for p in prefixes if p > 0)
        num_slots = 1 + total + extra_slots
        perm = rng.permutation(np.arange(1, num_slots))
        idx, pos = [], 0
        for p in prefixes:
            if p < 0:
                idx.append([0])
            else:
                idx.append(perm[pos:pos + p])
                pos += p
        kv_indices = np.concatenate(idx + [np.full(97, 10**9)])  # over-allocated, tail never read
        T = batch * n
        g = torch.Generator(device=dev).manual_seed(seed)
        rnd = lambda *shape: (torch.rand(*shape, generator=g, device=dev) * 2 - 1).to(dtype)
        self.q = rnd(T, hq, dqk)
        self.k_extend = rnd(T, hkv, dqk)
        self.k_buffer = rnd(num_slots, hkv, dqk)
        if mla:
            self.v_buffer = self.k_buffer[..., :dv]  # MLATokenToKVPool.get_value_buffer: a strided view
            self.v_extend = self.k_extend[..., :dv].contiguous()
        else:
            self.v_buffer = rnd(num_slots, hkv, dv)
            self.v_extend = rnd(T, hkv, dv)
        self.qo_indptr = torch.arange(0, (batch + 1) * n, n, dtype=qo_dtype, device=dev)
        self.kv_indptr = torch.tensor(np.concatenate([[0], np.cumsum(plen)]), dtype=torch.int32, device=dev)
        self.kv_indices = torch.tensor(kv_indices, dtype=torch.int64, device=dev)
        chunks, mind = [], [0]
        self.parents = []
        for b in range(batch):
            par = tree_parents(rng, n, tree)
            self.parents.append(par)
            m = np.ones((n, plen[b] + n), dtype=np.uint8)
            m[:, plen[b]:] = 0
            for i in range(n):
                j = i
                while j >= 0:
                    m[i, plen[b] + j] = 1
                    j = par[j]
            chunks.append(m.reshape(-1))
            mind.append(mind[-1] + m.size)
        self.custom_mask = torch.tensor(np.concatenate(chunks), device=dev).to(mask_dtype)
        self.mask_indptr = torch.tensor(mind, dtype=torch.int64, device=dev)
        self.plen, self.sm_scale = plen, (192 ** -0.5 if mla else dqk ** -0.5)

    def reference(self):
        """float64 dense attention with the tree mask."""
        out = torch.zeros(self.q.shape[0], self.hq, self.dv, dtype=torch.float64, device="cuda")
        g = self.hq // self.hkv
        kv_ind = self.kv_indices.tolist()
        for b in range(self.batch):
            kv0 = int(self.kv_indptr[b])
            slots = torch.tensor(kv_ind[kv0:kv0 + self.plen[b]], device="cuda")
            for i in range(self.n):
                t = b * self.n + i
                vis, j = [], i
                while j >= 0:
                    vis.append(b * self.n + j)
                    j = self.parents[b][j]
                vis = torch.tensor(vis, device="cuda")
                for hk in range(self.hkv):
                    keys = torch.cat([self.k_buffer[slots, hk], self.k_extend[vis, hk]]).double()
                    vals = torch.cat([self.v_buffer[slots, hk], self.v_extend[vis, hk]]).double()
                    qs = self.q[t, hk * g:(hk + 1) * g].double()
                    w = torch.softmax(qs @ keys.T * self.sm_scale, dim=-1)
                    out[t, hk * g:(hk + 1) * g] = w @ vals
        return out

    def run_triton(self, extend):
        o = torch.empty(self.q.shape[0], self.hq, self.dv, dtype=self.q.dtype, device="cuda")
        extend(self.q, self.k_extend, self.v_extend, o, self.k_buffer, self.v_buffer, self.qo_indptr,
               self.kv_indptr, self.kv_indices, self.custom_mask, True, self.mask_indptr, self.n, 1.0, 1.0,
               self.sm_scale)
        return o

    def fv_inputs(self):
        v_ext = self.k_extend[..., :self.dv] if self.mla else self.v_extend
        return (self.q, self.k_extend, v_ext, self.k_buffer, self.v_buffer, self.qo_indptr, self.kv_indptr,
                self.kv_indices)

    def workspace(self):
        return flashverify.Workspace.for_shapes(batch_size=self.batch, max_draft=self.n, num_q_heads=self.hq,
                                                num_kv_heads=self.hkv, head_dim_qk=self.dqk, head_dim_v=self.dv,
                                                dtype=self.q.dtype)


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


CASES = [
    dict(mla=True, batch=3, n=8, hq=16, mask_dtype=torch.bool, qo_dtype=torch.int32),
    dict(mla=True, batch=2, n=16, hq=8, mask_dtype=torch.uint8, qo_dtype=torch.int64, dtype=torch.float16),
    dict(mla=True, batch=4, n=4, hq=128, mask_dtype=torch.uint8, qo_dtype=torch.int64, tree="chain"),
    dict(mla=False, batch=3, n=8, hq=32, hkv=8, d=128, mask_dtype=torch.bool, qo_dtype=torch.int32),
    dict(mla=False, batch=2, n=16, hq=8, hkv=1, d=128, mask_dtype=torch.uint8, qo_dtype=torch.int64),
    dict(mla=False, batch=3, n=6, hq=16, hkv=2, d=64, mask_dtype=torch.uint8, qo_dtype=torch.int32,
         dtype=torch.float16),
    dict(mla=False, batch=2, n=8, hq=8, hkv=4, d=256, mask_dtype=torch.bool, qo_dtype=torch.int64),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_sglang_triton_extend(case):
    extend = sglang_extend_or_none()
    sb = SGLangBatch(100 + case, **CASES[case])
    ref = sb.reference()
    out = torch.full((sb.q.shape[0], sb.hq, sb.dv), float("nan"), dtype=sb.q.dtype, device="cuda")
    flashverify.verify_attention(*sb.fv_inputs(), custom_mask=sb.custom_mask, mask_indptr=sb.mask_indptr,
                                 sm_scale=sb.sm_scale, max_draft=sb.n, workspace=sb.workspace(), out=out)
    torch.cuda.synchronize()
    check_oracle_half(out, ref, extend)
    tri = sb.run_triton(extend)
    e_fv, e_tri, e_between = rel(out, ref), rel(tri, ref), rel(out, tri)
    print(f"case {case}: flashverify {e_fv:.2e}, triton {e_tri:.2e}, between {e_between:.2e}")
    assert not torch.isnan(out).any()
    assert e_fv <= 1e-2 and e_between <= 1e-2
    assert e_fv <= max(2 * e_tri, 1e-3), (e_fv, e_tri)


MODIFIERS = {
    "sinks": dict(sinks=True),
    "logit_cap": dict(logit_cap=1.5),
    "sliding_window": dict(sliding_window_size=700),
    "sliding_window_offsets": dict(sliding_window_size=6, window_offsets=True),
    "xai_temperature": dict(xai_temperature_len=500),
    "kv_scale": dict(k_scale=0.75, v_scale=1.5),
    "all": dict(sinks=True, logit_cap=2.0, sliding_window_size=900, window_offsets=True, xai_temperature_len=400,
                k_scale=1.25, v_scale=0.5),
}


def with_window_offsets(sb, rng):
    """SGLang's sliding-window byte-mask layout: rows off_b + P_b + N_b wide, draft columns from off_b + P_b."""
    offs = [int(x) for x in rng.integers(0, 9, sb.batch)]
    chunks, mind = [], [0]
    for b in range(sb.batch):
        n, p, off = sb.n, sb.plen[b], offs[b]
        m = np.ones((n, off + p + n), dtype=np.uint8)
        m[:, off + p:] = 0
        for i in range(n):
            j = i
            while j >= 0:
                m[i, off + p + j] = 1
                j = sb.parents[b][j]
        chunks.append(m.reshape(-1))
        mind.append(mind[-1] + m.size)
    sb.custom_mask = torch.tensor(np.concatenate(chunks), device="cuda").to(sb.custom_mask.dtype)
    sb.mask_indptr = torch.tensor(mind, dtype=torch.int64, device="cuda")
    return torch.tensor(offs, dtype=torch.int32, device="cuda")


def oracle_with_modifiers(sb, **mods):
    """flashverify's float64 CPU oracle on host copies of the batch."""
    f = lambda t: t.float().cpu().numpy()
    kp = f(sb.k_buffer)
    vp = kp[..., :sb.dv] if sb.mla else f(sb.v_buffer)
    ve = f(sb.k_extend)[..., :sb.dv] if sb.mla else f(sb.v_extend)
    host = {k: (v.cpu().numpy() if isinstance(v, torch.Tensor) else v) for k, v in mods.items()}
    out, _ = flashverify.reference(f(sb.q), f(sb.k_extend), ve, kp, vp, sb.qo_indptr.cpu().numpy(),
                                   sb.kv_indptr.cpu().numpy(), sb.kv_indices.cpu().numpy(), sm_scale=sb.sm_scale,
                                   custom_mask=sb.custom_mask.cpu().numpy(), mask_indptr=sb.mask_indptr.cpu().numpy(),
                                   max_draft=sb.n, **host)
    return torch.from_numpy(out).cuda()


@pytest.mark.parametrize("mla", [True, False])
@pytest.mark.parametrize("feature", list(MODIFIERS))
def test_score_modifiers_match_sglang_triton(feature, mla):
    """Each of SGLang's per-layer modifiers on: SGLang's Triton extend kernel and flashverify on the same
    inputs, both against the float64 oracle with the same modifiers."""
    extend = sglang_extend_or_none()
    kw = dict(mla=mla, batch=3, n=8, hq=16 if mla else 32, hkv=1 if mla else 8, max_prefix=2500)
    sb = SGLangBatch(300 + len(feature) + 7 * mla, **kw)
    spec = dict(MODIFIERS[feature])
    rng = np.random.default_rng(5)
    sinks = torch.tensor(rng.uniform(-1, 3, sb.hq), dtype=torch.float32, device="cuda") if spec.pop("sinks", False) else None
    woff = with_window_offsets(sb, rng) if spec.pop("window_offsets", False) else None
    window = spec.get("sliding_window_size", -1)
    cap, xai = spec.get("logit_cap", 0.0), spec.get("xai_temperature_len", -1)
    ks, vs = spec.get("k_scale", 1.0), spec.get("v_scale", 1.0)

    out = torch.full((sb.q.shape[0], sb.hq, sb.dv), float("nan"), dtype=sb.q.dtype, device="cuda")
    flashverify.verify_attention(*sb.fv_inputs(), custom_mask=sb.custom_mask, mask_indptr=sb.mask_indptr,
                                 sm_scale=sb.sm_scale, max_draft=sb.n, workspace=sb.workspace(), out=out,
                                 sinks=sinks, window_kv_offsets=woff, logit_cap=cap, sliding_window=window,
                                 xai_temperature_len=xai, k_scale=ks, v_scale=vs)
    torch.cuda.synchronize()
    mods = dict(logit_cap=cap, sliding_window=window if window > 0 else 0,
                xai_temperature_len=xai if xai > 0 else 0, k_scale=ks, v_scale=vs)
    if sinks is not None:
        mods["sinks"] = sinks
    if woff is not None:
        mods["window_kv_offsets"] = woff
    ref = oracle_with_modifiers(sb, **mods)
    check_oracle_half(out, ref, extend)
    tri = torch.empty_like(out)
    extend(sb.q, sb.k_extend, sb.v_extend, tri, sb.k_buffer, sb.v_buffer, sb.qo_indptr, sb.kv_indptr, sb.kv_indices,
           sb.custom_mask, True, sb.mask_indptr, sb.n, ks, vs, sb.sm_scale, logit_cap=cap,
           sliding_window_size=window, sinks=sinks, xai_temperature_len=xai,
           # SGLang always hands its SWA layers offsets (zeros when nothing was dropped); its kernel loads them
           window_kv_offsets=woff if woff is not None or window <= 0 else torch.zeros(sb.batch, dtype=torch.int32,
                                                                                      device="cuda"))
    torch.cuda.synchronize()
    e_fv, e_tri, e_between = rel(out, ref), rel(tri, ref), rel(out, tri)
    print(f"{feature} mla={mla}: flashverify {e_fv:.2e}, triton {e_tri:.2e}, between {e_between:.2e}")
    assert not torch.isnan(out).any()
    assert e_tri <= 1e-2, f"SGLang's kernel disagrees with the oracle's reading of {feature}: {e_tri:.2e}"
    assert e_fv <= 1e-2 and e_between <= 1e-2
    assert e_fv <= max(2 * e_tri, 1e-3), (e_fv, e_tri)


@pytest.mark.parametrize("mla", [True, False])
def test_fp8_kv_cache_matches_sglang_triton(mla):
    """An fp8 e4m3 KV cache as SGLang keeps it (float8_e4m3fn views) with k_scale / v_scale: flashverify
    and SGLang's Triton extend kernel against the float64 oracle fed the dequantized cache. Triton rounds q
    (and P) to fp8 for its prefix dot products; flashverify widens the cache to 16 bits instead."""
    extend = sglang_extend_or_none()
    kw = dict(mla=mla, batch=3, n=8, hq=16 if mla else 32, hkv=1 if mla else 8, max_prefix=2500)
    sb = SGLangBatch(400 + mla, **kw)
    fp8 = torch.float8_e4m3fn
    sb.k_buffer = sb.k_buffer.to(fp8)
    sb.v_buffer = sb.k_buffer[..., :sb.dv] if mla else sb.v_buffer.to(fp8)
    ks, vs = 0.8, 1.3
    out = torch.full((sb.q.shape[0], sb.hq, sb.dv), float("nan"), dtype=sb.q.dtype, device="cuda")
    flashverify.verify_attention(*sb.fv_inputs(), custom_mask=sb.custom_mask, mask_indptr=sb.mask_indptr,
                                 sm_scale=sb.sm_scale, max_draft=sb.n, workspace=sb.workspace(), out=out,
                                 k_scale=ks, v_scale=vs)
    torch.cuda.synchronize()
    ref = oracle_with_modifiers(sb, k_scale=ks, v_scale=vs)  # the cache decoded to float32 on the host
    check_oracle_half(out, ref, extend)
    tri = torch.empty_like(out)
    extend(sb.q, sb.k_extend, sb.v_extend, tri, sb.k_buffer, sb.v_buffer, sb.qo_indptr, sb.kv_indptr, sb.kv_indices,
           sb.custom_mask, True, sb.mask_indptr, sb.n, ks, vs, sb.sm_scale)
    torch.cuda.synchronize()
    e_fv, e_tri, e_between = rel(out, ref), rel(tri, ref), rel(out, tri)
    print(f"fp8 kv mla={mla}: flashverify {e_fv:.2e}, triton {e_tri:.2e}, between {e_between:.2e}")
    assert not torch.isnan(out).any()
    assert e_fv <= 1e-2, e_fv
    assert e_fv <= max(2 * e_tri, 1e-3), (e_fv, e_tri)
    assert e_between <= 6e-2, e_between  # the shadow check's fp8 tolerance


@pytest.mark.parametrize("mla", [True, False])
def test_cuda_graph_capture_rewrite_replay(mla):
    """Capture the op once; rewrite qo/kv indptr, kv_indices, the mask and mask_indptr in place (as SGLang
    does before each replay), replay, and compare with the reference for the new contents."""
    kw = dict(mla=mla, batch=3, n=8, hq=16 if mla else 32, hkv=1 if mla else 8, qo_dtype=torch.int64,
              mask_dtype=torch.uint8, max_prefix=2000)
    base = SGLangBatch(7, **kw)
    ws = base.workspace()
    # buffers at fixed addresses, sized for the largest contents any rewrite below can have
    cap_slots, cap_idx, cap_mask = 3 * 2000 + 200, 3 * 2000 + 200, 3 * 8 * 2100
    bufs = dict(q=base.q.clone(), k_extend=base.k_extend.clone(), qo_indptr=base.qo_indptr.clone(),
                kv_indptr=base.kv_indptr.clone(), mask_indptr=base.mask_indptr.clone(),
                k_buffer=torch.zeros(cap_slots, base.hkv, base.dqk, dtype=base.q.dtype, device="cuda"),
                kv_indices=torch.zeros(cap_idx, dtype=torch.int64, device="cuda"),
                custom_mask=torch.zeros(cap_mask, dtype=torch.uint8, device="cuda"))
    bufs["v_buffer"] = (bufs["k_buffer"][..., :base.dv] if mla else
                        torch.zeros(cap_slots, base.hkv, base.dv, dtype=base.q.dtype, device="cuda"))
    bufs["v_extend"] = bufs["k_extend"][..., :base.dv] if mla else base.v_extend.clone()
    out = torch.empty(base.q.shape[0], base.hq, base.dv, dtype=base.q.dtype, device="cuda")

    def load(sb):
        for name in ("q", "k_extend", "qo_indptr", "kv_indptr", "mask_indptr"):
            bufs[name].copy_(getattr(sb, name))
        bufs["k_buffer"].zero_()
        bufs["k_buffer"][:sb.k_buffer.shape[0]].copy_(sb.k_buffer)
        if not mla:
            bufs["v_extend"].copy_(sb.v_extend)
            bufs["v_buffer"].zero_()
            bufs["v_buffer"][:sb.v_buffer.shape[0]].copy_(sb.v_buffer)
        bufs["kv_indices"][:sb.kv_indices.numel()].copy_(sb.kv_indices)
        bufs["custom_mask"][:sb.custom_mask.numel()].copy_(sb.custom_mask.to(torch.uint8))

    def call():
        flashverify.verify_attention(bufs["q"], bufs["k_extend"], bufs["v_extend"], bufs["k_buffer"],
                                     bufs["v_buffer"], bufs["qo_indptr"], bufs["kv_indptr"], bufs["kv_indices"],
                                     custom_mask=bufs["custom_mask"], mask_indptr=bufs["mask_indptr"],
                                     sm_scale=base.sm_scale, max_draft=base.n, workspace=ws, out=out)

    load(base)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        call()  # warm-up outside the graph
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for r in range(3):
        sb = SGLangBatch(50 + r, **{**kw, "max_prefix": 1500 + 200 * r, "tree": ["random", "chain", "random"][r]})
        assert sb.k_buffer.shape[0] <= cap_slots and sb.kv_indices.numel() <= cap_idx
        assert sb.custom_mask.numel() <= cap_mask
        load(sb)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        e = rel(out, sb.reference())
        print(f"replay {r}: rel L2 {e:.2e}")
        assert e <= 1e-2


def test_errors_before_launch():
    sb = SGLangBatch(3, mla=False, batch=2, n=4, hq=8, hkv=2, d=64)
    args = sb.fv_inputs()
    kw = dict(custom_mask=sb.custom_mask, mask_indptr=sb.mask_indptr, sm_scale=sb.sm_scale, max_draft=4,
              workspace=sb.workspace())
    with pytest.raises(TypeError, match="k_draft: dtype"):
        flashverify.verify_attention(args[0], args[1].half(), *args[2:], **kw)
    with pytest.raises(TypeError, match="is on cpu"):
        flashverify.verify_attention(*args[:7], args[7].cpu(), **kw)
    with pytest.raises(ValueError, match="v_draft: expected shape"):
        flashverify.verify_attention(args[0], args[1], args[2][:-1], *args[3:], **kw)
    with pytest.raises(ValueError, match="last dimension must be contiguous"):
        flashverify.verify_attention(args[0].transpose(1, 2).contiguous().transpose(1, 2), *args[1:], **kw)
    small = flashverify.Workspace(16)
    with pytest.raises(flashverify.FlashVerifyError, match="FV_ERR_WORKSPACE_TOO_SMALL"):
        flashverify.verify_attention(*args, **{**kw, "workspace": small})


def test_no_draft_tokens_and_empty_index_arrays():
    """q with 0 rows (empty CUDA tensors, which have no storage): nothing is launched and `out` comes back as it
    is; an empty kv_indices tensor (data_ptr 0) is refused by name, not as the C ABI's NULL argument."""
    sb = SGLangBatch(5, mla=False, batch=2, n=4, hq=8, hkv=2, d=64)
    args = list(sb.fv_inputs())
    kw = dict(custom_mask=sb.custom_mask, mask_indptr=sb.mask_indptr, sm_scale=sb.sm_scale, max_draft=4,
              workspace=sb.workspace())
    empty = [args[0][:0], args[1][:0], args[2][:0], args[3], args[4], torch.zeros_like(args[5]), args[6], args[7]]
    out = flashverify.verify_attention(*empty, **kw)
    assert out.shape == (0, args[0].shape[1], args[2].shape[2])
    with pytest.raises(ValueError, match="v_draft: q has 0 rows"):
        flashverify.verify_attention(*empty[:2], args[2][:1], *empty[3:], **kw)
    no_slots = torch.empty(0, dtype=args[7].dtype, device="cuda")
    with pytest.raises(ValueError, match="kv_indices: has no storage"):
        flashverify.verify_attention(*args[:7], no_slots, **kw)


def test_torch_compile_traces_the_op():
    sb = SGLangBatch(9, mla=False, batch=2, n=4, hq=8, hkv=1, d=128, max_prefix=500)
    ws = sb.workspace()

    def f(q):
        # poisoned: an op that wrote nothing would otherwise pass on whatever the allocator's block held (an earlier
        # test's result of the same shape among them)
        out = torch.full((q.shape[0], sb.hq, sb.dv), float("nan"), dtype=q.dtype, device=q.device)
        return flashverify.verify_attention(q, *sb.fv_inputs()[1:], custom_mask=sb.custom_mask,
                                            mask_indptr=sb.mask_indptr, sm_scale=sb.sm_scale, max_draft=4,
                                            workspace=ws, out=out) * 1.0

    compiled = torch.compile(f, fullgraph=False)
    got = compiled(sb.q)
    torch.cuda.synchronize()
    assert not torch.isnan(got).any()
    assert rel(got, sb.reference()) <= 1e-2
