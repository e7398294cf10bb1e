"""RMSNorm on bf16 inputs rounds once (RECORD.md 2.4: the mean of squares, rsqrt and product in fp32,
the result cast back): held element by element, where a looser relative bound lets a norm computed in
bf16 itself (a rounding after each operation, about a third of the outputs an ulp off) pass."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from jaxgpt import layers


@pytest.mark.parametrize("scale", [1e-2, 1.0, 100.0])
def test_a_bf16_norm_is_the_fp32_norm_rounded_once(scale):
    x = (jax.random.normal(jax.random.key(1), (64, 768), jnp.float32) * scale).astype(jnp.bfloat16)
    x32 = np.asarray(x, np.float32)
    want = (x32 / np.sqrt((x32**2).mean(-1, keepdims=True) + 2.0**-23)).astype(ml_dtypes.bfloat16).astype(np.float32)
    got = np.asarray(layers.norm(x), np.float32)
    # Summation order may put an fp32 result on the other side of a bf16 tie now and then: a few in 10^3.
    assert np.mean(got != want) <= 2e-3
    np.testing.assert_allclose(got, want, rtol=2.0**-8, atol=0)
