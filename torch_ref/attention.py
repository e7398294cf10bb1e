"""The attention call of torch_ref's model: compiled flex_attention with the record's BlockMask
(the record's own path, on CUDA), SDPA with a dense mask (the CPU path), or SDPA's causal mask
(#8/#9) (mirrors jaxgpt.attention's backends)."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

ATTN_SCALE = 0.12  # fixed attention scale of the record, not head_dim ** -0.5
CAUSAL = "causal"  # #8/#9's plain causal mask: SDPA's is_causal, no document mask


@functools.cache
def _compiled_flex_attention():
    # Compiled once per process: eager flex_attention would ignore the block lists (CPU_NOTES.md).
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def attend(q: Tensor, k: Tensor, v: Tensor, mask, scale: float = ATTN_SCALE) -> Tensor:
    """q, k, v (1, H, T, Dh) -> (1, H, T, Dh); mask is a BlockMask (flex), a (T, T) bool tensor
    (SDPA) or CAUSAL (SDPA's is_causal, #8/#9's cuDNN call)."""
    if isinstance(mask, str) and mask == CAUSAL:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    if isinstance(mask, Tensor):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return _compiled_flex_attention()(q, k, v, block_mask=mask, scale=scale)
