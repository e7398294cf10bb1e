"""Incremental decoding (text sampling, jaxgpt.sample): the model's own layers run on the C new
tokens of a step, their keys and values written into a cache that the queries attend to, with
the record's windows and document mask. `logits(model, ids, window)` equals the model's logits
of the whole sequence at those positions (tests/test_sample.py)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from jaxgpt import attention as attention_lib
from jaxgpt.attention import AttentionWindow
from jaxgpt.layers import compute_dtype
from jaxgpt.masks import WindowBlocks
from jaxgpt.model import GPT, Attend, CausalSelfAttention


class DecodeContext(NamedTuple):
    """Where the C new tokens of an incremental decoding step sit in the cached sequence.

    positions: (C,) int32 absolute positions (rotary and window use them, as in training);
    cache_doc_ids: (B, S) int32 document id of every cache slot, the new tokens' included.
    """

    positions: jax.Array
    cache_doc_ids: jax.Array


def init_cache(model: GPT, batch: int, max_len: int) -> None:
    """Zeroed caches on `model` for decoding up to `max_len` positions of `batch` sequences: the
    keys and values of every attention layer, each (batch, max_len, H, Dh) in the matmul dtype,
    the document id of every position and the cached length."""
    config = model.config
    if not 0 < max_len <= config.rope_max_len:
        raise ValueError(f"decode cache length {max_len} must be in 1..rope_max_len {config.rope_max_len}")
    model.cache_length = nnx.Cache(jnp.zeros((), jnp.int32))
    model.cache_doc_ids = nnx.Cache(jnp.zeros((batch, max_len), jnp.int32))
    shape = (batch, max_len, config.num_heads, config.head_dim)
    for block in model.blocks:
        if block.attn is not None:
            block.attn.cache_k = nnx.Cache(jnp.zeros(shape, compute_dtype(config)))
            block.attn.cache_v = nnx.Cache(jnp.zeros(shape, compute_dtype(config)))


def attend_cached(context: DecodeContext) -> Attend:
    """The layers' attention while decoding: the new keys and values written into the layer's
    cache at context.positions, the new queries over the whole cache."""

    def attend(attn: CausalSelfAttention, q: jax.Array, k: jax.Array, v: jax.Array, doc_ids_BC: jax.Array,
               window: AttentionWindow, lists: object) -> jax.Array:
        del lists
        start = context.positions[0]
        for cache, new in ((attn.cache_k, k), (attn.cache_v, v)):
            stored = cache.get_value()
            cache.set_value(jax.lax.dynamic_update_slice_in_dim(stored, new.astype(stored.dtype), start, axis=1))
        config = attn.config
        return attention_lib.cached_attention(
            q, attn.cache_k.get_value(), attn.cache_v.get_value(), context.positions, doc_ids_BC,
            context.cache_doc_ids, window.blocks, scale=config.attention_scale, block_size=config.block_size,
            window_tokens=window.tokens,
        )

    return attend


def logits(model: GPT, input_ids: jax.Array, window_blocks: WindowBlocks) -> jax.Array:
    """(B, C, Vp) eval-mode logits (before the soft-cap) of C tokens (B, C) that continue the
    cached sequence, at positions cache_length .. cache_length + C - 1; writes them into the
    cache and advances it. The caller keeps cache_length + C <= the cache length (writes past it
    are clamped by XLA, not detected)."""
    chunk = input_ids.shape[1]
    max_len = model.cache_doc_ids.get_value().shape[1]
    start = model.cache_length.get_value()
    positions = start + jnp.arange(chunk, dtype=jnp.int32)
    # Document ids continue from the last cached position (0 before the first token).
    previous = jnp.where(start > 0, model.cache_doc_ids.get_value()[:, jnp.maximum(start - 1, 0)], 0)
    doc_ids = previous[:, None] + model.document_ids(input_ids)
    cache_doc_ids = jax.lax.dynamic_update_slice_in_dim(model.cache_doc_ids.get_value(), doc_ids, start, axis=1)
    cos, sin = model.rotary_tables()
    rotary = (jnp.asarray(cos[:max_len])[positions], jnp.asarray(sin[:max_len])[positions])
    x = model.layers(input_ids, doc_ids, window_blocks, rotary, attend_cached(DecodeContext(positions, cache_doc_ids)))
    model.cache_doc_ids.set_value(cache_doc_ids)
    model.cache_length.set_value(start + chunk)
    return model.head(x, train=False)
