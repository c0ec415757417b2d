"""GPU, end to end: a small random-weight transformer (one MLA and one GQA variant) doing greedy tree
speculative decoding accepts identical tokens with flashverify's fast kernel and with its naive reference
kernel as the verify attention, over 1,000 verify steps per variant. Skipped where torch or CUDA is absent.

Each variant runs twice from the same weights, prompts and seeds, independently end to end (own KV pool,
own slot allocator): once with verify_attention(impl="fast"), once with impl="naive". Everything around the
verify attention is SGLang's target-verify layout: a token-slot KV pool with shuffled free slots (slot 0 is
never handed out; unwritten slots hold random values), each request's prefix slots in kv_indices (int64)
with kv_indptr (int32), the draft tokens' q/k/v contiguous [T, H, D] with qo_indptr, the draft K/V written
to freshly allocated slots before the attention (accepted ones are kept, rejected ones freed), and the tree
as SGLang's byte mask (MLA: bool custom_mask + mask_indptr, each request a row-major N x (P + N) block) or
as parents (GQA). MLA is in the absorbed form DeepSeek verifies with: one latent row of 576 (512 kv_lora,
also V, + 64 rope) per token, one KV head, 16 query heads of 576, the pool [slots, 1, 576] and V the strided
view pool[..., :512].

Drafts: node 0 of every tree is the last accepted token (its K/V is not in the cache yet), the rest come
from an n-gram lookup in the request's own history plus random nodes attached anywhere, so trees branch;
nodes are numbered breadth first. Greedy acceptance walks from the root to the child whose token is the
argmax of its parent's logits; the accepted tokens plus the bonus token (the argmax where the walk stops)
are appended. A request that has generated its quota is retired and its slots freed; a new request (prompt
300..3000 tokens, prefilled with a plain torch attention, the same code in both runs) takes its place, so
prefixes reach ~5,000 tokens and the split-KV path runs.

Why q, k and v are integer-valued: with continuous weights the two kernels differ by ~1e-3 relative in
every call (the fast kernel rounds P to bf16 for the tensor-core P.V, the naive one keeps it in fp32), and
over ~10^4 greedy decisions some top-1/top-2 logit margin is always smaller than what that moves (margins
of 1e-3 of the logit spread do occur, see the printed minimum), so a token-exact comparison of a continuous
model is flaky whatever the logit scale. Here q, k and v are rounded to integers (q then scaled by 2^10, as
a quantized model would carry them): every score is an exact integer multiple of 1024 in fp32 in both
kernels, one unit of score is 74 (MLA) / 90 (GQA) nats, so every key except the best (or the exactly tied
best) gets a weight below e^-58, and the outputs are averages of a few integer vectors, which both kernels
round to the same bf16 values. A correct kernel therefore agrees with the reference bit for bit (the test
reports the differences seen: only in elements below 1e-20), and a wrong score, mask, slot, split or
combine selects a different key somewhere and changes the tokens.

Two more features keep the test sharp: column 0 of every key is its position bucket and column 0 of each
query head a per-head weight, so some heads look up content over the whole prefix and others mostly the
last ~100 tokens and the drafts (a mask error shows); and a bigram skip term on a random cyclic permutation
of the vocabulary makes the text predictable enough for n-gram drafts to be accepted (~2.5-3 tokens per
step) while the transformer still decides a good part of the tokens. A negative control runs the fast
kernel with causal=True instead of the tree and must diverge from the naive run.
"""
import time
from array import array

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashverify  # noqa: E402

STEPS = 1000            # verify steps (target forward passes) per run
PROMPT_LEN = (300, 3000)
NEW_TOKENS = (800, 2400)  # tokens a request generates before it is retired
PROMPT_JUMP = 0.25      # prompts: the bigram successor, or a random token with this probability
NGRAM_MAX = 3           # longest history suffix the drafter matches
NGRAM_MATCHES = 3       # most recent occurrences whose continuations go into the tree
QMAX = 31               # integer range of q, k, v: [-QMAX, QMAX]
QSTD = 10.0             # std of the projections before rounding
Q_SCALE = 1024.0        # q = integer * 2^10: one unit of q.k is >= 74 nats at either sm_scale below
RECENCY_BUCKET = 32     # key column 0 = position // RECENCY_BUCKET
CONTROL_STEPS = 400     # the negative control: fast kernel with a causal mask instead of the tree
CHECK_EVERY = 10        # the fast run also runs the naive kernel on the same inputs every CHECK_EVERY steps

VARIANTS = {
    "mla": dict(hq=16, hkv=1, dqk=576, dv=512, rope=64, d_model=256, d_ff=512, layers=2, vocab=128, batch=4,
                n_draft=12, mask="bytes", sm_scale=192 ** -0.5, attn_gain=1.0, bigram=14.0, seed=11),
    "gqa": dict(hq=8, hkv=2, dqk=128, dv=128, rope=128, d_model=256, d_ff=512, layers=3, vocab=128, batch=3,
                n_draft=16, mask="parents", sm_scale=128 ** -0.5, attn_gain=1.0, bigram=14.0, seed=23),
}


# --------------------------------------------------------------------------------------------------
# the model

def rms_norm(x):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)


def quantize(x):
    return x.round().clamp_(-QMAX, QMAX)


class ToyModel:
    """Random bf16 weights (drawn on the CPU from `seed`, so every device gets the same ones)."""

    def __init__(self, cfg, device):
        self.cfg, self.device = cfg, device
        g = torch.Generator().manual_seed(cfg["seed"])
        d, ff, hq, hkv, dqk, dv = (cfg[k] for k in ("d_model", "d_ff", "hq", "hkv", "dqk", "dv"))
        self.mla = (dqk, dv) == (576, 512)

        def w(rows, cols, std, dtype=torch.bfloat16):
            return (torch.randn(rows, cols, generator=g) * std).to(device=device, dtype=dtype)

        self.embed = w(cfg["vocab"], d, 1.0)
        self.layers = []
        for _ in range(cfg["layers"]):
            L = dict(wq=w(d, hq * dqk, QSTD / d ** 0.5),
                     wo=w(hq * dv, d, cfg["attn_gain"] / (QSTD * (hq * dv) ** 0.5)),
                     w1=w(d, ff, 1.0 / d ** 0.5), w2=w(ff, d, 1.0 / ff ** 0.5))
            if self.mla:
                L["wkv"] = w(d, dqk, QSTD / d ** 0.5)  # the latent row: 512 kv_lora + 64 rope
            else:
                L["wk"] = w(d, hkv * dqk, QSTD / d ** 0.5)
                L["wv"] = w(d, hkv * dv, QSTD / d ** 0.5)
            self.layers.append(L)
        self.unembed = w(d, cfg["vocab"], 4.0 / d ** 0.5, dtype=torch.float32)  # logits in fp32, std ~4
        # a bigram skip term: +bigram on sigma(token) for a random cyclic permutation sigma (no fixed point, one
        # cycle through the whole vocabulary). It makes the text predictable enough for n-gram drafts to be
        # accepted, while the transformer (attention included) still decides a good part of the tokens.
        order = torch.randperm(cfg["vocab"], generator=g)
        succ = torch.empty_like(order)
        succ[order] = order.roll(-1)
        self.bigram = torch.zeros(cfg["vocab"], cfg["vocab"])
        self.bigram[torch.arange(cfg["vocab"]), succ] = cfg["bigram"]
        self.bigram = self.bigram.to(device)
        self.succ = succ.numpy()
        max_pos = PROMPT_LEN[1] + NEW_TOKENS[1] + 4 * cfg["n_draft"] + 64
        assert max_pos // RECENCY_BUCKET <= 256  # position buckets stay exact in bf16
        self.recency = (QMAX * (torch.arange(hq, dtype=torch.float32) / (hq - 1)) ** 2).round().to(device)
        half = cfg["rope"] // 2
        inv_freq = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float64) / half))
        ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq[None, :]
        self.cos = ang.cos().float().to(device)
        self.sin = ang.sin().float().to(device)

    def rope(self, x, positions):
        """x [T, H, R] fp32, rotate-half rope at `positions` [T]."""
        half = x.shape[-1] // 2
        cos, sin = self.cos[positions][:, None, :], self.sin[positions][:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def qkv(self, L, h, positions):
        """q [T, Hq, Dqk], k [T, Hkv, Dqk], v [T, Hkv, Dv], bf16 with integer values (q times 2^10)."""
        c = self.cfg
        T = h.shape[0]
        qf = (h @ L["wq"]).float().view(T, c["hq"], c["dqk"])
        if self.mla:
            lat = c["dv"]
            q = torch.cat([qf[..., :lat], self.rope(qf[..., lat:], positions)], dim=-1)
            kvf = (h @ L["wkv"]).float().view(T, 1, c["dqk"])
            k = quantize(torch.cat([kvf[..., :lat], self.rope(kvf[..., lat:], positions)], dim=-1))
            k = k.to(torch.bfloat16)
            v = k[..., :lat]  # MLA: V is the latent part of the same row
        else:
            q = self.rope(qf, positions)
            k = quantize(self.rope((h @ L["wk"]).float().view(T, c["hkv"], c["dqk"]), positions)).to(torch.bfloat16)
            v = quantize((h @ L["wv"]).float().view(T, c["hkv"], c["dv"])).to(torch.bfloat16)
        # recency: column 0 of every key is its position bucket, column 0 of head h's query a per-head weight,
        # from 0 (pure content lookup over the whole prefix) to QMAX (mostly the last ~100 tokens and drafts)
        k[..., 0] = (positions // RECENCY_BUCKET).to(k.dtype)[:, None]
        q = quantize(q)
        q[..., 0] = self.recency
        return (q * Q_SCALE).to(torch.bfloat16), k, v

    def forward(self, tokens, positions, attend, write_kv, logits=True):
        """tokens, positions: int64 [T]. write_kv(layer, k, v) stores the tokens' K/V; attend(layer, q, k, v)
        returns [T, Hq, Dv]. Returns fp32 logits [T, vocab] (or None)."""
        x = self.embed[tokens]
        T = x.shape[0]
        for li, L in enumerate(self.layers):
            q, k, v = self.qkv(L, rms_norm(x), positions)
            write_kv(li, k, v)
            o = attend(li, q, k, v)
            x = x + o.reshape(T, -1) @ L["wo"]
            x = x + torch.nn.functional.silu(rms_norm(x) @ L["w1"]) @ L["w2"]
        return rms_norm(x).float() @ self.unembed + self.bigram[tokens] if logits else None


def dense_attention(q, k, v, sm_scale, visible):
    """Plain fp32 attention: q [Tq, Hq, Dqk], k [S, Hkv, Dqk], v [S, Hkv, Dv], visible [Tq, S] bool."""
    Tq, hq, _ = q.shape
    hkv = k.shape[1]
    g = hq // hkv
    qf = q.float().view(Tq, hkv, g, -1)
    s = torch.einsum("thgd,shd->hgts", qf, k.float()) * sm_scale
    s = s.masked_fill(~visible, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("hgts,shd->thgd", p, v.float())
    return o.reshape(Tq, hq, -1).to(torch.bfloat16)


def causal_attention(q, k, v, sm_scale, chunk=512):
    T = q.shape[0]
    out = []
    cols = torch.arange(T, device=q.device)
    for a in range(0, T, chunk):
        rows = torch.arange(a, min(T, a + chunk), device=q.device)
        out.append(dense_attention(q[a:a + chunk], k, v, sm_scale, cols[None, :] <= rows[:, None]))
    return torch.cat(out)


# --------------------------------------------------------------------------------------------------
# requests, drafts, acceptance

class Request:
    def __init__(self, rid, cfg, succ):
        """A prompt in the model's own 'language': mostly chains of the bigram successor, random elsewhere."""
        rng = np.random.default_rng([cfg["seed"], 1000 + rid])
        n = int(rng.integers(PROMPT_LEN[0], PROMPT_LEN[1] + 1))
        self.rid = rid
        jump = rng.random(n) < PROMPT_JUMP
        rand = rng.integers(0, cfg["vocab"], n)
        self.tokens = [int(rand[0])]
        for i in range(1, n):
            self.tokens.append(int(rand[i]) if jump[i] else int(succ[self.tokens[-1]]))
        self.prompt_len = n
        self.quota = int(rng.integers(NEW_TOKENS[0], NEW_TOKENS[1] + 1))
        self.slots = array("q")  # KV slots of tokens[:-1]; the last token is the next tree's root
        self.rng = np.random.default_rng([cfg["seed"], 2000 + rid])
        self.ngrams = [dict() for _ in range(NGRAM_MAX + 1)]  # ngrams[n][tuple] = end positions
        for i in range(n):
            self._index(i)

    def _index(self, i):
        for n in range(1, NGRAM_MAX + 1):
            if i + 1 >= n:
                self.ngrams[n].setdefault(tuple(self.tokens[i + 1 - n:i + 1]), []).append(i)

    def append(self, new_tokens):
        for t in new_tokens:
            self.tokens.append(t)
            self._index(len(self.tokens) - 1)

    def done(self):
        return len(self.tokens) - self.prompt_len >= self.quota

    def draft(self, n_nodes, vocab):
        """A tree of n_nodes: (tokens, parents, depths, children), node 0 the root, parents before children."""
        toks, par, depth, children = [self.tokens[-1]], [-1], [0], [{}]

        def add(parent, t):
            children.append({})
            toks.append(t)
            par.append(parent)
            depth.append(depth[parent] + 1)
            children[parent][t] = len(toks) - 1
            return len(toks) - 1

        # n-gram continuations fill up to 3/4 of the tree, then random nodes make it branch
        budget = n_nodes - max(2, n_nodes // 4)
        max_depth = budget - 1
        L = len(self.tokens)
        for n in range(min(NGRAM_MAX, L - 1), 0, -1):
            ends = self.ngrams[n].get(tuple(self.tokens[L - n:]), [])
            for e in reversed(ends[-(NGRAM_MATCHES + 1):-1]):  # earlier occurrences, most recent first
                node = 0
                for t in self.tokens[e + 1:min(L, e + 1 + max_depth)]:
                    nxt = children[node].get(t)
                    if nxt is None:
                        if len(toks) >= budget:
                            break
                        nxt = add(node, t)
                    node = nxt
        while len(toks) < n_nodes:
            parent = int(self.rng.integers(0, len(toks)))
            t = int(self.rng.integers(0, vocab))
            if t not in children[parent]:
                add(parent, t)
        # breadth-first numbering, as SGLang's trees come: a node's earlier siblings and cousins precede it
        order = sorted(range(n_nodes), key=lambda i: (depth[i], i))
        new = {old: i for i, old in enumerate(order)}
        return ([toks[i] for i in order], [new[par[i]] if par[i] >= 0 else -1 for i in order],
                [depth[i] for i in order], [{t: new[c] for t, c in children[i].items()} for i in order])


def accept(children, top1):
    """Greedy walk: the accepted nodes (root first) and the bonus token."""
    node, path = 0, [0]
    while True:
        nxt = children[node].get(int(top1[node]))
        if nxt is None:
            return path, int(top1[node])
        node = nxt
        path.append(node)


# --------------------------------------------------------------------------------------------------
# one run

class Run:
    """Greedy tree speculative decoding of cfg["batch"] concurrent requests for `steps` verify steps."""

    def __init__(self, model, impl, tree_mask=True):
        cfg = self.cfg = model.cfg
        self.model, self.impl, dev = model, impl, model.device
        self.tree_mask = tree_mask  # False: causal=True instead of the tree (the negative control)
        self.B, self.N = cfg["batch"], cfg["n_draft"]
        num_slots = 1 + self.B * (PROMPT_LEN[1] + NEW_TOKENS[1] + 4 * self.N) + 4096
        g = torch.Generator(device=dev).manual_seed(cfg["seed"] + 7)
        # unwritten slots hold random integers too: a read of a wrong slot changes the result
        self.k_pools, self.v_pools = [], []
        for _ in range(cfg["layers"]):
            kp = torch.randint(-QMAX, QMAX + 1, (num_slots, cfg["hkv"], cfg["dqk"]), generator=g, device=dev)
            kp = kp.to(torch.bfloat16)
            if model.mla:
                vp = kp[..., :cfg["dv"]]  # MLATokenToKVPool.get_value_buffer: a strided view
            else:
                vp = torch.randint(-QMAX, QMAX + 1, (num_slots, cfg["hkv"], cfg["dv"]), generator=g, device=dev)
                vp = vp.to(torch.bfloat16)
            self.k_pools.append(kp)
            self.v_pools.append(vp)
        rng = np.random.default_rng(cfg["seed"] + 3)
        self.free = [int(s) for s in rng.permutation(np.arange(1, num_slots))]  # slot 0: SGLang's dummy
        self.qo_indptr = torch.arange(0, (self.B + 1) * self.N, self.N, dtype=torch.int32, device=dev)
        shapes = dict(batch_size=self.B, max_draft=self.N, num_q_heads=cfg["hq"], num_kv_heads=cfg["hkv"],
                      head_dim_qk=cfg["dqk"], head_dim_v=cfg["dv"], dtype=torch.bfloat16,
                      mask=cfg["mask"] if tree_mask else "causal")
        self.workspace = self.check_workspace = None
        if dev.type == "cuda":  # sized once for the batch, reused by every call
            self.workspace = flashverify.Workspace.for_shapes(impl=impl, **shapes)
            self.check_workspace = flashverify.Workspace.for_shapes(impl="naive", **shapes)
        self.next_rid = 0
        self.requests = [self._start() for _ in range(self.B)]
        self.finished = {}
        self.steps = 0
        self.accepted_tokens = 0
        self.min_margin = float("inf")
        self.max_prefix = 0
        self.max_abs_diff = torch.zeros((), dtype=torch.float32, device=dev)
        self.max_rel_diff = torch.zeros((), dtype=torch.float32, device=dev)
        self.diff_elems = torch.zeros((), dtype=torch.int64, device=dev)
        self.big_diff_elems = torch.zeros((), dtype=torch.int64, device=dev)
        self.checks = 0

    # ---- slots
    def _alloc(self, n):
        assert len(self.free) >= n, "KV pool exhausted"
        out = self.free[-n:]
        del self.free[-n:]
        return out

    # ---- prefill: the prompt's tokens except the last (the first tree's root), plain torch attention
    def _start(self):
        req = Request(self.next_rid, self.cfg, self.model.succ)
        self.next_rid += 1
        dev = self.model.device
        n = len(req.tokens) - 1
        req.slots = array("q", self._alloc(n))
        tokens = torch.tensor(req.tokens[:-1], dtype=torch.int64, device=dev)
        positions = torch.arange(n, dtype=torch.int64, device=dev)
        loc = torch.from_numpy(np.frombuffer(req.slots, dtype=np.int64).copy()).to(dev)
        sm = self.cfg["sm_scale"]
        self.model.forward(tokens, positions, lambda li, q, k, v: causal_attention(q, k, v, sm),
                           lambda li, k, v: self._write(li, loc, k, v), logits=False)
        return req

    def _write(self, li, loc, k, v):
        self.k_pools[li][loc] = k
        if not self.model.mla:
            self.v_pools[li][loc] = v

    # ---- the verify attention
    def verify_attention(self, li, q, k, v, impl, workspace):
        m = self.meta if self.tree_mask else dict(self.meta, custom_mask=None, mask_indptr=None, parents=None)
        return flashverify.verify_attention(
            q, k, v, self.k_pools[li], self.v_pools[li], self.qo_indptr, m["kv_indptr"], m["kv_indices"],
            custom_mask=m.get("custom_mask"), mask_indptr=m.get("mask_indptr"), parents=m.get("parents"),
            causal=not self.tree_mask, sm_scale=self.cfg["sm_scale"], max_draft=self.N, workspace=workspace,
            impl=impl)

    def _attend(self, li, q, k, v):
        out = self.verify_attention(li, q, k, v, self.impl, self.workspace)
        if self.check:
            ref = self.verify_attention(li, q, k, v, "naive", self.check_workspace)
            d = (out.float() - ref.float()).abs()
            self.max_abs_diff = torch.maximum(self.max_abs_diff, d.max())
            rel = (out.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30)
            self.max_rel_diff = torch.maximum(self.max_rel_diff, rel)
            self.diff_elems += (out != ref).sum()
            self.big_diff_elems += (d > 1e-20).sum()
            self.checks += 1
        return out

    # ---- one verify step for all requests
    def step(self):
        B, N, cfg = self.B, self.N, self.cfg
        dev = self.model.device
        trees = [r.draft(N, cfg["vocab"]) for r in self.requests]
        prefix = [len(r.slots) for r in self.requests]
        self.max_prefix = max(self.max_prefix, max(prefix))
        locs = [self._alloc(N) for _ in self.requests]
        tokens = np.concatenate([t[0] for t in trees])
        positions = np.concatenate([np.asarray(t[2]) + p for t, p in zip(trees, prefix)])
        # one copy to the device: draft tokens, positions, their new slots, then kv_indices
        ints = np.concatenate([tokens, positions, np.concatenate(locs)]
                              + [np.frombuffer(r.slots, dtype=np.int64) for r in self.requests])
        ints = torch.from_numpy(ints.astype(np.int64)).to(dev)
        T = B * N
        kv_indptr = np.concatenate([[0], np.cumsum(prefix)])
        self.meta = dict(kv_indptr=torch.from_numpy(kv_indptr.astype(np.int32)).to(dev), kv_indices=ints[3 * T:])
        if cfg["mask"] == "bytes":
            blocks = []
            for (toks, par, _, _), p in zip(trees, prefix):
                block = np.ones((N, p + N), dtype=bool)
                anc = np.zeros((N, N), dtype=bool)
                for i in range(N):
                    if par[i] >= 0:
                        anc[i] = anc[par[i]]
                    anc[i, i] = True
                block[:, p:] = anc
                blocks.append(block.reshape(-1))
            sizes = [N * (p + N) for p in prefix]
            self.meta["custom_mask"] = torch.from_numpy(np.concatenate(blocks)).to(dev)
            self.meta["mask_indptr"] = torch.tensor(np.concatenate([[0], np.cumsum(sizes)]), dtype=torch.int64,
                                                    device=dev)
        else:
            self.meta["parents"] = torch.from_numpy(np.concatenate([t[1] for t in trees]).astype(np.int32)).to(dev)
        loc = ints[2 * T:3 * T]
        self.check = self.check_enabled and self.steps % CHECK_EVERY == 0
        logits = self.model.forward(ints[:T], ints[T:2 * T], self._attend,
                                    lambda li, k, v: self._write(li, loc, k, v))
        top = torch.topk(logits, 2, dim=-1)
        top = torch.cat([top.values, top.indices[:, :1].float()], dim=1).cpu().numpy()
        for b, req in enumerate(self.requests):
            toks, par, depth, children = trees[b]
            rows = top[b * N:(b + 1) * N]
            path, bonus = accept(children, rows[:, 2])
            self.min_margin = min(self.min_margin, float((rows[path, 0] - rows[path, 1]).min()))
            keep = set(path)
            req.slots.extend(locs[b][i] for i in path)
            self.free.extend(locs[b][i] for i in range(N) if i not in keep)
            req.append([toks[i] for i in path[1:]] + [bonus])
            self.accepted_tokens += len(path)
        self.steps += 1
        for b, req in enumerate(self.requests):
            if req.done():
                self.finished[req.rid] = (req.prompt_len, req.tokens)
                self.free.extend(req.slots)
                self.requests[b] = self._start()

    def run(self, steps, check=False):
        self.check_enabled = check
        for _ in range(steps):
            self.step()
        for req in self.requests:
            self.finished[req.rid] = (req.prompt_len, req.tokens)
        return self


def first_difference(a, b, prefix=False):
    """None if both runs' requests (rid -> (prompt length, tokens)) are identical (prefix: every request of
    run a is a prefix of the same request in run b, which ran for more steps), else a description."""
    for rid in sorted(set(a) | (set() if prefix else set(b))):
        if rid not in a or rid not in b:
            return f"request {rid} exists in one run only"
        (n, x), (_, y) = a[rid], b[rid]
        if prefix:
            y = y[:len(x)]
        if x != y:
            i = next((i for i, (s, t) in enumerate(zip(x, y)) if s != t), min(len(x), len(y)))
            return (f"request {rid} (prompt {n} tokens): first difference at generated token {i - n}: "
                    f"{x[i:i + 8]} vs {y[i:i + 8]}, lengths {len(x)} / {len(y)}")
    return None


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_token_exact_fast_vs_naive(variant):
    cfg = VARIANTS[variant]
    model = ToyModel(cfg, torch.device("cuda"))
    with torch.no_grad():
        t0 = time.perf_counter()
        fast = Run(model, "fast").run(STEPS, check=True)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        naive = Run(model, "naive").run(STEPS)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        control = Run(model, "fast", tree_mask=False).run(CONTROL_STEPS)
        torch.cuda.synchronize()
        t3 = time.perf_counter()
    generated = sum(len(t) - n for n, t in fast.finished.values())
    tag = f"[token-exact] {variant}:"
    print(f"\n{tag} {fast.steps} verify steps per run (batch {fast.B}, {fast.N}-token trees, mask {cfg['mask']}, "
          f"{cfg['layers']} layers), {len(fast.finished)} requests, {generated} tokens generated, mean accepted "
          f"{fast.accepted_tokens / (fast.steps * fast.B):.2f} tokens/step/request (naive run "
          f"{naive.accepted_tokens / (naive.steps * naive.B):.2f}), longest prefix {fast.max_prefix}; "
          f"fast run {t1 - t0:.1f} s, naive run {t2 - t1:.1f} s, control {t3 - t2:.1f} s")
    print(f"{tag} smallest top-1 vs top-2 logit margin {min(fast.min_margin, naive.min_margin):.3g} (logit std ~4)")
    print(f"{tag} fast vs naive attention on the same inputs ({fast.checks} calls): max abs diff "
          f"{fast.max_abs_diff.item():.3g}, max rel L2 {fast.max_rel_diff.item():.3g}, {fast.diff_elems.item()} "
          f"elements differ, {fast.big_diff_elems.item()} of them by more than 1e-20")
    diff = first_difference(fast.finished, naive.finished)
    control_diff = first_difference(control.finished, naive.finished, prefix=True)
    print(f"{tag} identical tokens: {diff is None}; negative control (causal mask instead of the tree, "
          f"{control.steps} steps) diverges: {control_diff}")
    assert fast.steps >= 1000 and naive.steps >= 1000
    assert diff is None, f"{variant}: fast and naive runs accepted different tokens: {diff}"
    assert fast.max_rel_diff.item() <= 1e-2, f"{variant}: fast vs naive relative L2 {fast.max_rel_diff.item()}"
    assert control_diff is not None, \
        f"{variant}: the test cannot tell a causal mask from the tree in {control.steps} steps"
