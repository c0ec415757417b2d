"""Entry point of group `sglang.srt.plugins`: SGLang calls `register()` in its main process and in every
scheduler subprocess, before it parses the server arguments. Nothing in SGLang is patched."""
import logging

logger = logging.getLogger(__name__)

BACKEND_NAME = "flashverify"


def register() -> None:
    from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS, register_attention_backend
    from sglang.srt.server_args import ATTENTION_BACKEND_CHOICES, add_attention_backend_choices

    if BACKEND_NAME not in ATTENTION_BACKEND_CHOICES:
        add_attention_backend_choices([BACKEND_NAME])
    if BACKEND_NAME in ATTENTION_BACKENDS:
        return

    @register_attention_backend(BACKEND_NAME)
    def create_flashverify_backend(runner):
        from .backend import FlashVerifyBackend

        return FlashVerifyBackend(runner)

    logger.info("flashverify: registered attention backend %r", BACKEND_NAME)
