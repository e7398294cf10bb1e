"""The record's rotary (Sub3Min, #18) rotates bf16 queries and keys in fp32 and rounds once (RECORD.md
2.7: x upcast, cos and sin fp32, the result cast back): held element by element. A rotation in bf16
itself (bf16 tables and products, #8-#15's way) is off in a large share of the outputs, which the bf16
forward comparisons' noise bounds let pass."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from jaxgpt.rotary import apply_rotary, rotary_tables


def test_the_half_truncated_rotation_of_bf16_inputs_is_fp32_rounded_once():
    T, H, Dh = 512, 2, 64
    cos, sin = (table[:T] for table in rotary_tables(Dh, 1024, "half_truncated"))
    x = jax.random.normal(jax.random.key(2), (1, T, H, Dh), jnp.float32).astype(jnp.bfloat16)
    x32 = np.asarray(x, np.float32)
    x1, x2 = x32[..., : Dh // 2], x32[..., Dh // 2 :]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    want = np.concatenate([x1 * c + x2 * s, x2 * c - x1 * s], axis=-1).astype(ml_dtypes.bfloat16).astype(np.float32)
    got = np.asarray(apply_rotary(x, jnp.asarray(cos), jnp.asarray(sin), in_fp32=True), np.float32)
    assert np.mean(got != want) <= 2e-3  # an fp32 result on a bf16 tie now and then
    np.testing.assert_allclose(got, want, rtol=2.0**-8, atol=1e-30)
