"""flashverify: tree-verify attention for speculative decoding over a paged KV cache.

    import flashverify
    out, lse = flashverify.reference(...)            # numpy, float64 CPU oracle (no torch needed)
    ws = flashverify.Workspace.for_shapes(batch_size=16, max_draft=8, num_q_heads=16, num_kv_heads=1,
                                          head_dim_qk=576, head_dim_v=512)
    flashverify.verify_attention(q, k, v, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices,
                                 custom_mask=mask, mask_indptr=mask_indptr, sm_scale=s, max_draft=8,
                                 workspace=ws, out=o)  # CUDA, current stream, graph-safe

The library is found through FLASHVERIFY_LIBRARY, then the installed package, then a build directory of
a source checkout. `flashverify.sglang` holds the SGLang backend (imported on demand).
"""
from ._api import SUPPORTED_HEAD_DIMS, Workspace, build_info, reference, verify_attention, version
from ._lib import FlashVerifyError, LibraryNotFound

__all__ = ["FlashVerifyError", "LibraryNotFound", "SUPPORTED_HEAD_DIMS", "Workspace", "build_info", "reference",
           "verify_attention", "version"]
__version__ = "0.2.0"
