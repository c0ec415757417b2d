"""Runs SGLang's own backend-level target-verify tests with FlashVerifyBackend in place of the Triton
backend, then checks that flashverify (not the parent) served the verify calls.

    python3 run_sglang_verify_tests.py SGLANG_TREE STUBKIT_DIR [pytest args...]
e.g. python3 run_sglang_verify_tests.py /tmp/sglang .sglang-stubkit \\
        test/registered/attention/unittests/mla/test_triton.py \\
        test/registered/attention/unittests/dense/test_triton.py -k verify -q

SGLANG_TREE is an unpacked ../shared/tools/sglang-stubkit/pack-sglang-tree tarball; STUBKIT_DIR holds
sgl_stubs.py (the kit fakes the packages SGLang imports that the GPU machine lacks). The SGLang tests
build backends through ATTENTION_BACKENDS[name](runner); "triton" is pointed at FlashVerifyBackend.
Exit status: pytest's, or 3 if the tests passed but flashverify served no verify call or fell back.

FV_KIT_SHADOW selects a shadow-mode check (FLASHVERIFY_SHADOW=1: every verify call served outside graph
capture is compared with Triton's):
  (unset)   the default run above
  clean     additionally requires shadow checks > 0 and no shadow mismatch
  corrupt   flashverify's output is corrupted once (the first call of a backend the kit drives through
            eager, capture and replay, from the 3rd served call on); SGLang's tests must still pass (the
            shadow check puts Triton's output in place and turns flashverify off for that backend), and
            the stats must show exactly one mismatch, "fallback:disabled" calls after it, and >= 3 served
"""
import os
import sys

tree, kit = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
pytest_args = sys.argv[3:]

SHADOW_MODE = os.environ.get("FV_KIT_SHADOW", "")
if SHADOW_MODE not in ("", "clean", "corrupt"):
    print(f"[flashverify] FV_KIT_SHADOW={SHADOW_MODE!r}: expected clean or corrupt", flush=True)
    sys.exit(2)
if SHADOW_MODE:
    os.environ["FLASHVERIFY_SHADOW"] = "1"  # read by every FlashVerifyBackend when it is created
    print(f"[flashverify] shadow mode {SHADOW_MODE}: FLASHVERIFY_SHADOW=1", flush=True)

# SGLang's kit builds its cases with toy head dims (dense 16, MLA rank 32 without rope), below the
# closed list flashverify serves (MLA 512 + 64 rope; 64/128/256), so every verify call would fall back.
# The scratch copy of the tree is run with production dims instead: MLA 512 + 64, dense 128.
if os.environ.get("FV_KIT_PRODUCTION_DIMS", "1") == "1":
    import re

    kit_dir = os.path.join(tree, "python/sglang/test/kits/attention_unittest/attention_methods")
    for fname, subs in (("mla_attention.py", [("DEFAULT_KV_LORA_RANK", "512"), ("DEFAULT_QK_ROPE_HEAD_DIM", "64")]),
                        ("dense_attention.py", [("DEFAULT_HEAD_DIM", "128")])):
        path = os.path.join(kit_dir, fname)
        src = open(path).read()
        for name, value in subs:
            src, n = re.subn(rf"^{name} = \d+", f"{name} = {value}", src, flags=re.M)
            assert n == 1, f"{fname}: {name} not found"
        open(path, "w").write(src)
    print("[flashverify] SGLang kit run with production head dims (MLA 512+64, dense 128)", flush=True)
sys.path.insert(0, kit)
import sgl_stubs  # noqa: E402

faked = sgl_stubs.install(os.path.join(tree, "python"))
print("[sgl_stubs] faked:", ", ".join(faked), flush=True)
repo_python = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.abspath(repo_python))

from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS  # noqa: E402

from flashverify.sglang import FlashVerifyBackend, register, stats  # noqa: E402

register()  # what the sglang.srt.plugins entry point does at server start
assert "flashverify" in ATTENTION_BACKENDS
ATTENTION_BACKENDS["triton"] = lambda runner: FlashVerifyBackend(runner)

CORRUPT_FROM = 3  # the earliest served call that may be corrupted
corruption = {"served_calls": 0, "injected_at": None}
if SHADOW_MODE == "corrupt":
    import torch

    import flashverify.sglang.backend as fv_backend

    # A backend is disabled for good after a mismatch, but the kit builds a fresh backend for every case,
    # and its eager cases make one verify call each: the corrupted call must be the first of a backend that
    # gets more, i.e. one the kit prepares for CUDA graphs (init_cuda_graph_state, then eager, capture and
    # replay calls). The running backend is taken from forward_extend, the only way into verify.
    running = []
    real_forward_extend = FlashVerifyBackend.forward_extend
    real_init_cuda_graph_state = FlashVerifyBackend.init_cuda_graph_state
    real_verify_attention = fv_backend.verify_attention

    def forward_extend(self, *args, **kwargs):
        running.append(self)
        try:
            return real_forward_extend(self, *args, **kwargs)
        finally:
            running.pop()

    def init_cuda_graph_state(self, *args, **kwargs):
        self._fv_kit_graph_state = True
        return real_init_cuda_graph_state(self, *args, **kwargs)

    def corrupting_verify_attention(*args, **kwargs):
        out = real_verify_attention(*args, **kwargs)
        corruption["served_calls"] += 1
        backend = running[-1] if running else None
        if (corruption["injected_at"] is None and corruption["served_calls"] >= CORRUPT_FROM
                and getattr(backend, "_fv_kit_graph_state", False) and backend._served == 0
                and not torch.cuda.is_current_stream_capturing()):  # only checked outside capture
            out.fill_(1000.0)
            corruption["injected_at"] = corruption["served_calls"]
            print(f"\n[flashverify] corrupting the output of served verify call {corruption['injected_at']}",
                  flush=True)
        return out

    FlashVerifyBackend.forward_extend = forward_extend
    FlashVerifyBackend.init_cuda_graph_state = init_cuda_graph_state
    fv_backend.verify_attention = corrupting_verify_attention

os.chdir(tree)
sys.path.insert(0, os.path.join(tree, "test/registered/attention/unittests"))
import pytest  # noqa: E402

rc = pytest.main(["-p", "no:cacheprovider", *pytest_args])
print("[flashverify] backend stats:", dict(stats), flush=True)
# corrupt mode: the calls after the mismatch go to Triton as "fallback:disabled", by design
allowed = {"fallback:not-target-verify"} | ({"fallback:disabled"} if SHADOW_MODE == "corrupt" else set())
fallbacks = {k: v for k, v in stats.items() if k.startswith("fallback:") and k not in allowed}
problems = []
if stats["served"] == 0 or fallbacks:
    problems.append(f"served {stats['served']} verify calls, fallbacks {fallbacks}")
if SHADOW_MODE == "clean":
    print(f"[flashverify] shadow mode clean: {stats['shadow_checks']} shadow checks, "
          f"{stats['shadow_mismatch']} mismatches, {stats['served']} served", flush=True)
    if stats["shadow_checks"] == 0 or stats["shadow_mismatch"] != 0:
        problems.append(f"shadow mode clean: expected shadow checks > 0 and no mismatch, got "
                        f"{stats['shadow_checks']} checks and {stats['shadow_mismatch']} mismatches")
elif SHADOW_MODE == "corrupt":
    print(f"[flashverify] shadow mode corrupt: corrupted served call {corruption['injected_at']}, "
          f"{stats['shadow_checks']} shadow checks, {stats['shadow_mismatch']} mismatches, "
          f"{stats['fallback:disabled']} calls sent to Triton after it (fallback:disabled), "
          f"{stats['served']} served", flush=True)
    if (corruption["injected_at"] is None or stats["shadow_mismatch"] != 1 or stats["fallback:disabled"] == 0
            or stats["served"] < 3):
        problems.append(f"shadow mode corrupt: expected one corrupted call caught by exactly one mismatch, "
                        f"fallback:disabled > 0 and served >= 3; got corrupted call {corruption['injected_at']}, "
                        f"{stats['shadow_mismatch']} mismatches, {stats['fallback:disabled']} fallback:disabled, "
                        f"{stats['served']} served")
if rc == 0 and problems:
    for p in problems:
        print(f"[flashverify] FAIL: {p}", flush=True)
    rc = 3
verdict = "PASS" if rc == 0 else f"FAIL (exit {rc}{', pytest failed' if rc not in (0, 3) else ''})"
print(f"[flashverify] {verdict}{f' (shadow mode {SHADOW_MODE})' if SHADOW_MODE else ''}", flush=True)
sys.exit(rc)
