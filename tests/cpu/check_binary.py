#!/usr/bin/env python3
"""What the built library holds, read with cuobjdump (no GPU needed).

  check_binary.py LIBRARY ARCHS        ARCHS: the build's CMAKE_CUDA_ARCHITECTURES, ';' or ',' between them
                                       (e.g. "80-real;90-real;120"); "native" / "all": what the library holds

Fails (exit 1) when
- an architecture of the build has no machine code in the library, or lacks a kernel another one has;
- a verify-kernel configuration that the planner can select on an architecture is only a stub there
  (large-shared-memory tiles are `__trap()` stubs outside sm_90 / sm_100, by design: verify.cuh);
- on sm_90, a 512-thread combine kernel (combine_kernel, combine_block_kernel) or the 256-thread
  combine_block8_kernel takes more than 64 registers: two (four) blocks a multiprocessor end there, and a
  66-register build of combine_block_kernel cost GQA 8/1 b1 a second combine wave (+2.4 us on the H200,
  bench/NOTES.md v15). Other architectures are reported, not checked: nothing was measured there (the
  sm_120 build's combine kernels take 74-89 registers, one 512-thread block a multiprocessor: docs/sm120.md);
- an sm_90 build lacks the Hopper MLA or GQA kernel (sm_90a).
Exits 77 (ctest: skipped, shown as such) when no cuobjdump is found: .ci/run installs one.
"""
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
from cuda_tools import find_cuobjdump  # noqa: E402
SKIP = 77
STUB_MAX_REGS = 8     # a __trap() stub takes 4
COMBINE_MAX_REGS = 64


def tile_configs():
    """{config id: (name, large_smem)} from src/tile_config.h (the enum gives the ids)."""
    text = open(os.path.join(REPO, "src", "tile_config.h")).read()
    ids = {m.group(1): int(m.group(2)) for m in re.finditer(r"\b(k\w+)\s*=\s*(\d+)\s*,", text)}
    out = {}
    for m in re.finditer(r"\{\s*(k\w+),\s*\"([\w]+)\",([^}]*)\}", text):
        fields = [f.strip() for f in m.group(3).split(",")]
        # bm, bn, dqk, dv, wm, wn, wom, won, stages, v_in_k, min_blocks, large_smem, overhead, min_part_cost
        if len(fields) != 14 or m.group(1) not in ids:
            continue
        out[ids[m.group(1)]] = (m.group(2), fields[11] == "true")
    return out


def res_usage(cuobjdump, lib):
    """[(arch, function, regs)] for every function of every cubin."""
    text = subprocess.run([cuobjdump, "-res-usage", lib], capture_output=True, text=True, check=True).stdout
    rows, arch, fn = [], None, None
    for line in text.splitlines():
        m = re.match(r"\s*arch = (sm_\w+)", line)
        if m:
            arch = m.group(1)
            continue
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            fn = m.group(1)
            continue
        m = re.match(r"\s*REG:(\d+)", line)
        if m and fn and arch:
            rows.append((arch, fn, int(m.group(1))))
            fn = None
    return rows


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    lib, archs = sys.argv[1], sys.argv[2]
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        print("SKIPPED: no cuobjdump (PATH, /usr/local/cuda/bin, or pip nvidia-cuda-cuobjdump)")
        return SKIP
    rows = res_usage(cuobjdump, lib)
    # "90-real" -> sm_90, "90a" -> sm_90a, "100f" -> sm_100f; "-virtual" entries are PTX only: no machine code
    want = sorted({"sm_" + m.group(1) for a in re.split(r"[;,]", archs) if not a.strip().endswith("-virtual")
                   for m in [re.match(r"\s*(\d+[a-z]?)", a)] if m})
    if not want:  # native / all: check whatever the library holds
        want = sorted({a for a, _, _ in rows if not a.endswith("a")})
    configs = tile_configs()
    errors = []
    by_arch = {}
    for arch, fn, regs in rows:
        by_arch.setdefault(arch, {})[fn] = regs

    # every architecture of the build has machine code, with the same kernels
    for a in want:
        if a not in by_arch:
            errors.append("%s: no machine code in %s (cuobjdump -res-usage lists %s)" % (a, lib, sorted(by_arch)))
    names = {a: set(by_arch[a]) for a in want if a in by_arch}
    # kernels in anonymous namespaces carry a per-translation-unit hash: compare them without it
    norm = lambda n: re.sub(r"_GLOBAL__N__[0-9a-f]+_", "_GLOBAL__N__X_", n)
    if names:
        union = set().union(*[{norm(n) for n in v} for v in names.values()])
        for a, v in names.items():
            missing = union - {norm(n) for n in v}
            if missing:
                errors.append("%s lacks %d kernel(s), e.g. %s" % (a, len(missing), sorted(missing)[0]))

    # real code for every configuration the planner may select on that architecture
    checked = 0
    for a in want:
        cc = int(re.match(r"sm_(\d+)", a).group(1))
        large_ok = 90 <= cc < 120  # verify.cuh compiles large-smem tiles for these only (plan.cpp fits() agrees)
        for fn, regs in by_arch.get(a, {}).items():
            m = re.search(r"verify_kernel(?:_narrow)?ILi(\d+)E", fn)  # (and the fp8 32-row tiles' narrow kernels)
            if not m:
                continue
            cid = int(m.group(1))
            if cid not in configs:
                errors.append("%s: %s: configuration id %d not in src/tile_config.h" % (a, fn, cid))
                continue
            name, large = configs[cid]
            checked += 1
            if (not large or large_ok) and regs <= STUB_MAX_REGS:
                errors.append("%s: %s (%s) is a stub (%d registers) where the planner can select it" % (a, fn, name, regs))

    # the combine kernels' register ceiling (checked where it was measured: sm_90)
    combines = 0
    for a in want:
        most = 0
        for fn, regs in by_arch.get(a, {}).items():
            if re.search(r"combine_(block_|block8_)?kernel", fn):
                combines += 1
                most = max(most, regs)
                if a == "sm_90" and regs > COMBINE_MAX_REGS:
                    errors.append("%s: %s takes %d registers (> %d: fewer blocks a multiprocessor)"
                                  % (a, fn, regs, COMBINE_MAX_REGS))
        if a in by_arch:
            print("%s: combine kernels at most %d registers%s" % (a, most, "" if a == "sm_90" else " (not checked)"))

    for kernel, what in (("verify_wg_kernel", "MLA"), ("verify_wg_gqa_kernel", "GQA")):
        if "sm_90" in want and not any(kernel in fn for fn in by_arch.get("sm_90a", {})):
            errors.append("sm_90 build without the Hopper %s kernel (no sm_90a %s)" % (what, kernel))

    print("architectures %s; %d verify kernels, %d combine kernels checked (%s)"
          % (" ".join(want), checked, combines, cuobjdump))
    if checked == 0 or combines == 0:
        errors.append("nothing to check: no verify or combine kernel found")
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
