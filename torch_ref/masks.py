"""The record's document-causal, block-sparse sliding-window attention masks (RECORD.md section 3).

Pipeline, mirroring jaxgpt/masks.py:

    document_ids(input_seq)               (T,) int64    EOT cumulative count, inclusive
    block_lists(docs)                     BlockLists    untruncated partial/full lists, nearest first
    truncate_to_window(lists, w)          BlockLists    the record's truncation; counts may be -1
    clamp_counts(lists)                   BlockLists    negative counts -> 0 (what the kernel does)
    build_block_mask(lists, docs)         BlockMask     for (compiled) flex_attention
    allowed_mask_from_block_lists(...)    (T, T) bool   the same allowed set, for SDPA on the CPU

On the CPU, eager flex_attention ignores the block lists (and so the window) and has no backward
(CPU_NOTES.md); the model therefore attends with an explicit boolean mask from
`allowed_mask_from_block_lists` there, and with a BlockMask under compiled flex_attention on CUDA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from torch_ref.config import BLOCK_SIZE, EOT_ID

__all__ = [
    "BlockLists",
    "allowed_mask_from_block_lists",
    "block_lists",
    "build_block_mask",
    "clamp_counts",
    "dense_to_ordered",
    "document_causal_mask_mod",
    "document_ids",
    "truncate_to_window",
    "window_block_lists",
]


class BlockLists(NamedTuple):
    """Per-query-block lists of key blocks, as handed to BlockMask.from_kv_blocks (minus the two
    leading (batch, head) axes). N = T / block_size.

    kv_num_blocks:      (N,) int32   number of partial key blocks to visit (mask_mod applies)
    kv_indices:         (N, N) int32 partial key block ids, nearest (largest) first, then padding
    full_kv_num_blocks: (N,) int32   number of full key blocks (no mask_mod needed)
    full_kv_indices:    (N, N) int32 full key block ids, nearest first, then padding
    """

    kv_num_blocks: Tensor
    kv_indices: Tensor
    full_kv_num_blocks: Tensor
    full_kv_indices: Tensor


def _check_tokens(input_seq: Tensor, block_size: int) -> None:
    if input_seq.ndim != 1:
        raise ValueError(f"input_seq must be 1-D (one packed sequence), got shape {tuple(input_seq.shape)}")
    if input_seq.numel() == 0 or input_seq.numel() % block_size:
        raise ValueError(
            f"sequence length {input_seq.numel()} must be a positive multiple of the block size {block_size}"
        )


def document_ids(input_seq: Tensor, eot_id: int = EOT_ID, block_size: int = BLOCK_SIZE) -> Tensor:
    """(T,) int tokens -> (T,) int64 document ids: the number of EOT tokens up to and including t.

    Documents start with their EOT token, so an EOT carries the id of the document it opens and
    tokens before the first EOT get id 0.
    """
    _check_tokens(input_seq, block_size)
    return (input_seq == eot_id).cumsum(0)


def document_causal_mask_mod(docs: Tensor, window_tokens: int | Tensor | None = None
                             ) -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]:
    """The token-level mask_mod used inside partial blocks: q sees k iff k <= q in the same document
    (and, with #15's `window_tokens` sw, q - k < sw)."""

    def mask_mod(batch: Tensor, head: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        allowed = (q_idx >= kv_idx) & (docs[q_idx] == docs[kv_idx])
        if window_tokens is not None:
            allowed = allowed & (q_idx - kv_idx < window_tokens)
        return allowed

    return mask_mod


def token_window_block_lists(docs: Tensor, window_tokens: int | Tensor, block_size: int = BLOCK_SIZE) -> BlockLists:
    """#15's block lists (LINEAGE.md 5.4): every key block that is causal, shares a document and
    lies within ceil(sw / block_size) blocks of the query block, all of them partial (the token
    mask_mod, document-causal and q - k < sw, applies to each); no full blocks. Not truncated, so
    their order (here nearest first) only orders the accumulation."""
    num_blocks = docs.numel() // block_size
    per_block = docs.view(num_blocks, block_size)
    low, high = per_block[:, 0], per_block[:, -1]
    block = torch.arange(num_blocks, device=docs.device)
    q_block, kv_block = block[:, None], block[None, :]
    window_blocks = (window_tokens + block_size - 1) // block_size
    listed = (q_block >= kv_block) & (low[:, None] <= high[None, :]) & (low[None, :] <= high[:, None])
    listed = listed & (q_block - kv_block < window_blocks)
    kv_num, kv_idx = dense_to_ordered(listed)
    none = torch.zeros_like(listed)
    full_num, full_idx = dense_to_ordered(none)
    return BlockLists(kv_num, kv_idx, full_num, full_idx)


def dense_to_ordered(dense: Tensor) -> tuple[Tensor, Tensor]:
    """(N, N) bool block matrix -> (counts (N,) int32, indices (N, N) int32).

    A stable ascending argsort puts False columns first and True columns last, each group in
    increasing column order; flipping it lists the True columns first in DECREASING order, i.e. the
    nearest key block first. Truncating such a list to w entries keeps the w nearest blocks, which
    is how the record applies its sliding window.
    """
    counts = dense.sum(dim=-1, dtype=torch.int32)
    order = dense.argsort(dim=-1, descending=False, stable=True).flip(-1).to(torch.int32)
    return counts, order


def block_lists(docs: Tensor, block_size: int = BLOCK_SIZE) -> BlockLists:
    """(T,) document ids -> the untruncated partial and full block lists.

    A key block is "full" for a query block if it is strictly earlier and both blocks lie in one
    single document (the mask_mod would allow every pair); it is "partial" if some pair may be
    allowed (causal at block level and the document-id ranges overlap) but not all. The diagonal
    block is always partial.
    """
    num_blocks = docs.numel() // block_size
    per_block = docs.view(num_blocks, block_size)
    low, high = per_block[:, 0], per_block[:, -1]  # docs is non-decreasing, so these bound each block
    block = torch.arange(num_blocks, device=docs.device)
    q_block, kv_block = block[:, None], block[None, :]
    causal_any = q_block >= kv_block
    causal_full = q_block > kv_block
    docs_overlap = (low[:, None] <= high[None, :]) & (low[None, :] <= high[:, None])
    same_single_doc = (low[:, None] == high[None, :]) & (low[None, :] == high[:, None])
    full = causal_full & same_single_doc
    partial = causal_any & docs_overlap & ~full
    kv_num, kv_idx = dense_to_ordered(partial)
    full_num, full_idx = dense_to_ordered(full)
    return BlockLists(kv_num, kv_idx, full_num, full_idx)


def truncate_to_window(lists: BlockLists, window_blocks: int | Tensor) -> BlockLists:
    """Keep only the nearest blocks of a window of `window_blocks` blocks, exactly as the record:

        full kept    = min(full_count, w - 1)                      (-1 when w = 0)
        partial kept = min(partial_count, max(w - full_count, 1))  (untruncated full_count)

    Counts may come out negative (w = 0, the short window while W_long = 1); `clamp_counts` gives
    what the kernel effectively uses. Index lists are unchanged.
    """
    if isinstance(window_blocks, Tensor):
        # Kept a tensor (no host sync), so that a compiled model does not specialise on the window.
        if window_blocks.ndim != 0:
            raise ValueError(f"window_blocks must be a scalar, got shape {tuple(window_blocks.shape)}")
    elif int(window_blocks) < 0:
        raise ValueError(f"window_blocks must be non-negative, got {window_blocks!r}")
    w = torch.as_tensor(window_blocks, dtype=torch.int32, device=lists.kv_num_blocks.device)
    partial_kept = torch.clamp_max(lists.kv_num_blocks, torch.clamp_min(w - lists.full_kv_num_blocks, 1))
    full_kept = torch.clamp_max(lists.full_kv_num_blocks, w - 1)
    return BlockLists(partial_kept, lists.kv_indices, full_kept, lists.full_kv_indices)


def clamp_counts(lists: BlockLists) -> BlockLists:
    """Negative counts as zero: a kernel loop with a negative bound visits nothing."""
    return lists._replace(
        kv_num_blocks=lists.kv_num_blocks.clamp_min(0),
        full_kv_num_blocks=lists.full_kv_num_blocks.clamp_min(0),
    )


def window_block_lists(
    input_seq: Tensor, window_blocks: int | Tensor, eot_id: int = EOT_ID, block_size: int = BLOCK_SIZE
) -> tuple[BlockLists, BlockLists]:
    """(long, short) raw truncated lists for W_long = window_blocks and W_short = window_blocks // 2."""
    lists = block_lists(document_ids(input_seq, eot_id, block_size), block_size)
    w_long = window_blocks if isinstance(window_blocks, Tensor) else int(window_blocks)
    return truncate_to_window(lists, w_long), truncate_to_window(lists, w_long // 2)


def build_block_mask(lists: BlockLists, docs: Tensor, block_size: int = BLOCK_SIZE,
                     window_tokens: int | Tensor | None = None):
    """A torch BlockMask (batch 1, one head broadcast) from truncated lists and (T,) document ids
    (and #15's token window in the mask_mod).

    Counts are clamped at 0 first: the record's CUDA kernel of 2025 treated -1 as 0, while current
    compiled kernels fail on negative counts (CPU_NOTES.md); the allowed set is the same.
    """
    from torch.nn.attention.flex_attention import BlockMask

    lists = clamp_counts(lists)

    def batched(t: Tensor) -> Tensor:
        return t[None, None].contiguous()

    return BlockMask.from_kv_blocks(
        batched(lists.kv_num_blocks),
        batched(lists.kv_indices),
        batched(lists.full_kv_num_blocks),
        batched(lists.full_kv_indices),
        BLOCK_SIZE=block_size,
        mask_mod=document_causal_mask_mod(docs, window_tokens),
    )


def _selected_blocks(counts: Tensor, indices: Tensor) -> Tensor:
    """(N,) counts (clamped at 0) and (N, N) ordered indices -> (N, N) bool: block j is visited by row i."""
    num_blocks = indices.shape[-1]
    rank = torch.arange(num_blocks, device=indices.device)
    used = rank[None, :] < counts.clamp_min(0)[:, None]  # the leading `count` entries of each row
    selected = torch.zeros(num_blocks, num_blocks, dtype=torch.bool, device=indices.device)
    selected.scatter_(1, indices.long(), used)
    return selected


def allowed_mask_from_block_lists(lists: BlockLists, docs: Tensor, block_size: int = BLOCK_SIZE,
                                  window_tokens: int | Tensor | None = None) -> Tensor:
    """Expand (truncated) block lists into the (T, T) bool mask [query, key] that FlexAttention obeys.

    Full blocks are allowed entirely; partial blocks through the document-causal mask_mod (with
    #15's token window when `window_tokens` is given); every other block is masked. Negative
    counts count as 0.
    """
    seq_len = docs.numel()
    full_blocks = _selected_blocks(lists.full_kv_num_blocks, lists.full_kv_indices)
    partial_blocks = _selected_blocks(lists.kv_num_blocks, lists.kv_indices)

    def to_tokens(block_matrix: Tensor) -> Tensor:
        return block_matrix.repeat_interleave(block_size, 0).repeat_interleave(block_size, 1)

    position = torch.arange(seq_len, device=docs.device)
    document_causal = (position[:, None] >= position[None, :]) & (docs[:, None] == docs[None, :])
    if window_tokens is not None:
        document_causal = document_causal & (position[:, None] - position[None, :] < window_tokens)
    return to_tokens(full_blocks) | (to_tokens(partial_blocks) & document_causal)
