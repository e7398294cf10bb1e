"""Document-causal, block-windowed attention: one entry point, several backends.

The allowed set is the record's (RECORD.md section 3): key k is visible to query q when
k <= q, both are in the same document, and k's 128-token block is one of the query's own
block and the w - 1 blocks before it (w = 0 acts as 1). `window_tokens` sw adds #15's token
window q - k < sw (LINEAGE.md 5.4; dense and blocked backends).

Numerics follow FlexAttention's kernel as closely as plain JAX allows: scores q.k are
accumulated in fp32 and scaled in fp32, softmax statistics (row max, row sum) are fp32, the
unnormalised probabilities are cast to v's dtype for the PV matmul (fp32 accumulation), and
the fp32 result is divided by the row sum before the cast to q's dtype.

Backends:
  dense:   (T, T) scores and mask; the reference, for tests and short sequences.
  blocked: each query block sees a static window of `max_window_blocks` key blocks gathered
           around it, so memory and FLOPs are O(T * max_window_blocks); the dynamic window,
           causality and documents are applied as a mask inside that window.
  pallas:  `jaxgpt.kernels.flash_attention`: a Pallas (Triton) flash-attention kernel that
           visits only the listed key blocks, as FlexAttention does; interpret mode on a CPU.
  mosaic:  `jaxgpt.kernels.mosaic_attention`: the same walk as Hopper kernels in Pallas Mosaic
           GPU (wgmma, TMA pipeline, warp specialisation); bf16/fp16 only; Mosaic GPU's
           interpreter on a CPU.
  auto:    `pallas` where its kernels compile (a GPU), `blocked` elsewhere (`resolve_backend`);
           `mosaic` is chosen only by name until a GPU has timed it faster than `pallas`.

Shapes: B batch, T tokens, H heads, Dh head dim, N = T // block_size blocks,
W = max_window_blocks, C query blocks per scan step.
"""

from __future__ import annotations

from typing import NamedTuple, cast

import jax
import jax.numpy as jnp
from jax import lax

from jaxgpt.config import BLOCK_SIZE, AttentionBackend
from jaxgpt.kernels.block_lists import KernelBlockLists
from jaxgpt.kernels.flash_attention import default_interpret, flash_attention
from jaxgpt.masks import WindowBlocks, allowed_at, check_attention_inputs, closed_form_mask

# Query blocks per scan step of the blocked backend (upper bound; the largest divisor of N at
# most this is used). It trades per-step overhead against one step's scores and slab
# (C * bs * W * bs per head): docs/BENCHMARKS.md, "Numbers behind choices in the code".
QUERY_BLOCKS_PER_STEP = 8


class AttentionWindow(NamedTuple):
    """One attention call's window: `blocks` (int or traced int32; the block window, W_long or
    W_short), `tokens` (#15's token window sw, or None) and the static cap of `blocks`."""

    blocks: WindowBlocks
    tokens: WindowBlocks | None
    max_blocks: int


def _masked_softmax_pv(scores: jax.Array, allowed: jax.Array, v: jax.Array, out_dtype: jnp.dtype) -> jax.Array:
    """Softmax over the last axis of fp32 `scores` where `allowed`, then times v.

    scores: (..., H, Q, K) fp32; allowed: broadcastable to scores, bool, at least one True
    per row; v: (..., K, H, Dv). Returns (..., Q, H, Dv) in out_dtype.
    """
    scores = jnp.where(allowed, scores, -jnp.inf)
    row_max = jnp.max(scores, axis=-1, keepdims=True)
    unnormalised = jnp.exp(scores - row_max)  # masked entries: exp(-inf) = 0
    row_sum = jnp.sum(unnormalised, axis=-1)  # (..., H, Q) fp32
    # FlexAttention feeds the probabilities to the PV matmul in the value dtype (bf16 in the
    # record) with fp32 accumulation, and normalises the fp32 accumulator at the end.
    weighted = jnp.einsum(
        "...hqk,...khd->...qhd", unnormalised.astype(v.dtype), v, preferred_element_type=jnp.float32
    )
    normaliser = jnp.swapaxes(row_sum, -1, -2)[..., None]  # (..., Q, H, 1)
    return (weighted / normaliser).astype(out_dtype)


def _scores(q: jax.Array, k: jax.Array, scale: float) -> jax.Array:
    """(..., Q, H, Dh) x (..., K, H, Dh) -> (..., H, Q, K) fp32 scaled scores."""
    return jnp.einsum("...qhd,...khd->...hqk", q, k, preferred_element_type=jnp.float32) * jnp.float32(scale)


def dense_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    doc_ids: jax.Array,
    window_blocks: int | jax.Array,
    *,
    scale: float = 0.12,
    block_size: int = BLOCK_SIZE,
    window_tokens: int | jax.Array | None = None,
) -> jax.Array:
    """Reference backend with a (B, T, T) mask from the closed form; O(T^2) memory."""
    allowed = jax.vmap(lambda ids: closed_form_mask(ids, window_blocks, block_size=block_size,
                                                    window_tokens=window_tokens))(doc_ids)
    return _masked_softmax_pv(_scores(q, k, scale), allowed[:, None], v, q.dtype)


def _largest_divisor_at_most(n: int, bound: int) -> int:
    return max(d for d in range(1, min(n, bound) + 1) if n % d == 0)


def _padded_blocks(x: jax.Array, window_cap: int, block_size: int, fill: int = 0) -> jax.Array:
    """(B, T, ...) -> (B, W - 1 + N, bs, ...): T in N blocks of bs, W - 1 blocks of `fill` in front."""
    padding = [(0, 0), ((window_cap - 1) * block_size, 0)] + [(0, 0)] * (x.ndim - 2)
    x = jnp.pad(x, padding, constant_values=fill)
    return x.reshape(x.shape[0], -1, block_size, *x.shape[2:])


def _group_geometry(group: int, window_cap: int, block_size: int,
                    window_tokens: int | jax.Array | None) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The static geometry of one group of C query blocks: (slab block of each query block's
    window slot (C, W), blocks back of each slot (W,), the causal (and token-window) mask of a
    slot's keys (W, bs, bs)). Query block c takes slab blocks c .. c + W - 1; slot s lies
    W - 1 - s blocks before the query block."""
    window_slab_block = jnp.arange(group)[:, None] + jnp.arange(window_cap)[None, :]
    blocks_back = (window_cap - 1) - jnp.arange(window_cap)
    in_block_q = jnp.arange(block_size)[:, None]
    in_block_k = jnp.arange(block_size)[None, :]
    # Every key of an earlier block is causally visible; in the query's own block only k <= q.
    causal = (blocks_back[:, None, None] > 0) | (in_block_k <= in_block_q)[None]
    if window_tokens is not None:  # q - k, from the slot's block distance and the in-block offsets
        distance = blocks_back[:, None, None] * block_size + in_block_q[None] - in_block_k[None]
        causal = causal & (distance < jnp.asarray(window_tokens, jnp.int32))
    return window_slab_block, blocks_back, causal


def blocked_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    doc_ids: jax.Array,
    window_blocks: int | jax.Array,
    *,
    scale: float = 0.12,
    block_size: int = BLOCK_SIZE,
    max_window_blocks: int = 14,
    window_tokens: int | jax.Array | None = None,
) -> jax.Array:
    """Block-sparse backend: O(T * max_window_blocks) memory and FLOPs.

    Keys, values and doc ids get W - 1 blocks of padding in front, so that query block i's
    window is padded blocks i .. i + W - 1 (key blocks i - W + 1 .. i). Query blocks are taken
    C at a time; group g reads the slab of padded blocks gC .. gC + C + W - 2, and each of its
    query blocks gathers its W-block window from that slab. Each scan step slices its slab out
    of the padded k and v with dynamic_slice (no precut (C + W - 1) / C-fold copy), so the
    backward pass accumulates dK and dV into one padded (B, W - 1 + N, bs, H, D) buffer in
    k's dtype; precut slabs cost ~2.5x the attention backward memory at T = 65536
    (docs/BENCHMARKS.md). The scan body is rematerialised in the backward pass, so only one
    group's scores are alive at a time.
    """
    batch, seq_len, heads, head_dim = q.shape
    value_dim = v.shape[-1]
    n_blocks = seq_len // block_size
    window_cap = max_window_blocks
    group = _largest_divisor_at_most(n_blocks, QUERY_BLOCKS_PER_STEP)
    n_groups = n_blocks // group
    slab_blocks = group + window_cap - 1
    window = jnp.maximum(jnp.asarray(window_blocks, dtype=jnp.int32), 1)

    k_padded, v_padded = (_padded_blocks(x, window_cap, block_size) for x in (k, v))
    # -1 never equals a real document id (those are >= 0), so padded keys are never allowed.
    ids_padded = _padded_blocks(doc_ids.astype(jnp.int32), window_cap, block_size, fill=-1)
    q_groups = jnp.moveaxis(q.reshape(batch, n_groups, group, block_size, heads, head_dim), 1, 0)
    q_ids_groups = jnp.moveaxis(doc_ids.astype(jnp.int32).reshape(batch, n_groups, group, block_size), 1, 0)
    window_slab_block, blocks_back, causal = _group_geometry(group, window_cap, block_size, window_tokens)

    def one_group(q_blocks, q_ids, k_slab, v_slab, ids_slab) -> jax.Array:
        """q_blocks (B, C, bs, H, Dh); q_ids (B, C, bs); slabs (B, C+W-1, bs, ...) -> (B, C, bs, H, Dv)."""
        k_win = k_slab[:, window_slab_block].reshape(batch, group, window_cap * block_size, heads, head_dim)
        v_win = v_slab[:, window_slab_block].reshape(batch, group, window_cap * block_size, heads, value_dim)
        ids_win = ids_slab[:, window_slab_block]  # (B, C, W, bs)
        same_doc = q_ids[:, :, :, None, None] == ids_win[:, :, None, :, :]  # (B, C, bs, W, bs)
        in_window = (blocks_back < window)[:, None, None]  # (W, 1, 1)
        allowed = same_doc & jnp.moveaxis(causal & in_window, 0, 1)[None, None]
        allowed = allowed.reshape(batch, group, 1, block_size, window_cap * block_size)  # head axis
        return _masked_softmax_pv(_scores(q_blocks, k_win, scale), allowed, v_win, q.dtype)

    def group_step(q_blocks, q_ids, group_index, k_all, v_all, ids_all) -> jax.Array:
        # Slab of group g = padded blocks g*C .. g*C + C + W - 2, sliced here (not precut).
        start = group_index * group
        k_slab = lax.dynamic_slice_in_dim(k_all, start, slab_blocks, axis=1)
        v_slab = lax.dynamic_slice_in_dim(v_all, start, slab_blocks, axis=1)
        ids_slab = lax.dynamic_slice_in_dim(ids_all, start, slab_blocks, axis=1)
        return one_group(q_blocks, q_ids, k_slab, v_slab, ids_slab)

    group_fn = jax.checkpoint(group_step)

    def scan_step(carry: None, inputs: tuple[jax.Array, ...]) -> tuple[None, jax.Array]:
        return carry, group_fn(*inputs, k_padded, v_padded, ids_padded)

    _, outputs = lax.scan(scan_step, None, (q_groups, q_ids_groups, jnp.arange(n_groups)))
    return jnp.moveaxis(outputs, 0, 1).reshape(batch, seq_len, heads, value_dim)


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    doc_ids: jax.Array,
    window_blocks: int | jax.Array,
    *,
    backend: AttentionBackend = "blocked",
    scale: float = 0.12,
    block_size: int = BLOCK_SIZE,
    max_window_blocks: int = 14,
    kernel_lists: KernelBlockLists | None = None,
    window_tokens: int | jax.Array | None = None,
) -> jax.Array:
    """Document-causal block-window attention (the record's FlexAttention call).

    q, k: (B, T, H, Dh); v: (B, T, H, Dv); doc_ids: (B, T) int32 document ids
    (`jaxgpt.masks.document_ids`); window_blocks: window in 128-token blocks, a Python int in
    0..max_window_blocks or a traced int32 scalar (a traced value above max_window_blocks is
    treated as max_window_blocks by `blocked`, `pallas` and `mosaic` but not by `dense`; 0 acts as 1).
    kernel_lists: for `pallas` and `mosaic`, the lists of `jaxgpt.kernels.block_lists.kernel_block_lists`
    for this window (built here when None; pass them to share them between layers).
    window_tokens: #15's token window sw (q - k < sw on top of the block window); not "pallas".
    Returns (B, T, H, Dv) in q's dtype. Scores and softmax are fp32.
    """
    backend = resolve_backend(backend)
    if window_tokens is not None and backend in ("pallas", "mosaic"):
        raise ValueError(f"the {backend} backend applies block windows only; a token window (window_tokens) "
                         "needs the 'blocked' or 'dense' backend")
    if backend == "pallas":  # the kernels' wrappers check the same inputs (and their own limits) once
        return flash_attention(q, k, v, doc_ids, window_blocks, scale=scale, block_size=block_size,
                               max_window_blocks=max_window_blocks, lists=kernel_lists)
    if backend == "mosaic":
        # Imported here: Mosaic GPU's modules are slow to import, a cost every process that
        # imports the model (each trainer and test child) would pay for a GPU-only backend.
        from jaxgpt.kernels.mosaic_attention import mosaic_attention

        return mosaic_attention(q, k, v, doc_ids, window_blocks, scale=scale, block_size=block_size,
                                max_window_blocks=max_window_blocks, lists=kernel_lists)
    check_attention_inputs(q, k, v, doc_ids, window_blocks, block_size=block_size, max_window_blocks=max_window_blocks)
    if backend == "dense":
        return dense_attention(q, k, v, doc_ids, window_blocks, scale=scale, block_size=block_size,
                               window_tokens=window_tokens)
    if backend == "blocked":
        return blocked_attention(
            q, k, v, doc_ids, window_blocks, scale=scale, block_size=block_size, max_window_blocks=max_window_blocks,
            window_tokens=window_tokens,
        )
    raise ValueError(f"unknown attention backend {backend!r}; choose 'auto', 'dense', 'blocked', 'pallas' or 'mosaic'")


def resolve_backend(backend: str) -> AttentionBackend:
    """The backend "auto" stands for where this is traced: "pallas" if its kernels compile here
    (the default device is a GPU, or inside `flash_attention.compiled_kernels()`), else
    "blocked" (the interpreted kernel is for tests, not speed). Other names are returned as is."""
    if backend != "auto":
        return cast(AttentionBackend, backend)  # the callers check the name (attention's final else)
    return "blocked" if default_interpret() else "pallas"


def cached_attention(
    q: jax.Array,
    k_cache: jax.Array,
    v_cache: jax.Array,
    q_positions: jax.Array,
    q_doc_ids: jax.Array,
    k_doc_ids: jax.Array,
    window_blocks: int | jax.Array,
    *,
    scale: float = 0.12,
    block_size: int = BLOCK_SIZE,
    window_tokens: int | jax.Array | None = None,
) -> jax.Array:
    """Attention of C new queries to a key/value cache (incremental decoding), same allowed
    set and numerics as `dense_attention`.

    q: (B, C, H, Dh) at absolute positions q_positions (C,) int32; k_cache (B, S, H, Dh) and
    v_cache (B, S, H, Dv) hold positions 0..S-1 (the new keys already written; slots past the
    last written position are never allowed, being later than every query); q_doc_ids (B, C),
    k_doc_ids (B, S) int32 document ids. Returns (B, C, H, Dv) in q's dtype.
    """
    k_positions = jnp.arange(k_cache.shape[1], dtype=jnp.int32)
    allowed = allowed_at(q_positions[None, :, None], k_positions[None, None, :], q_doc_ids[:, :, None],
                         k_doc_ids[:, None, :], window_blocks, block_size=block_size,
                         window_tokens=window_tokens)  # (B, C, S)
    return _masked_softmax_pv(_scores(q, k_cache, scale), allowed[:, None], v_cache, q.dtype)
