"""jaxgpt.attention for the lineage's masks: #15's token window and #8/#9's plain causal
attention, blocked backend against dense and against a direct softmax."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpt import attention, masks

T, H, D = 512, 2, 16


def _qkv(seed: int):
    keys = jax.random.split(jax.random.key(seed), 3)
    return [jax.random.normal(k, (1, T, H, D), jnp.float32) for k in keys]


@pytest.mark.parametrize("window_tokens", [64, 192, 256, 448])
def test_blocked_token_window_equals_dense(window_tokens):
    q, k, v = _qkv(0)
    tokens = np.random.default_rng(1).integers(0, 50000, T)
    tokens[[0, 100, 300]] = 50256
    doc_ids = masks.document_ids(jnp.asarray(tokens))[None]
    blocks = -(-window_tokens // 128)
    dense = attention.attention(q, k, v, doc_ids, blocks, backend="dense", window_tokens=window_tokens)
    blocked = jax.jit(lambda q, k, v, w: attention.attention(q, k, v, doc_ids, (w + 127) // 128, backend="blocked",
                                                             max_window_blocks=4, window_tokens=w))(
        q, k, v, jnp.int32(window_tokens))
    # fp32: the two backends sum the same terms in another order (tests/test_attention.py's bound).
    np.testing.assert_allclose(np.asarray(blocked), np.asarray(dense), rtol=2e-5, atol=2e-6)


def test_causal_mask_is_plain_causal_softmax():
    """#8/#9: one document (zero ids) and a window of every block is SDPA's is_causal."""
    q, k, v = _qkv(2)
    out = attention.attention(q, k, v, jnp.zeros((1, T), jnp.int32), T // 128, backend="blocked",
                              max_window_blocks=T // 128, scale=D**-0.5)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * D**-0.5
    scores = jnp.where(jnp.tril(jnp.ones((T, T), bool)), scores, -jnp.inf)
    expected = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=2e-5, atol=2e-6)


def test_pallas_refuses_a_token_window():
    q, k, v = _qkv(3)
    with pytest.raises(ValueError, match="token window"):
        attention.attention(q, k, v, jnp.zeros((1, T), jnp.int32), 2, backend="pallas", window_tokens=192)
