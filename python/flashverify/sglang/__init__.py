"""SGLang integration: `FlashVerifyBackend`, a TritonAttnBackend whose target-verify attention runs
flashverify, registered as `--attention-backend flashverify` by the `sglang.srt.plugins` entry point
(`flashverify.sglang.plugin:register`). Importing this package imports SGLang."""
from .backend import FlashVerifyBackend, stats  # noqa: F401
from .plugin import register  # noqa: F401
