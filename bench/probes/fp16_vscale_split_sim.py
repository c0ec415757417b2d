#!/usr/bin/env python3
# v60: how an fp16 model's softmax weights P carry v_scale (CPU model, numpy; no GPU). The fast kernels round P to
# fp16. Old: prefix P x v_scale rounded to fp16, draft P as is (Inf from |v_scale| = 65520, subnormals at 1e-4). New
# (dispatch.cu): prefix P x v_scale 2^-s and draft P x 2^-s rounded to fp16, the output x 2^s. Prints each scheme's
# relative L2 error against the exact weighted sum, draft values of the prefix values' magnitude.
import math, numpy as np
rng = np.random.default_rng(1)
def sigma_of(vs):
    e = math.frexp(abs(vs))[1] - 1  # ilogb
    return max(e, -15) if e < -2 else (e - 14 if e > 14 else 0)
Pn, N, D = 32768, 64, 32
for spread in [1.0, 3.0]:
    s = rng.normal(0, spread, Pn + N)
    V8 = rng.uniform(-448, 448, (Pn, D)).round()
    for vs in [1.0, 7e4, 5e6, -4e4, 2.0**15, 1e-4, -3e-5, 2.0**-3, 2e-7]:
        Vd = rng.normal(0, 1, (N, D)) * abs(vs) * 100  # draft values of the prefix values' magnitude
        p = np.exp(s - s.max()); l = p.sum()
        exact = ((p[:Pn, None] * vs * V8).sum(0) + (p[Pn:, None] * Vd).sum(0)) / l
        sg = sigma_of(vs); fp, fd = vs * 2.0**-sg, 2.0**-sg
        with np.errstate(over='ignore'):
            pp = (p[:Pn] * fp).astype(np.float16).astype(np.float64); pd = (p[Pn:] * fd).astype(np.float16).astype(np.float64)
            new = ((pp[:, None] * V8).sum(0) + (pd[:, None] * Vd).sum(0)) / l * 2.0**sg
            op = (p[:Pn] * vs).astype(np.float16).astype(np.float64); od = p[Pn:].astype(np.float16).astype(np.float64)
            old = ((op[:, None] * V8).sum(0) + (od[:, None] * Vd).sum(0)) / l
        e = lambda g: np.linalg.norm(g - exact) / np.linalg.norm(exact)
        print(f"spread {spread} v_scale {vs:<9g} sigma {sg:3d}: new {e(new):.2e}  old {e(old):.2e}")
