"""The numpy / CPU path: the oracle through ctypes against an independent dense numpy computation, the
mask forms and addressing modes agreeing, and argument validation. Runs without torch and without a GPU."""
import os
import subprocess
import sys

import numpy as np
import pytest

import flashverify
from flashverify import FlashVerifyError


def make_problem(rng, *, mla=False, batch=3, max_draft=6, hq=4, hkv=2, d=64, dtype=np.float32):
    if mla:
        hq, hkv, dqk, dv = 4, 1, 576, 512
    else:
        dqk = dv = d
    drafts = [max_draft] + list(rng.integers(1, max_draft + 1, batch - 1))
    prefixes = list(rng.integers(0, 40, batch))
    T, P = sum(drafts), sum(prefixes)
    num_slots = P + 11
    slots = rng.permutation(num_slots)[:P]
    q = rng.uniform(-1, 1, (T, hq, dqk)).astype(dtype)
    k_draft = rng.uniform(-1, 1, (T, hkv, dqk)).astype(dtype)
    k_pool = rng.uniform(-1, 1, (num_slots, hkv, dqk)).astype(dtype)
    if mla:
        v_draft, v_pool = k_draft[..., :dv], k_pool[..., :dv]  # strided views, as SGLang passes them
    else:
        v_draft = rng.uniform(-1, 1, (T, hkv, dv)).astype(dtype)
        v_pool = rng.uniform(-1, 1, (num_slots, hkv, dv)).astype(dtype)
    qo = np.concatenate([[0], np.cumsum(drafts)]).astype(np.int32)
    kv = np.concatenate([[0], np.cumsum(prefixes)]).astype(np.int32)
    parents = []
    for n in drafts:
        par = [-1] + [int(rng.integers(-1, i)) if rng.random() < 0.9 else -1 for i in range(1, n)]
        par = [p if p < i else -1 for i, p in enumerate(par)]
        parents += par
    return dict(q=q, k_draft=k_draft, v_draft=v_draft, k_pool=k_pool, v_pool=v_pool, qo_indptr=qo, kv_indptr=kv,
                kv_indices=slots.astype(np.int64), parents=np.array(parents, dtype=np.int32), drafts=drafts,
                prefixes=prefixes)


def ancestors(parents_local, i):
    out = set()
    while i >= 0:
        out.add(i)
        i = parents_local[i]
    return out


def dense_numpy(pb, sm_scale):
    """An independent float64 computation: gather, dense scores, masked softmax."""
    q, kd, vd, kp, vp = (pb[n].astype(np.float64) for n in ("q", "k_draft", "v_draft", "k_pool", "v_pool"))
    hq, hkv = q.shape[1], kd.shape[1]
    g = hq // hkv
    out = np.zeros((q.shape[0], hq, vd.shape[2]))
    lse = np.zeros((q.shape[0], hq))
    for b, (n, p) in enumerate(zip(pb["drafts"], pb["prefixes"])):
        qo0, kv0 = pb["qo_indptr"][b], pb["kv_indptr"][b]
        slots = pb["kv_indices"][kv0:kv0 + p]
        par = pb["parents"][qo0:qo0 + n]
        for i in range(n):
            vis = sorted(ancestors(par, i))
            for h in range(hq):
                keys = np.concatenate([kp[slots, h // g], kd[qo0 + np.array(vis, dtype=int), h // g]])
                vals = np.concatenate([vp[slots, h // g], vd[qo0 + np.array(vis, dtype=int), h // g]])
                s = keys @ q[qo0 + i, h] * sm_scale
                w = np.exp(s - s.max())
                out[qo0 + i, h] = w @ vals / w.sum()
                lse[qo0 + i, h] = s.max() + np.log(w.sum())
    return out, lse


def masks_for(pb):
    """The same tree as SGLang's byte mask (+ mask_indptr) and as packed bits."""
    chunks, indptr, bits = [], [0], []
    max_n = max(pb["drafts"])
    words = (max_n + 31) // 32
    for b, (n, p) in enumerate(zip(pb["drafts"], pb["prefixes"])):
        qo0 = pb["qo_indptr"][b]
        par = pb["parents"][qo0:qo0 + n]
        m = np.ones((n, p + n), dtype=np.uint8)
        m[:, p:] = 0
        for i in range(n):
            row = np.zeros(words, dtype=np.uint32)
            for j in ancestors(par, i):
                m[i, p + j] = 1
                row[j // 32] |= np.uint32(1 << (j % 32))
            bits.append(row)
        chunks.append(m.reshape(-1))
        indptr.append(indptr[-1] + n * (p + n))
    return np.concatenate(chunks), np.array(indptr, dtype=np.int64), np.stack(bits).view(np.int32)


@pytest.mark.parametrize("mla", [False, True])
def test_oracle_matches_dense_numpy_for_every_mask_form(mla):
    rng = np.random.default_rng(7 + mla)
    pb = make_problem(rng, mla=mla)
    scale = 0.125  # exactly representable: the library takes sm_scale as a float32
    want, want_lse = dense_numpy(pb, scale)
    mask, mask_indptr, bits = masks_for(pb)
    common = {k: pb[k] for k in ("q", "k_draft", "v_draft", "k_pool", "v_pool", "qo_indptr", "kv_indptr", "kv_indices")}
    for form in (dict(custom_mask=mask, mask_indptr=mask_indptr), dict(custom_mask=mask.astype(bool), mask_indptr=mask_indptr),
                 dict(mask_bits=bits), dict(parents=pb["parents"])):
        out, lse = flashverify.reference(**common, sm_scale=scale, **form)
        np.testing.assert_allclose(out, want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(lse, want_lse, rtol=1e-6, atol=1e-6)


def dense_numpy_modified(pb, sm_scale, *, sinks=None, logit_cap=0.0, sliding_window=0, xai_temperature_len=0,
                         k_scale=1.0, v_scale=1.0):
    """dense_numpy with SGLang's score modifiers, written from SGLang's extend_attention semantics."""
    q, kd, vd, kp, vp = (pb[n].astype(np.float64) for n in ("q", "k_draft", "v_draft", "k_pool", "v_pool"))
    hq, hkv = q.shape[1], kd.shape[1]
    g = hq // hkv
    out = np.zeros((q.shape[0], hq, vd.shape[2]))
    lse = np.zeros((q.shape[0], hq))
    W, L = sliding_window, xai_temperature_len
    for b, (n, p) in enumerate(zip(pb["drafts"], pb["prefixes"])):
        qo0, kv0 = pb["qo_indptr"][b], pb["kv_indptr"][b]
        slots = pb["kv_indices"][kv0:kv0 + p]
        par = pb["parents"][qo0:qo0 + n]
        for i in range(n):
            qpos = p + i
            pre = [k for k in range(p) if not (W > 0 and qpos > k + W)]
            vis = sorted(j for j in ancestors(par, i) if not (W > 0 and i > j + W))
            temp = np.log2(qpos) / np.log2(L) if L > 0 and qpos > L else 1.0
            for h in range(hq):
                kpre, kdr = kp[slots[pre], h // g], kd[qo0 + np.array(vis, dtype=int), h // g]
                s = np.concatenate([kpre @ q[qo0 + i, h] * sm_scale * k_scale, kdr @ q[qo0 + i, h] * sm_scale])
                if logit_cap > 0:
                    s = logit_cap * np.tanh(s / logit_cap)
                s = s * temp
                vals = np.concatenate([vp[slots[pre], h // g] * v_scale, vd[qo0 + np.array(vis, dtype=int), h // g]])
                w = np.exp(s - s.max())
                den = w.sum() + (np.exp(float(sinks[h]) - s.max()) if sinks is not None else 0.0)
                out[qo0 + i, h] = w @ vals / den
                lse[qo0 + i, h] = s.max() + np.log(den)
    return out, lse


@pytest.mark.parametrize("mla", [False, True])
def test_oracle_score_modifiers_match_dense_numpy(mla):
    rng = np.random.default_rng(17 + mla)
    pb = make_problem(rng, mla=mla)
    scale = 0.125
    common = {k: pb[k] for k in ("q", "k_draft", "v_draft", "k_pool", "v_pool", "qo_indptr", "kv_indptr", "kv_indices")}
    hq = pb["q"].shape[1]
    sinks = rng.uniform(-1, 3, hq).astype(np.float32)
    cases = [dict(sinks=sinks), dict(logit_cap=0.75), dict(sliding_window=3), dict(xai_temperature_len=4),
             dict(k_scale=0.5, v_scale=1.5),
             dict(sinks=sinks, logit_cap=2.0, sliding_window=5, xai_temperature_len=3, k_scale=1.25, v_scale=0.5)]
    for mods in cases:
        want, want_lse = dense_numpy_modified(pb, scale, **mods)
        out, lse = flashverify.reference(**common, sm_scale=scale, parents=pb["parents"], **mods)
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-9, err_msg=str(list(mods)))
        np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5, err_msg=str(list(mods)))


def e4m3_decode(codes):
    """fp8 e4m3 bytes -> float64, written here independently of the library."""
    c = codes.astype(np.int64)
    sign = np.where(c >> 7, -1.0, 1.0)
    exp, mant = (c >> 3) & 15, c & 7
    val = np.where(exp == 0, mant * 2.0 ** -9, (8 + mant) * 2.0 ** (exp - 10))
    return np.where((exp == 15) & (mant == 7), np.nan, sign * val)


@pytest.mark.parametrize("mla", [False, True])
def test_fp8_pool_equals_its_decoded_pool(mla):
    rng = np.random.default_rng(29 + mla)
    pb = make_problem(rng, mla=mla)
    codes = rng.integers(0, 256, pb["k_pool"].shape).astype(np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x38  # no NaN codes
    vcodes = codes[..., :pb["v_pool"].shape[2]] if mla else rng.integers(0, 120, pb["v_pool"].shape).astype(np.uint8)
    common = {k: pb[k] for k in ("q", "k_draft", "v_draft", "qo_indptr", "kv_indptr", "kv_indices")}
    mods = dict(k_scale=0.5, v_scale=2.0)
    out8, lse8 = flashverify.reference(**common, k_pool=codes, v_pool=vcodes, parents=pb["parents"], sm_scale=0.125,
                                       **mods)
    kdec, vdec = e4m3_decode(codes).astype(np.float32), e4m3_decode(vcodes).astype(np.float32)
    out32, lse32 = flashverify.reference(**common, k_pool=kdec, v_pool=vdec, parents=pb["parents"], sm_scale=0.125,
                                         **mods)
    assert np.array_equal(out8, out32) and np.array_equal(lse8, lse32)


def test_page_table_and_index_widths_agree():
    rng = np.random.default_rng(3)
    pb = make_problem(rng, batch=2)
    common = {k: pb[k] for k in ("q", "k_draft", "v_draft", "qo_indptr", "kv_indptr")}
    base, _ = flashverify.reference(**common, k_pool=pb["k_pool"], v_pool=pb["v_pool"], kv_indices=pb["kv_indices"],
                                    parents=pb["parents"], sm_scale=0.2)
    narrow, _ = flashverify.reference(**common, k_pool=pb["k_pool"], v_pool=pb["v_pool"],
                                      kv_indices=pb["kv_indices"].astype(np.int32), parents=pb["parents"], sm_scale=0.2)
    assert np.array_equal(base, narrow)
    # the same tokens placed in pages of 4
    ps = 4
    pages_per = [-(-p // ps) for p in pb["prefixes"]]
    table = np.full((2, max(pages_per) + 1), -1, dtype=np.int32)
    kp = np.full((sum(pages_per) * ps + ps, pb["k_pool"].shape[1], pb["k_pool"].shape[2]), np.nan, dtype=np.float32)
    vp = np.full((kp.shape[0],) + pb["v_pool"].shape[1:], np.nan, dtype=np.float32)
    page = 1
    for b, p in enumerate(pb["prefixes"]):
        kv0 = pb["kv_indptr"][b]
        for pg in range(pages_per[b]):
            table[b, pg] = page
            for o in range(ps):
                t = pg * ps + o
                if t < p:
                    kp[page * ps + o] = pb["k_pool"][pb["kv_indices"][kv0 + t]]
                    vp[page * ps + o] = pb["v_pool"][pb["kv_indices"][kv0 + t]]
            page += 1
    paged, _ = flashverify.reference(**common, k_pool=kp, v_pool=vp, page_table=table, page_size=ps,
                                     parents=pb["parents"], sm_scale=0.2)
    assert np.array_equal(base, paged)
    assert np.isfinite(paged).all()  # NaN rows of the pool nobody references never leak


def test_validation_names_the_argument():
    rng = np.random.default_rng(5)
    pb = make_problem(rng)
    common = {k: pb[k] for k in ("q", "k_draft", "v_draft", "k_pool", "v_pool", "qo_indptr", "kv_indptr", "kv_indices")}
    with pytest.raises(ValueError, match="exactly one tree mask"):
        flashverify.reference(**common, sm_scale=0.1)
    with pytest.raises(ValueError, match="k_draft: expected shape"):
        flashverify.reference(**{**common, "k_draft": pb["k_draft"][:-1]}, parents=pb["parents"], sm_scale=0.1)
    with pytest.raises(ValueError, match="not a multiple"):
        flashverify.reference(**{**common, "q": np.zeros((pb["q"].shape[0], 3, 64), np.float32)},
                              parents=pb["parents"], sm_scale=0.1)
    with pytest.raises(ValueError, match="head dims"):
        bad = {n: np.zeros(a.shape[:-1] + (48,), np.float32) for n, a in common.items() if a.ndim == 3}
        flashverify.reference(**{**common, **bad}, parents=pb["parents"], sm_scale=0.1)
    with pytest.raises(TypeError, match="k_pool: dtype float16 is neither q's"):
        flashverify.reference(**{**common, "k_pool": pb["k_pool"].astype(np.float16)}, parents=pb["parents"], sm_scale=0.1)
    with pytest.raises(TypeError, match="kv_indptr: expected int32 or int64"):
        flashverify.reference(**{**common, "kv_indptr": pb["kv_indptr"].astype(np.float32)}, parents=pb["parents"],
                              sm_scale=0.1)
    # values the library checks: a slot past the pool, a cycle in the tree
    bad_idx = pb["kv_indices"].copy()
    bad_idx[0] = pb["k_pool"].shape[0]
    with pytest.raises(FlashVerifyError, match="FV_ERR_BAD_INDEX: .*kv_indices\\[0\\]"):
        flashverify.reference(**{**common, "kv_indices": bad_idx}, parents=pb["parents"], sm_scale=0.1)
    cyc = pb["parents"].copy()
    cyc[1] = 1
    with pytest.raises(FlashVerifyError, match="FV_ERR_BAD_MASK"):
        flashverify.reference(**common, parents=cyc, sm_scale=0.1)
    mask, mask_indptr, _ = masks_for(pb)
    mask_indptr[1] += 1
    with pytest.raises(FlashVerifyError, match="FV_ERR_MASK_INDPTR"):
        flashverify.reference(**common, custom_mask=mask, mask_indptr=mask_indptr, sm_scale=0.1)
    # integers past the C ABI's int32 fields are refused, not wrapped (2**32 + 2 would read as a window of 2)
    for name in ("sliding_window", "xai_temperature_len", "max_draft"):
        with pytest.raises(ValueError, match=f"{name} = {2**32 + 2} does not fit"):
            flashverify.reference(**common, parents=pb["parents"], sm_scale=0.1, **{name: 2**32 + 2})


def test_arrays_too_short_or_strided_are_rejected_before_the_library_reads_them():
    """What the C ABI cannot see (array lengths, strides of flat arrays) is checked here: an indptr end past its
    array, index arrays shorter than the batch, strided masks / parents / sinks (read as contiguous, they would
    give silently wrong attention)."""
    rng = np.random.default_rng(6)
    pb = make_problem(rng)
    common = {k: pb[k] for k in ("q", "k_draft", "v_draft", "k_pool", "v_pool", "qo_indptr", "kv_indptr", "kv_indices")}
    T, B = pb["q"].shape[0], len(pb["drafts"])
    qo = pb["qo_indptr"].copy()
    qo[-1] = T + 2  # rows past q and out
    with pytest.raises(ValueError, match=rf"qo_indptr\[{B}\] = {T + 2} is past the {T} of q's rows"):
        flashverify.reference(**{**common, "qo_indptr": qo}, causal=True, sm_scale=0.1)
    with pytest.raises(ValueError, match=r"kv_indptr\[.*is past the .* of kv_indices' entries"):
        flashverify.reference(**{**common, "kv_indices": pb["kv_indices"][:-1]}, causal=True, sm_scale=0.1)
    mask, mask_indptr, bits = masks_for(pb)
    with pytest.raises(ValueError, match=r"mask_indptr\[.*is past the .* of custom_mask's entries"):
        flashverify.reference(**common, custom_mask=mask[:-1], mask_indptr=mask_indptr, sm_scale=0.1)
    with pytest.raises(ValueError, match="mask_indptr: has shape"):
        flashverify.reference(**common, custom_mask=mask, mask_indptr=mask_indptr[:-1], sm_scale=0.1)
    with pytest.raises(ValueError, match="mask_bits: expected at least"):
        flashverify.reference(**common, mask_bits=bits[:-1], sm_scale=0.1)
    table = np.zeros((B, 64), np.int32)
    with pytest.raises(ValueError, match="page_table: expected a row-major int32"):
        flashverify.reference(**{**common, "kv_indices": None}, page_table=table[:-1], page_size=1, causal=True,
                              sm_scale=0.1)
    # strided flat arrays: the same values as a contiguous array, through a view with stride 2
    inter = np.repeat(pb["parents"], 2)
    with pytest.raises(ValueError, match="parents: must be contiguous, got stride 2"):
        flashverify.reference(**common, parents=inter[0::2], sm_scale=0.1)
    with pytest.raises(ValueError, match="custom_mask: must be contiguous, got stride 2"):
        flashverify.reference(**common, custom_mask=np.repeat(mask, 2)[0::2], mask_indptr=mask_indptr, sm_scale=0.1)
    hq = pb["q"].shape[1]
    sinks = np.repeat(np.linspace(-1, 1, hq).astype(np.float32), 2)
    with pytest.raises(ValueError, match="sinks: must be contiguous, got stride 2"):
        flashverify.reference(**common, causal=True, sinks=sinks[0::2], sm_scale=0.1)
    # and the contiguous arrays of the same values still run
    out, _ = flashverify.reference(**common, parents=np.ascontiguousarray(inter[0::2]), sm_scale=0.1)
    assert np.isfinite(out).all()


def test_no_draft_tokens_and_out_of_range_sizes():
    """q with 0 rows: empty outputs, nothing run (numpy gives empty arrays zero strides, which the view checks would
    refuse); the other per-token arrays must have 0 rows too. Workspace.required_bytes refuses a size its int32
    field would wrap (it used to size batch 2**32 + 1 as batch 1); the check comes before torch is imported."""
    rng = np.random.default_rng(7)
    pb = make_problem(rng)
    hq, dv = pb["q"].shape[1], pb["v_draft"].shape[2]
    empty = dict(q=pb["q"][:0], k_draft=pb["k_draft"][:0], v_draft=pb["v_draft"][:0], k_pool=pb["k_pool"],
                 v_pool=pb["v_pool"], qo_indptr=np.zeros(2, np.int32), kv_indptr=np.array([0, 5], np.int32),
                 kv_indices=pb["kv_indices"])
    out, lse = flashverify.reference(**empty, causal=True, sm_scale=0.1)
    assert out.shape == (0, hq, dv) and lse.shape == (0, hq)
    with pytest.raises(ValueError, match=r"k_draft: q has 0 rows \(no draft tokens\)"):
        flashverify.reference(**{**empty, "k_draft": pb["k_draft"][:1]}, causal=True, sm_scale=0.1)
    from flashverify._api import Workspace
    shapes = dict(batch_size=4, max_draft=8, num_q_heads=8, num_kv_heads=1, head_dim_qk=128, head_dim_v=128)
    for name, bad in (("batch_size", 2**32 + 1), ("max_draft", 2**31), ("num_q_heads", -2**31 - 1),
                      ("num_kv_splits", 2**40)):
        with pytest.raises(ValueError, match=f"{name} = {bad} does not fit the C ABI's 32-bit field"):
            Workspace.required_bytes(**{**shapes, name: bad})


def test_views_and_argument_mixes_the_abi_cannot_express_are_rejected():
    """A byte stride off the item size (a field of a structured array) has no element stride; a page table view of
    fewer columns than a prefix needs would let it read past the view (the ABI is given the row stride only);
    kv_indices with a page table, or mask_indptr without custom_mask, would be ignored; a misshapen v_draft."""
    rng = np.random.default_rng(7)
    pb = make_problem(rng)
    common = {k: pb[k] for k in ("q", "k_draft", "v_draft", "k_pool", "v_pool", "qo_indptr", "kv_indptr", "kv_indices")}
    T, hq, d = pb["q"].shape
    rec = np.zeros(T, dtype=[("flag", "u1"), ("q", "f4", (hq, d))])
    rec["q"] = pb["q"]
    with pytest.raises(ValueError, match="q: strides .* not multiples of its item size"):
        flashverify.reference(**{**common, "q": rec["q"]}, parents=pb["parents"], sm_scale=0.125)
    base, _ = flashverify.reference(**common, parents=pb["parents"], sm_scale=0.125)
    same, _ = flashverify.reference(**{**common, "q": np.ascontiguousarray(rec["q"])}, parents=pb["parents"],
                                    sm_scale=0.125)
    assert np.array_equal(base, same)
    B = len(pb["drafts"])
    full = np.zeros((B, max(pb["prefixes"]) + 4), np.int32)
    for b in range(B):
        kv0, kv1 = pb["kv_indptr"][b], pb["kv_indptr"][b + 1]
        full[b, :kv1 - kv0] = pb["kv_indices"][kv0:kv1]
    paged = {**common, "kv_indices": None}
    out, _ = flashverify.reference(**paged, page_table=full, page_size=1, parents=pb["parents"], sm_scale=0.125)
    assert np.array_equal(out, base)
    narrow = max(pb["prefixes"]) - 1
    with pytest.raises(ValueError, match=r"page_table: request \d+'s prefix \(\d+ tokens\) needs \d+ pages, the table "
                                         rf"has {narrow} columns"):
        flashverify.reference(**paged, page_table=full[:, :narrow], page_size=1, parents=pb["parents"], sm_scale=0.125)
    with pytest.raises(ValueError, match="kv_indices .* or page_table, not both"):
        flashverify.reference(**common, page_table=full, page_size=1, parents=pb["parents"], sm_scale=0.125)
    mask, mask_indptr, _ = masks_for(pb)
    with pytest.raises(ValueError, match="mask_indptr applies to custom_mask"):
        flashverify.reference(**common, parents=pb["parents"], mask_indptr=mask_indptr, sm_scale=0.125)
    with pytest.raises(ValueError, match=r"v_draft: expected .*\(3 dims\)"):
        flashverify.reference(**{**common, "v_draft": pb["v_draft"][:, 0]}, parents=pb["parents"], sm_scale=0.125)


def test_a_missing_library_path_is_an_error_not_a_fallback(tmp_path):
    """FLASHVERIFY_LIBRARY names a file that does not exist: loading fails instead of picking another build."""
    code = ("import flashverify._lib as L\n"
            "try:\n    L.load()\nexcept L.LibraryNotFound as e:\n    print('refused:', e)\n")
    env = {**os.environ, "FLASHVERIFY_LIBRARY": str(tmp_path / "no-such-libflashverify.so")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert "refused: FLASHVERIFY_LIBRARY=" in r.stdout, r.stdout + r.stderr


def test_tensors_on_different_gpus_are_rejected():
    """Every CUDA tensor of a call must be on q's GPU (torch stand-ins: no torch or GPU needed)."""
    from flashverify import _api

    class Dev:
        def __init__(self, index):
            self.type, self.index = "cuda", index

        def __str__(self):
            return f"cuda:{self.index}"

    def fake(shape, dtype, index):
        cls = type("Tensor", (), {"__module__": "torch"})
        t = cls()
        t.shape, t.is_cuda, t.device = tuple(shape), True, Dev(index)
        t.dtype = f"torch.{dtype}"
        strides, acc = [], 1
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= n
        t.stride = lambda: tuple(strides)
        t.data_ptr = lambda: 1 << 20
        t.get_device = lambda: index
        return t

    T, hq, hkv, d = 4, 4, 2, 64
    kw = dict(q=fake((T, hq, d), "bfloat16", 0), k_draft=fake((T, hkv, d), "bfloat16", 0),
              v_draft=fake((T, hkv, d), "bfloat16", 0), k_pool=fake((16, hkv, d), "bfloat16", 1),
              v_pool=fake((16, hkv, d), "bfloat16", 1), out=fake((T, hq, d), "bfloat16", 0), lse=None,
              qo_indptr=fake((2,), "int32", 0), kv_indptr=fake((2,), "int32", 0), kv_indices=fake((8,), "int32", 0),
              custom_mask=None, mask_indptr=None, mask_bits=None, parents=None, causal=True, page_table=None,
              page_size=1, sm_scale=0.1, max_draft=T, impl=0, num_kv_splits=0, profile=0)
    with pytest.raises(TypeError, match="different GPUs .*k_pool: cuda:1"):
        _api.build_args(device="cuda", **kw)
    kw["k_pool"], kw["v_pool"] = fake((16, hkv, d), "bfloat16", 0), fake((16, hkv, d), "bfloat16", 0)
    _api.build_args(device="cuda", **kw)  # all on cuda:0: accepted


def test_build_info_and_version():
    assert flashverify.version() == tuple(int(x) for x in flashverify.__version__.split("."))
    assert f"flashverify {flashverify.__version__}" in flashverify.build_info()


def test_imports_without_torch():
    # a fresh interpreter where importing torch fails: the package and its numpy path still work
    code = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    if name == 'torch' or name.startswith('torch.'): raise ImportError('torch blocked')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        "import flashverify, numpy as np\n"
        "assert 'torch' not in sys.modules\n"
        "q = np.ones((1, 1, 64), np.float32); kv = np.ones((1, 1, 64), np.float32)\n"
        "o, l = flashverify.reference(q, kv, kv, kv, kv, np.array([0, 1], np.int32), np.array([0, 1], np.int32),\n"
        "                             np.array([0], np.int64), causal=True, sm_scale=1.0)\n"
        "assert abs(o[0, 0, 0] - 1.0) < 1e-12\n"
        "print('ok')\n")
    import os
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_sglang_backend_import_is_lazy():
    import importlib.util
    assert "flashverify.sglang" not in sys.modules  # `import flashverify` did not pull it in
    try:
        present = importlib.util.find_spec("sglang.srt.layers.attention.triton_backend") is not None
    except ImportError:  # no sglang, or only the extracted Triton kernels (a partial `sglang` package)
        present = False
    if not present:
        pytest.skip("SGLang is not installed here: the backend is exercised on the GPU machine through "
                    "../shared/tools/sglang-stubkit (scripts/device-check, stage sglang)")
    import flashverify.sglang  # noqa: F401


def _extend_signatures():
    """SGLang's extend_attention_fwd signature with more arguments than it has, with and without **extra."""
    import inspect

    def extend(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
               custom_mask, is_causal, mask_indptr, max_len_extend, k_scale, v_scale, sm_scale=None, logit_cap=0.0,
               skip_prefix_custom_mask=True, sliding_window_size=-1, sinks=None, window_kv_offsets=None,
               xai_temperature_len=-1, lse_extend=None, skip_prefix=False, page_size=1, score_mod=None,
               identity_kv_indices=False, config=None, **extra):
        pass

    def plain(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
              custom_mask, is_causal, mask_indptr, max_len_extend, k_scale, v_scale, sm_scale=None, logit_cap=0.0,
              skip_prefix_custom_mask=True, sliding_window_size=-1, sinks=None, window_kv_offsets=None,
              xai_temperature_len=-1, lse_extend=None, skip_prefix=False, page_size=1, score_mod=None,
              identity_kv_indices=False, config=None, *, aux_tensors=None):
        pass

    return inspect.signature(extend), inspect.signature(plain)


def test_call_binder_binds_as_inspect_does():
    """CallBinder.bind (the backend's per-call binding) returns inspect's bound arguments, defaults applied, and
    raises TypeError for every call inspect refuses."""
    from flashverify._sglang_args import CallBinder

    for sig in _extend_signatures():
        binder = CallBinder(sig)
        full = [object() for _ in range(15)]
        calls = [
            (full, {}),
            (full, {"sm_scale": 0.5, "page_size": 16}),
            (full[:10], {"is_causal": True, "mask_indptr": None, "max_len_extend": 8, "k_scale": 1.0,
                         "v_scale": 1.0}),
            (full + [0.25, 30.0], {"sinks": object()}),
            ([], {n: object() for n in list(sig.parameters)[:15]}),
        ]
        if "aux_tensors" in sig.parameters:
            calls.append((full, {"aux_tensors": object()}))
        for args, kwargs in calls:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            got = binder.bind(args, kwargs)
            assert list(got) == list(bound.arguments), (len(args), sorted(kwargs))
            assert got == dict(bound.arguments)  # (object() compares by identity)
        refused = [
            (full[:14], {}),  # v_scale missing
            (full, {"q_extend": object()}),  # given twice
            (full + [object()] * 14, {}),  # too many positional
        ]
        if "extra" not in sig.parameters:
            refused.append((full, {"no_such_argument": 1}))
        for args, kwargs in refused:
            with pytest.raises(TypeError):
                sig.bind(*args, **kwargs)
            with pytest.raises(TypeError):
                binder.bind(args, kwargs)


def test_sglang_backend_serves_only_arguments_it_knows():
    """The SGLang backend's argument check (flashverify._sglang_args): an argument it does not pass on to
    flashverify must be at the Triton function's default, else the call goes to Triton."""
    import inspect

    from flashverify._sglang_args import CallBinder, unexpected_argument

    sig, plain = _extend_signatures()
    binders = CallBinder(sig), CallBinder(plain)

    def check(**overrides):
        args = [object()] * 9 + [None, True, None, 8, 1.0, 1.0]
        bound = sig.bind(*args, sm_scale=0.1, **overrides)
        bound.apply_defaults()
        want = unexpected_argument(sig, bound.arguments)
        # the backend's CallBinder agrees, with **extra (inspect's way) and, where the call fits it, without
        for binder in binders:
            if binder is binders[1] and not set(overrides) <= set(plain.parameters):
                continue
            assert binder.unexpected(binder.bind(args, dict(sm_scale=0.1, **overrides))) == want, overrides
        return want

    assert check() is None
    # what the backend serves, at values other than the defaults
    assert check(logit_cap=30.0, sliding_window_size=128, sinks=object(), xai_temperature_len=4096, page_size=16) is None
    assert check(config={"BLOCK_M": 64}) is None  # a launch hint
    assert check(skip_prefix_custom_mask=True, identity_kv_indices=False) is None
    assert check(skip_prefix_custom_mask=False) == "skip_prefix_custom_mask"
    assert check(skip_prefix_custom_mask=0) == "skip_prefix_custom_mask"
    assert check(identity_kv_indices=True) == "identity_kv_indices"
    assert check(score_mod=lambda s: s) == "score_mod"
    assert check(lse_extend=object()) == "lse_extend"
    assert check(new_flag=1) == "new_flag"  # an argument this version does not know, through **extra

    # a version whose score modifiers arrive through **kwargs: the backend reads them by name and would drop
    # them there, so they go to Triton like unknown ones (v59); hints alone there do not
    def fork(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices,
             custom_mask, is_causal, mask_indptr, max_len_extend, k_scale, v_scale, sm_scale=None, logit_cap=0.0,
             **kwargs):
        pass

    fork_sig = inspect.signature(fork)
    args = [object()] * 9 + [None, True, None, 8, 1.0, 1.0]
    for extra, want in (({"sinks": object()}, "sinks"), ({"sliding_window_size": 8}, "sliding_window_size"),
                        ({"config": {"BLOCK_M": 64}}, None), ({}, None)):
        bound = fork_sig.bind(*args, sm_scale=0.1, **extra)
        bound.apply_defaults()
        assert unexpected_argument(fork_sig, bound.arguments) == want, extra
        binder = CallBinder(fork_sig)
        assert binder.unexpected(binder.bind(args, dict(sm_scale=0.1, **extra))) == want, extra
