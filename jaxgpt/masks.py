"""Document ids, the record's per-block key lists, and token-level masks.

The record hands FlexAttention a BlockMask built from per-block lists (RECORD.md section 3):
for each 128-token query block, the key blocks that are "full" (no token mask needed) and
"partial" (the document-causal mask_mod applies), each listed nearest block first, and the
sliding window is applied by truncating those lists. This module rebuilds the same lists in
JAX, expands them into a token-level mask (`dense_mask`), and provides the closed form of the
same allowed set (`closed_form_mask`) as an independent oracle.

Every function here is jit-able; `window_blocks` may be a Python int or a traced int32 scalar.
Sizes: T tokens, N = T // block_size blocks.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpt.config import BLOCK_SIZE, EOT_ID

WindowBlocks = int | jax.Array


class BlockLists(NamedTuple):
    """Per-query-block key lists in the record's layout, with FlexAttention's field names
    (as torch_ref.masks): `kv_*` are the partial blocks, `full_kv_*` the full ones.

    *num_blocks: (N,) int32, how many leading entries of each row of the indices are used.
    *indices: (N, N) int32, a permutation of 0..N-1 per row: True key blocks in decreasing
      block index (nearest first), then the False ones (also decreasing; never read).
    """

    kv_num_blocks: jax.Array
    kv_indices: jax.Array
    full_kv_num_blocks: jax.Array
    full_kv_indices: jax.Array


def num_blocks(seq_len: int, block_size: int = BLOCK_SIZE) -> int:
    """N = seq_len // block_size; ValueError unless seq_len is a positive multiple of block_size."""
    if seq_len <= 0 or seq_len % block_size:
        raise ValueError(f"sequence length {seq_len} must be a positive multiple of the block size {block_size}")
    return seq_len // block_size


def check_attention_inputs(q: jax.Array, k: jax.Array, v: jax.Array, doc_ids: jax.Array, window_blocks: WindowBlocks,
                           *, block_size: int = BLOCK_SIZE, max_window_blocks: int = 14) -> None:
    """ValueError naming the problem unless q, k are (B, T, H, Dh), v (B, T, H, Dv), doc_ids
    (B, T) integers, T a positive multiple of block_size and an int window_blocks within
    0..max_window_blocks: the one check of an attention call, for every backend
    (`jaxgpt.attention.attention`, the Pallas kernel's `flash_attention`)."""
    if q.ndim != 4:
        raise ValueError(f"q must have shape (B, T, H, Dh), got {tuple(q.shape)}")
    if k.shape != q.shape:
        raise ValueError(f"k shape {tuple(k.shape)} differs from q shape {tuple(q.shape)}")
    if v.ndim != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"v shape {tuple(v.shape)} must be (B, T, H, Dv) with (B, T, H) = {tuple(q.shape[:3])}")
    if doc_ids.shape != q.shape[:2]:
        raise ValueError(f"doc_ids shape {tuple(doc_ids.shape)} must be (B, T) = {tuple(q.shape[:2])}")
    if not jnp.issubdtype(doc_ids.dtype, jnp.integer):
        raise ValueError(f"doc_ids must be integers, got {doc_ids.dtype}")
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    seq_len = q.shape[1]
    if seq_len <= 0 or seq_len % block_size:
        raise ValueError(f"sequence length T={seq_len} must be a positive multiple of block_size {block_size}")
    if max_window_blocks < 1:
        raise ValueError(f"max_window_blocks must be >= 1, got {max_window_blocks}")
    if isinstance(window_blocks, (int, np.integer)) and not 0 <= window_blocks <= max_window_blocks:
        raise ValueError(f"window_blocks={window_blocks} is outside 0..max_window_blocks={max_window_blocks}")


def _check_sequence(values: jax.Array, name: str, block_size: int) -> int:
    """Number of blocks of a (T,) token or document-id array; ValueError naming `name` unless it
    is 1-D with T a positive multiple of block_size."""
    if values.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of T values, got shape {tuple(values.shape)}")
    return num_blocks(values.shape[0], block_size)


def document_ids(tokens: jax.Array, eot_id: int = EOT_ID) -> jax.Array:
    """Inclusive running count of EOT tokens along the last axis: int32, same shape as tokens.

    EOT opens a document, so the EOT token carries the id of the document it starts and the
    tokens before the first EOT get id 0.
    """
    tokens = jnp.asarray(tokens)
    return jnp.cumsum(tokens == eot_id, axis=-1, dtype=jnp.int32)


def block_doc_ranges(doc_ids: jax.Array, block_size: int = BLOCK_SIZE) -> tuple[jax.Array, jax.Array]:
    """(low, high): document id at the first and the last token of each block; each (N,) int32.

    doc_ids: (T,) int32, non-decreasing.
    """
    n = num_blocks(doc_ids.shape[-1], block_size)
    per_block = doc_ids.reshape(n, block_size)
    return per_block[:, 0], per_block[:, -1]


def block_matrices(doc_ids: jax.Array, block_size: int = BLOCK_SIZE) -> tuple[jax.Array, jax.Array]:
    """(partial, full): (N, N) bool block matrices, query block i by key block j.

    full: i > j and both blocks lie inside one and the same document (no token mask needed).
    partial: i >= j and the blocks' document ranges intersect, but not full; this includes
    the diagonal block, which is never full.
    """
    low, high = block_doc_ranges(doc_ids, block_size)
    n = low.shape[0]
    q_block = jnp.arange(n)[:, None]
    k_block = jnp.arange(n)[None, :]
    docs_overlap = (low[:, None] <= high[None, :]) & (low[None, :] <= high[:, None])
    single_doc = (low[:, None] == high[None, :]) & (low[None, :] == high[:, None])
    any_allowed = (q_block >= k_block) & docs_overlap
    full = (q_block > k_block) & single_doc
    return any_allowed & ~full, full


def dense_to_ordered(block_matrix: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(counts, indices) of a boolean (N, N) block matrix, in the record's order.

    counts: (N,) int32 number of True entries per row. indices: (N, N) int32, the stable
    ascending argsort of each row reversed, i.e. True columns in decreasing index first.
    `descending=True` would keep ties in increasing order instead (RECORD.md 11.3).
    """
    counts = jnp.sum(block_matrix, axis=-1, dtype=jnp.int32)
    ascending = jnp.argsort(block_matrix.astype(jnp.int32), axis=-1, stable=True)
    return counts, jnp.flip(ascending, axis=-1).astype(jnp.int32)


def block_lists(doc_ids: jax.Array, block_size: int = BLOCK_SIZE) -> BlockLists:
    """Untruncated partial and full block lists of (T,) document ids; see `BlockLists`."""
    _check_sequence(doc_ids, "doc_ids", block_size)
    partial, full = block_matrices(doc_ids, block_size)
    return BlockLists(*dense_to_ordered(partial), *dense_to_ordered(full))


def truncate_to_window(lists: BlockLists, window_blocks: WindowBlocks) -> BlockLists:
    """The record's sliding window: only the counts change, exactly as the record computes them.

    full kept = min(full_count, w - 1), which is -1 when w = 0 (the short window while
    W_long = 1); partial kept = min(partial_count, max(w - full_count, 1)) with the
    untruncated full count. Use `clamp_counts` before reading the lists.
    """
    w = jnp.asarray(window_blocks, dtype=jnp.int32)
    full_kept = jnp.minimum(lists.full_kv_num_blocks, w - 1)
    partial_kept = jnp.minimum(lists.kv_num_blocks, jnp.maximum(w - lists.full_kv_num_blocks, 1))
    return lists._replace(kv_num_blocks=partial_kept, full_kv_num_blocks=full_kept)


def clamp_counts(lists: BlockLists) -> BlockLists:
    """Negative counts read as 0, as FlexAttention's CUDA loops do with a negative bound."""
    return lists._replace(
        kv_num_blocks=jnp.maximum(lists.kv_num_blocks, 0),
        full_kv_num_blocks=jnp.maximum(lists.full_kv_num_blocks, 0),
    )


def window_block_lists(doc_ids: jax.Array, window_blocks: WindowBlocks, block_size: int = BLOCK_SIZE) -> BlockLists:
    """The lists attention reads at a window: `block_lists` of (T,) document ids cut by
    `truncate_to_window`, counts clamped at 0 (`clamp_counts`)."""
    return clamp_counts(truncate_to_window(block_lists(doc_ids, block_size), window_blocks))


def _selected_blocks(counts: jax.Array, indices: jax.Array) -> jax.Array:
    """(N, N) bool: key block j is among the first counts[i] entries of row i of indices."""
    n = indices.shape[0]
    within_count = jnp.arange(n)[None, :] < counts[:, None]
    rows = jnp.broadcast_to(jnp.arange(n)[:, None], indices.shape)
    # Each row of indices is a permutation, so this scatter writes every cell exactly once.
    return jnp.zeros((n, n), dtype=bool).at[rows, indices].set(within_count)


def listed_blocks(lists: BlockLists) -> tuple[jax.Array, jax.Array]:
    """(partial, full): (N, N) bool, query block i by key block j, True where the leading
    entries of row i of the (truncated, clamped) lists name key block j: the blocks attention visits."""
    return (_selected_blocks(lists.kv_num_blocks, lists.kv_indices),
            _selected_blocks(lists.full_kv_num_blocks, lists.full_kv_indices))


class QBlockLists(NamedTuple):
    """Per-key-block query lists (FlexAttention's q-side names), the transpose of `BlockLists`.

    *num_blocks: (N,) int32, how many query blocks list key block j (partial / full).
    *indices: (N, N) int32, those query blocks nearest first (increasing i >= j), then the rest.
    """

    q_num_blocks: jax.Array
    q_indices: jax.Array
    full_q_num_blocks: jax.Array
    full_q_indices: jax.Array


def transpose_block_lists(lists: BlockLists) -> QBlockLists:
    """The q-side lists of (truncated, clamped) key lists: for each key block j, the query blocks
    i whose partial (full) list names j among its first num_blocks[i] entries.

    A block-sparse backward walks these to accumulate dK and dV (FlexAttention derives its
    q-side lists the same way from the kv-side ones).
    """
    def by_key_block(counts: jax.Array, indices: jax.Array) -> tuple[jax.Array, jax.Array]:
        listed_ji = _selected_blocks(counts, indices).T  # (key block j, query block i)
        # Stable ascending argsort of NOT listed: listed query blocks first, in increasing i.
        order = jnp.argsort(jnp.logical_not(listed_ji).astype(jnp.int32), axis=-1, stable=True)
        return jnp.sum(listed_ji, axis=-1, dtype=jnp.int32), order.astype(jnp.int32)

    return QBlockLists(*by_key_block(lists.kv_num_blocks, lists.kv_indices),
                       *by_key_block(lists.full_kv_num_blocks, lists.full_kv_indices))


def document_causal(doc_ids: jax.Array) -> jax.Array:
    """The record's mask_mod on all token pairs: (T, T) bool, k <= q and same document."""
    positions = jnp.arange(doc_ids.shape[-1])
    causal = positions[None, :] <= positions[:, None]
    return causal & (doc_ids[:, None] == doc_ids[None, :])


def dense_mask(
    tokens: jax.Array,
    window_blocks: WindowBlocks,
    *,
    block_size: int = BLOCK_SIZE,
    eot_id: int = EOT_ID,
) -> jax.Array:
    """(T, T) bool: may query q attend to key k under the record's BlockMask with this window.

    Built the record's way: full blocks are allowed whole, partial blocks through the
    document-causal mask_mod, each limited to the leading entries of its truncated list.
    tokens: (T,) integer token ids, T a positive multiple of block_size.
    """
    tokens = jnp.asarray(tokens)
    _check_sequence(tokens, "tokens", block_size)
    doc_ids = document_ids(tokens, eot_id)
    partial_blocks, full_blocks = listed_blocks(window_block_lists(doc_ids, window_blocks, block_size))

    def to_tokens(block_matrix: jax.Array) -> jax.Array:
        return jnp.repeat(jnp.repeat(block_matrix, block_size, axis=0), block_size, axis=1)

    in_partial = to_tokens(partial_blocks) & document_causal(doc_ids)
    return to_tokens(full_blocks) | in_partial


def closed_form_mask(doc_ids: jax.Array, window_blocks: WindowBlocks, *, block_size: int = BLOCK_SIZE,
                     window_tokens: WindowBlocks | None = None) -> jax.Array:
    """(T, T) bool: (k <= q) & same document & (q//bs - k//bs < max(w, 1)); RECORD.md section 3.
    With `window_tokens` sw also q - k < sw (#15's token window, LINEAGE.md 5.4).

    doc_ids: (T,) int32 document ids (see `document_ids`). Used as the test oracle and by the
    dense attention backend.
    """
    _check_sequence(doc_ids, "doc_ids", block_size)
    positions = jnp.arange(doc_ids.shape[0])
    return allowed_at(positions[:, None], positions[None, :], doc_ids[:, None], doc_ids[None, :],
                      window_blocks, block_size=block_size, window_tokens=window_tokens)


def allowed_at(
    q_positions: jax.Array, k_positions: jax.Array, q_doc_ids: jax.Array, k_doc_ids: jax.Array,
    window_blocks: WindowBlocks, *, block_size: int = BLOCK_SIZE, window_tokens: WindowBlocks | None = None,
) -> jax.Array:
    """The closed form at given absolute positions (all arguments broadcast together):
    k <= q, same document, and k's block among the query's own and the max(w, 1) - 1 before;
    with `window_tokens` sw (#15) also q - k < sw.
    Used by `closed_form_mask` and by incremental decoding against a key/value cache."""
    window = jnp.maximum(jnp.asarray(window_blocks, dtype=jnp.int32), 1)
    in_window = (q_positions // block_size - k_positions // block_size) < window
    allowed = (k_positions <= q_positions) & (q_doc_ids == k_doc_ids) & in_window
    if window_tokens is not None:
        allowed = allowed & (q_positions - k_positions < jnp.asarray(window_tokens, dtype=jnp.int32))
    return allowed
