"""torch.ops.flashverify.verify_attention: the ctypes launch wrapped as a torch custom op, so that it is
captured by CUDA graphs (it only enqueues kernels on the current stream) and traced by torch.compile
(the fake implementation only declares which inputs it writes)."""
from __future__ import annotations

from typing import Optional

import torch

from . import _api

Tensor = torch.Tensor


@torch.library.custom_op("flashverify::verify_attention", mutates_args=("out", "lse", "workspace"),
                         device_types="cuda")
def verify_attention_op(q: Tensor, k_draft: Tensor, v_draft: Tensor, k_pool: Tensor, v_pool: Tensor,
                        qo_indptr: Tensor, kv_indptr: Tensor, kv_indices: Optional[Tensor],
                        custom_mask: Optional[Tensor], mask_indptr: Optional[Tensor],
                        mask_bits: Optional[Tensor], parents: Optional[Tensor], page_table: Optional[Tensor],
                        out: Tensor, lse: Optional[Tensor], workspace: Optional[Tensor], sm_scale: float,
                        max_draft: int, causal: bool, page_size: int, impl: int, num_kv_splits: int,
                        profile: int, sinks: Optional[Tensor], window_kv_offsets: Optional[Tensor],
                        logit_cap: float, sliding_window: int, xai_temperature_len: int, k_scale: float,
                        v_scale: float, check_indices: bool) -> None:
    _api.run_on_tensors(q, k_draft, v_draft, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices, custom_mask,
                        mask_indptr, mask_bits, parents, page_table, out, lse, workspace, sm_scale, max_draft,
                        causal, page_size, impl, num_kv_splits, profile, sinks, window_kv_offsets, logit_cap,
                        sliding_window, xai_temperature_len, k_scale, v_scale, check_indices)


@verify_attention_op.register_fake
def _(q, k_draft, v_draft, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
      mask_bits, parents, page_table, out, lse, workspace, sm_scale, max_draft, causal, page_size, impl,
      num_kv_splits, profile, sinks, window_kv_offsets, logit_cap, sliding_window, xai_temperature_len,
      k_scale, v_scale, check_indices) -> None:
    return None
