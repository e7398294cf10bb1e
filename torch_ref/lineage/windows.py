"""The lineage's attention masks (LINEAGE.md sections 4-5; mirrors jaxgpt.lineage.windows): what
a step's window value means for each attention mask, and the window a step's metrics record.

  "document_blocks"  the record's: W_long blocks for the long layers, W_long // 2 for the short
  "document_tokens"  #15's: one token window sw for every layer, within ceil(sw / 128) blocks
  "causal"           #8/#9's plain causal attention over every earlier key (no documents)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from torch_ref import masks as masks_lib
from torch_ref.attention import CAUSAL
from torch_ref.config import BLOCK_SIZE, ModelConfig

# (input_seq (T,), the step's window, EOT id, whether FlexAttention runs) -> (long mask, short
# mask): BlockMasks (flex) or (T, T) bool tensors (SDPA), or CAUSAL for both
Masks = Callable[[Tensor, int | Tensor, int, bool], tuple[Any, Any]]


def _checked_window(window: int | Tensor) -> int | Tensor:
    """The window as given (an int, or a 0-d tensor as in the record: no recompiles), refused below 0."""
    if not isinstance(window, Tensor) and int(window) < 0:
        raise ValueError(f"sliding_window_num_blocks must be >= 0, got {window}")
    return window


def block_window_masks(input_seq: Tensor, window: int | Tensor, eot_id: int, use_flex: bool) -> tuple[Any, Any]:
    """The record's: document-causal masks of W_long and W_long // 2 blocks."""
    docs = masks_lib.document_ids(input_seq, eot_id, BLOCK_SIZE)
    w_long = _checked_window(window)
    lists = masks_lib.block_lists(docs, BLOCK_SIZE)
    truncated = [masks_lib.truncate_to_window(lists, w) for w in (w_long, w_long // 2)]
    if use_flex:
        return tuple(masks_lib.build_block_mask(t, docs, BLOCK_SIZE) for t in truncated)
    return tuple(masks_lib.allowed_mask_from_block_lists(t, docs, BLOCK_SIZE) for t in truncated)  # type: ignore[return-value]  # two masks


def token_window_masks(input_seq: Tensor, window: int | Tensor, eot_id: int, use_flex: bool) -> tuple[Any, Any]:
    """#15's: one document-causal mask of sw tokens (within ceil(sw / 128) blocks) for both kinds."""
    docs = masks_lib.document_ids(input_seq, eot_id, BLOCK_SIZE)
    sw = _checked_window(window)
    lists = masks_lib.token_window_block_lists(docs, sw, BLOCK_SIZE)
    if use_flex:
        mask = masks_lib.build_block_mask(lists, docs, BLOCK_SIZE, window_tokens=sw)
    else:
        mask = masks_lib.allowed_mask_from_block_lists(lists, docs, BLOCK_SIZE, window_tokens=sw)
    return mask, mask


def causal_masks(input_seq: Tensor, window: int | Tensor, eot_id: int, use_flex: bool) -> tuple[Any, Any]:
    """#8/#9's plain causal attention for both kinds (the window and the documents unused)."""
    return CAUSAL, CAUSAL


MASKS: dict[str, Masks] = {
    "document_blocks": block_window_masks, "document_tokens": token_window_masks, "causal": causal_masks}


def logged_window(config: ModelConfig, window: int) -> dict[str, int]:
    """The step's window as its long layers' attention takes it, for the metrics (jaxgpt.lineage's
    twin): `window_blocks`, W_long or #15's ceil(sw / 128) (0 for #8/#9's plain causal attention,
    which has no window), and, for #15, `window_tokens`: sw. FlexAttention has no cap."""
    if config.lineage.attention_mask == "causal":
        return {"window_blocks": 0}
    if config.lineage.attention_mask == "document_tokens":
        return {"window_blocks": -(-window // BLOCK_SIZE), "window_tokens": window}
    return {"window_blocks": window}
