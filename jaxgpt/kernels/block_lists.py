"""Block lists in the shape the Pallas attention kernel reads them.

The kernel walks, for each 128-token query block, the key blocks of the record's truncated
lists (`jaxgpt.masks`), and in its backward pass, for each key block, the query blocks that
listed it (`jaxgpt.masks.transpose_block_lists`). With a window of at most `max_window_blocks`
blocks no list holds more entries than that, so only the first C columns of each index matrix
are kept (C = max_window_blocks rounded up to a power of two): O(T) memory instead of O(T^2 /
128^2) per list, and one (B, N, C) int32 array per list for the kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxgpt import masks
from jaxgpt.config import BLOCK_SIZE


class KernelBlockLists(NamedTuple):
    """kv: the key lists of each query block; q: the query lists of each key block.

    A `masks.BlockLists` and a `masks.QBlockLists` with a leading batch axis: counts (B, N)
    int32 (clamped at 0), indices (B, N, C) int32, nearest block first.
    """

    kv: masks.BlockLists
    q: masks.QBlockLists


def list_width(max_window_blocks: int) -> int:
    """Columns kept per index matrix: the window cap rounded up to a power of two."""
    return 1 << max(0, (max_window_blocks - 1).bit_length())


def _cut(lists, width: int):
    """Keep the first `width` columns of each index matrix (counts, indices, counts, indices)."""
    def cut(indices: jax.Array) -> jax.Array:
        kept = indices[:, :width]
        return jnp.pad(kept, ((0, 0), (0, width - kept.shape[1])))  # N < width: never-read zeros

    counts, indices, full_counts, full_indices = lists
    return type(lists)(counts, cut(indices), full_counts, cut(full_indices))


def kernel_block_lists(
    doc_ids: jax.Array, window_blocks: int | jax.Array, *, max_window_blocks: int = 14, block_size: int = BLOCK_SIZE
) -> KernelBlockLists:
    """The record's lists for a window of `window_blocks` (clamped to 0..max_window_blocks).

    doc_ids: (B, T) int32 document ids (`masks.document_ids`); window_blocks: a Python int or
    a traced int32 scalar, so a changing window does not recompile.
    """
    window = jnp.clip(jnp.asarray(window_blocks, jnp.int32), 0, max_window_blocks)
    width = list_width(max_window_blocks)

    def one_sequence(ids: jax.Array) -> KernelBlockLists:
        kv = masks.window_block_lists(ids, window, block_size)
        return KernelBlockLists(kv=_cut(kv, width), q=_cut(masks.transpose_block_lists(kv), width))

    return jax.vmap(one_sequence)(doc_ids.astype(jnp.int32))


def check_kernel_lists(lists: KernelBlockLists, batch: int, seq_len: int, mask_block: int) -> None:
    """ValueError naming the list unless every count is (B, N) and every index matrix (B, N, C)."""
    n_blocks = seq_len // mask_block
    for side, group in (("kv", lists.kv), ("q", lists.q)):
        for field, array in group._asdict().items():
            is_counts = field.endswith("num_blocks")
            if array.shape[:2] != (batch, n_blocks) or array.ndim != (2 if is_counts else 3):
                want = "(B, N)" if is_counts else "(B, N, C)"
                raise ValueError(f"block list {side}.{field} has shape {tuple(array.shape)}; T={seq_len} needs "
                                 f"{want} with B={batch}, N={n_blocks}")
