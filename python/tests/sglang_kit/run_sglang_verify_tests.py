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
"""
import os
import sys

tree, kit = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
pytest_args = sys.argv[3:]

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

os.chdir(tree)
sys.path.insert(0, os.path.join(tree, "test/registered/attention/unittests"))
import pytest  # noqa: E402

rc = pytest.main(["-p", "no:cacheprovider", *pytest_args])
print("[flashverify] backend stats:", dict(stats), flush=True)
fallbacks = {k: v for k, v in stats.items() if k.startswith("fallback:") and k != "fallback:not-target-verify"}
if rc == 0 and (stats["served"] == 0 or fallbacks):
    print(f"[flashverify] FAIL: served {stats['served']} verify calls, fallbacks {fallbacks}", flush=True)
    rc = 3
sys.exit(rc)
