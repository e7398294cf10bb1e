"""jaxgpt.fp8: the record's FP8 lm_head, alone and fused with its loss (RECORD.md 2.9)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from jaxgpt import fp8
from jaxgpt import loss as loss_lib


def _fp8_operands(seed: int = 0, n: int = 64, d: int = 128, v: int = 256):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(k1, (n, d), jnp.float32).astype(jnp.bfloat16)
    w = 0.05 * jax.random.normal(k2, (v, d), jnp.float32)
    g = (2.0**-16 * jax.random.normal(k3, (n, v), jnp.float32)).astype(jnp.bfloat16)
    return x, w, g


def test_fp8_casts_match_ml_dtypes_round_to_nearest_even():
    values = np.random.default_rng(0).standard_normal(100_000).astype(np.float32) * 50
    got = np.asarray(jnp.asarray(values).astype(jnp.float8_e4m3fn)).astype(np.float32)
    np.testing.assert_array_equal(got, values.astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    grads = (values * 2.0**-10).astype(ml_dtypes.bfloat16)
    got = np.asarray(jnp.asarray(grads).astype(jnp.float8_e5m2)).astype(np.float32)
    np.testing.assert_array_equal(got, grads.astype(ml_dtypes.float8_e5m2).astype(np.float32))


def test_fp8_head_forward_matches_quantised_formula():
    x, w, _ = _fp8_operands()
    out = fp8.fp8_head(x, w)
    assert out.dtype == jnp.bfloat16
    xq = (np.asarray(x, np.float32) * 2).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    wq = (np.asarray(w) * 32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    want = ((xq @ wq.T) / 64).astype(np.float32).astype(ml_dtypes.bfloat16)
    # fp32 accumulation of exact fp8 products vs float64: differs by at most 1 bf16 ulp.
    np.testing.assert_allclose(np.asarray(out, np.float32), want.astype(np.float32), rtol=2**-7, atol=1e-6)
    exact_fraction = np.mean(np.asarray(out, np.float32) == want.astype(np.float32))
    assert exact_fraction > 0.99  # almost every entry is the same bf16 value
    unquantised = np.asarray(x, np.float32) @ np.asarray(w).T
    assert np.abs(np.asarray(out, np.float32) - unquantised).max() > 1e-2  # quantisation is real


def test_fp8_head_backward_matches_formula_with_quantised_operands():
    x, w, g = _fp8_operands()
    out, vjp = jax.vjp(fp8.fp8_head, x, w)
    dx, dw = vjp(g)
    assert dx.dtype == jnp.bfloat16 and dw.dtype == jnp.float32
    xq = (np.asarray(x, np.float32) * 2).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    wq = (np.asarray(w) * 32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    gq = (np.asarray(g, np.float32) * 2.0**29).astype(ml_dtypes.float8_e5m2).astype(np.float64)
    want_dx = (gq @ wq) * 2.0**-29 / 32
    want_dw = (gq.T @ xq) * 2.0**-29 / 2
    # dx: one bf16 rounding of an exact-product fp32 sum (<= 1 ulp, 2^-7 relative);
    # dw: fp32 sum of exact products, 1e-5 relative for 64-term sums (plus tiny-value atol).
    np.testing.assert_allclose(np.asarray(dx, np.float32), want_dx, rtol=2**-7, atol=1e-9)
    np.testing.assert_allclose(np.asarray(dw), want_dw, rtol=1e-5, atol=1e-12)
    # The same formula with the unquantised X, W is measurably different: the residuals are reused.
    raw_dw = (gq.T @ np.asarray(x, np.float64)) * 2.0**-29
    assert np.abs(raw_dw - want_dw).max() > 100 * np.abs(np.asarray(dw) - want_dw).max()


def test_fp8_head_gradient_scale_is_invisible():
    # Without the 2^29 scale, gradients of size 2^-16 would underflow e5m2 (min normal 2^-14).
    x, w, g = _fp8_operands()
    _, vjp = jax.vjp(fp8.fp8_head, x, w)
    dx, dw = vjp(g)
    plain_dx = np.asarray(g, np.float32) @ np.asarray(w)
    np.testing.assert_allclose(np.asarray(dx, np.float32), plain_dx, rtol=0.15, atol=3e-6)  # e5m2: 2 mantissa bits


# --- the matmul fused with its loss ----------------------------------------------------------


def _loss_operands(n: int = 256, d: int = 64, v: int = 384):
    k1, k2, k3 = jax.random.split(jax.random.key(7), 3)
    x = jax.random.normal(k1, (n, d), jnp.float32).astype(jnp.bfloat16)
    w = 0.3 * jax.random.normal(k2, (v, d), jnp.float32)
    targets = jax.random.randint(k3, (n,), 0, v)
    return x, w, targets


# A mean over 256 tokens has logit gradients up to 2^-8; scale 2^21 keeps them in e5m2's range
# exactly as the record's 2^29 does for its 2^16-token mean.
SCALE_256 = 2.0**21
CAPPED_CE = functools.partial(loss_lib.capped_cross_entropy, cap=30.0, temperature=7.5)


def _fused_value_and_grad(chunk_tokens, factor: float = 1.0):
    def loss(x, w, targets):
        return factor * fp8.fp8_head_loss(x, w, targets, CAPPED_CE, chunk_tokens, SCALE_256)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def test_fused_loss_is_bitwise_autodiff_through_fp8_head():
    """The fused op computes the same loss, G, Gq and gradient GEMMs as autodiff through
    `fp8_head` under the same loss: bitwise, not merely close."""
    x, w, targets = _loss_operands()

    def unfused(x, w, targets):
        return CAPPED_CE(fp8.fp8_head(x, w, SCALE_256), targets) / x.shape[0]

    want, (want_dx, want_dw) = jax.jit(jax.value_and_grad(unfused, argnums=(0, 1)))(x, w, targets)
    got, (dx, dw) = _fused_value_and_grad(None)(x, w, targets)
    assert dx.dtype == jnp.bfloat16 and dw.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(dx, np.float32), np.asarray(want_dx, np.float32))
    np.testing.assert_array_equal(np.asarray(dw), np.asarray(want_dw))
    # The loss alone (no differentiation) takes the cheaper primal path: same value.
    np.testing.assert_array_equal(np.asarray(jax.jit(fp8.fp8_head_loss, static_argnums=(3, 4, 5))(
        x, w, targets, CAPPED_CE, None, SCALE_256)), np.asarray(want))


@pytest.mark.parametrize("chunk", [64, 100])  # 100 leaves a 56-token remainder of 256
def test_fused_loss_chunks_change_only_fp32_sum_orders(chunk):
    x, w, targets = _loss_operands()
    full, (dx_full, dw_full) = _fused_value_and_grad(None)(x, w, targets)
    part, (dx_part, dw_part) = _fused_value_and_grad(chunk)(x, w, targets)
    np.testing.assert_allclose(float(part), float(full), rtol=1e-6)  # fp32 sums in a different order
    # Each token's Gq and dX row depend on its own row only: dX is bitwise equal.
    np.testing.assert_array_equal(np.asarray(dx_part, np.float32), np.asarray(dx_full, np.float32))
    # dW adds per-chunk fp32 GEMMs: fp32 reassociation of cancelling terms, bounded by the
    # largest entry (1e-5 of it), not by each entry.
    dw_full = np.asarray(dw_full)
    np.testing.assert_allclose(np.asarray(dw_part), dw_full, rtol=1e-5, atol=1e-5 * np.abs(dw_full).max())


def test_fused_loss_applies_the_loss_cotangent():
    x, w, targets = _loss_operands()
    _, (dx, dw) = _fused_value_and_grad(None)(x, w, targets)
    _, (dx2, dw2) = _fused_value_and_grad(None, factor=2.0)(x, w, targets)
    _, (dx3, dw3) = _fused_value_and_grad(None, factor=3.0)(x, w, targets)
    # A power of two commutes with every rounding of G: exact.
    np.testing.assert_array_equal(np.asarray(dx2, np.float32), 2 * np.asarray(dx, np.float32))
    np.testing.assert_array_equal(np.asarray(dw2), 2 * np.asarray(dw))
    # 3 rounds dX to bf16 once more (2^-8 relative); dW is fp32 (1 ulp).
    np.testing.assert_allclose(np.asarray(dx3, np.float32), 3 * np.asarray(dx, np.float32), rtol=2**-8, atol=0)
    np.testing.assert_allclose(np.asarray(dw3), 3 * np.asarray(dw), rtol=2**-23, atol=0)
    assert np.abs(np.asarray(dw)).max() > 0
