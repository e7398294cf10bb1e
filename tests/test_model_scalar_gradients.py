"""jaxgpt.layers.scale_by_scalar: the record's scalar mixing weights times a tensor, whose forward and
x-gradient are autodiff's and whose scalar gradient is torch autograd's (bf16 products summed in
fp32, rounded once), under jit, remat, vmap and shard_map."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgpt.layers import scale_by_scalar

SHAPE = (4, 256, 64)  # (B, T, D): 65,536 products, enough for a bf16 accumulator to drift


def plain(scalar, x):
    """What the model wrote before: autodiff of the rounded scalar times x."""
    return scalar.astype(x.dtype) * x


def operands(dtype=jnp.bfloat16, seed=0):
    kx, kg = jax.random.split(jax.random.key(seed))
    return (jax.random.normal(kx, SHAPE).astype(dtype), jax.random.normal(kg, SHAPE).astype(dtype))


def grads(fn, lam, x, g):
    return jax.vjp(fn, lam, x)[1](g)


def bf16_products(x, g) -> np.ndarray:
    """Each g x rounded to bf16 (one torch bf16 multiply per element), as float64."""
    exact = np.asarray(g, np.float64) * np.asarray(x, np.float64)
    return exact.astype(ml_dtypes.bfloat16).astype(np.float64).ravel()


def bf16_ulp(value: float) -> float:
    return 2.0 ** (np.floor(np.log2(abs(value))) - 7)


@pytest.mark.parametrize("scalar_dtype", [jnp.float32, jnp.bfloat16])
def test_forward_and_x_gradient_are_autodiffs_bitwise(scalar_dtype):
    x, g = operands()
    lam = jnp.array([0.7, -1.3], scalar_dtype)
    new_out, new_vjp = jax.jit(lambda s, v: jax.vjp(lambda s, v: scale_by_scalar(s[1], v), s, v))(lam, x)
    old_out, old_vjp = jax.vjp(lambda s, v: plain(s[1], v), lam, x)
    assert new_out.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(new_out, np.float32), np.asarray(old_out, np.float32))
    np.testing.assert_array_equal(np.asarray(new_vjp(g)[1], np.float32), np.asarray(old_vjp(g)[1], np.float32))


@pytest.mark.parametrize("scalar_dtype", [jnp.float32, jnp.bfloat16])
def test_scalar_gradient_is_bf16_products_summed_in_fp32_and_rounded_once(scalar_dtype):
    x, g = operands()
    lam = jnp.array([0.7, -1.3], scalar_dtype)
    grad_lam = jax.jit(lambda s, v, c: grads(lambda s, v: scale_by_scalar(s[0], v), s, v, c)[0])(lam, x, g)
    assert grad_lam.dtype == scalar_dtype and float(grad_lam[1]) == 0.0  # lam[1] unused: an exact zero
    products = bf16_products(x, g)
    reference = float(np.float64(np.sum(products)).astype(ml_dtypes.bfloat16))  # the fp32 sum, rounded once
    # bf16 sequential accumulation: what XLA's CPU makes of a bf16 reduce
    bf16_accumulated = float(np.cumsum(products.astype(ml_dtypes.bfloat16))[-1])
    ulp = bf16_ulp(reference)
    # fp32 against float64 summation order can move the one bf16 rounding by at most one ulp
    assert abs(float(grad_lam[0]) - reference) <= ulp, (float(grad_lam[0]), reference)
    # the case matters: a bf16 accumulator lands many ulps away
    assert abs(bf16_accumulated - reference) > 4 * ulp, (bf16_accumulated, reference)
    old = float(grads(lambda s, v: plain(s[0], v), lam, x, g)[0][0])
    assert abs(old - reference) > 4 * ulp, (old, reference)  # autodiff's bf16 reduce, before the fix


def test_fp32_scalar_gradient_equals_autodiff():
    x, g = operands(jnp.float32)
    lam = jnp.array([0.7, -1.3], jnp.float32)
    new = grads(lambda s, v: scale_by_scalar(s[0], v), lam, x, g)
    old = grads(lambda s, v: plain(s[0], v), lam, x, g)
    np.testing.assert_array_equal(np.asarray(new[1]), np.asarray(old[1]))
    scale = float(jnp.sum(jnp.abs(g * x)))
    # both one fp32 sum of the same fp32 products, in orders XLA picks: fp32 noise of the |terms|' sum
    assert abs(float(new[0][0]) - float(old[0][0])) <= 1e-5 * scale


def test_rejects_a_scalar_with_a_shape():
    x, _ = operands()
    with pytest.raises(ValueError, match="0-dim"):
        scale_by_scalar(jnp.ones((1,), jnp.float32), x)


def loss_of(fn):
    return lambda lam, x, g: jnp.sum((fn(lam, x) * g).astype(jnp.float32))


def test_the_same_gradient_under_remat():
    x, g = operands()
    lam = jnp.array([0.7, -1.3], jnp.float32)
    direct = jax.grad(loss_of(lambda s, v: scale_by_scalar(s[0], v)), argnums=(0, 1))(lam, x, g)
    remat = jax.jit(jax.grad(loss_of(jax.checkpoint(lambda s, v: scale_by_scalar(s[0], v))), argnums=(0, 1)))(
        lam, x, g)

    class Mix(nnx.Module):
        def __init__(self):
            self.lambdas = nnx.Param(lam)

        def __call__(self, v):
            return scale_by_scalar(self.lambdas[...][0], v)

    def module_loss(module, v, c):
        return jnp.sum((nnx.remat(lambda m, v: m(v))(module, v) * c).astype(jnp.float32))

    module_grad = nnx.grad(module_loss)(Mix(), x, g)
    for found in (remat[0], module_grad["lambdas"][...]):
        np.testing.assert_array_equal(np.asarray(found), np.asarray(direct[0]))
    np.testing.assert_array_equal(np.asarray(remat[1], np.float32), np.asarray(direct[1], np.float32))


def test_vmap_over_scalars_and_tensors_is_each_examples_gradient():
    x, g = operands()
    lams = jnp.array([[0.7, -1.3], [2.0, 0.5]], jnp.float32)
    xs, gs = x.reshape(2, 2, *SHAPE[1:]), g.reshape(2, 2, *SHAPE[1:])
    batched = jax.vjp(jax.vmap(lambda s, v: scale_by_scalar(s[0], v)), lams, xs)[1](gs)[0]
    for i in range(2):
        alone = grads(lambda s, v: scale_by_scalar(s[0], v), lams[i], xs[i], gs[i])[0]
        np.testing.assert_array_equal(np.asarray(batched[i]), np.asarray(alone))


def test_shard_map_gradient_of_a_replicated_scalar_sums_the_devices():
    """A replicated scalar times a batch split over two devices: the gradient is each device's
    (rounded once to bf16, as each rank's) summed over devices, the scalar's type unchanged."""
    x, g = operands()
    lam = jnp.array([0.7, -1.3], jnp.float32)
    mesh = jax.make_mesh((2,), ("data",), devices=jax.devices()[:2])
    split = NamedSharding(mesh, P("data"))
    loss = loss_of(lambda s, v: scale_by_scalar(s[0], v))
    step = jax.jit(jax.shard_map(lambda s, v, c: jax.grad(loss)(s, v, c), mesh=mesh,
                                 in_specs=(P(), P("data"), P("data")), out_specs=P()))
    found = step(lam, jax.device_put(x, split), jax.device_put(g, split))
    halves = [grads(lambda s, v: scale_by_scalar(s[0], v), lam, x[i:i + 2], g[i:i + 2])[0] for i in (0, 2)]
    np.testing.assert_array_equal(np.asarray(found), np.asarray(halves[0] + halves[1]))
