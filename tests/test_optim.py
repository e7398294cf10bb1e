"""Parameter groups and the record's full optimizer (jaxgpt/optim.py); the schedules are in test_schedules.py.

The Adam reference below is written from RECORD.md 6 in float64 numpy (torch's formula:
p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)), not from optax.
"""

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest
from flax import nnx

from jaxgpt.config import OptimConfig
from jaxgpt.muon import newton_schulz, update_scale
from jaxgpt.optim import dotted_name, param_group, param_labels, record_optimizer
from jaxgpt.schedules import lr_multiplier


@pytest.mark.parametrize(
    "name, ndim, group",
    [
        ("blocks.3.attn.qkv_w", 3, "muon"),
        ("blocks.3.attn.c_proj.weight", 2, "muon"),
        ("blocks.7.mlp.c_fc.weight", 2, "muon"),
        ("blocks.3.attn.lambdas", 1, "scalar"),
        ("blocks.3.lambdas", 1, "scalar"),
        ("skip_weights", 1, "scalar"),
        ("embed.weight", 2, "embed"),
        ("value_embeds.embed.2.weight", 2, "embed"),
        ("lm_head.weight", 2, "head"),
    ],
)
def test_param_group(name, ndim, group):
    assert param_group(name, ndim) == group


def test_param_group_unknown_matrix_is_an_error():
    with pytest.raises(ValueError, match="'decoder.weight'"):
        param_group("decoder.weight", 2)


def test_labels_from_nested_dicts_and_nnx_state():
    class Linear(nnx.Module):
        def __init__(self):
            self.weight = nnx.Param(jnp.zeros((4, 4)))

    class Model(nnx.Module):
        def __init__(self):
            self.blocks = nnx.List([Linear()])
            self.lm_head = Linear()
            self.skip_weights = nnx.Param(jnp.ones(2))

    state = nnx.state(Model(), nnx.Param)
    names = [dotted_name(path) for path, _ in jax.tree_util.tree_flatten_with_path(state)[0]]
    assert names == ["blocks.0.weight", "lm_head.weight", "skip_weights"]
    assert jax.tree.leaves(param_labels(state)) == ["muon", "head", "scalar"]
    tree = {"blocks": [{"weight": jnp.zeros((4, 4))}], "skip_weights": jnp.ones(2)}
    assert jax.tree.leaves(param_labels(tree)) == ["muon", "scalar"]


# --- the full optimizer -----------------------------------------------------------------------

D, V = 16, 40


def _tiny_record_params(seed=0, embed_dtype=jnp.float32):
    """The record's parameter structure at width D: 2 blocks, the second without attention."""
    rng = np.random.default_rng(seed)
    r = lambda *shape: jnp.asarray(rng.standard_normal(shape).astype(np.float32) * 0.1)
    return {
        "embed": {"weight": r(V, D).astype(embed_dtype)},
        "value_embeds": {"embed": {"0": {"weight": r(V, D).astype(embed_dtype)}}},
        "blocks": {
            "0": {
                "attn": {"qkv_w": r(3, D, D), "lambdas": r(2), "c_proj": {"weight": r(D, D)}},
                "mlp": {"c_fc": {"weight": r(4 * D, D)}, "c_proj": {"weight": r(D, 4 * D)}},
                "lambdas": r(2),
            },
            "1": {"mlp": {"c_fc": {"weight": r(4 * D, D)}, "c_proj": {"weight": r(D, 4 * D)}}, "lambdas": r(2)},
        },
        "skip_weights": r(1),
        "lm_head": {"weight": r(V + 8, D)},
    }


def _grads(params, seed):
    rng = np.random.default_rng(1000 + seed)
    return jax.tree.map(lambda p: jnp.asarray(rng.standard_normal(p.shape).astype(np.float32)).astype(p.dtype), params)


ADAM_LR = {"head": 0.008, "embed": 0.6, "scalar": 0.04}


def _adam_reference(p, grads, lr, steps_total, b1=0.8, b2=0.95, eps=1e-10):
    """RECORD.md 6 in float64, with the LR multiplier of RECORD.md 7 at the 0-based step."""
    p = np.asarray(p, np.float64)
    m, v = np.zeros_like(p), np.zeros_like(p)
    for step, g in enumerate(grads):
        g = np.asarray(g, np.float64)
        k = step + 1
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        bc1, bc2 = 1 - b1**k, 1 - b2**k
        lr_now = lr * lr_multiplier(step, steps_total)
        p = p - (lr_now / bc1) * m / (np.sqrt(v) / math.sqrt(bc2) + eps)
    return p


@pytest.mark.slow
@pytest.mark.parametrize("num_steps", [1, 10])
def test_record_optimizer_adam_groups_match_torch_formula(num_steps):
    params = _tiny_record_params()
    tx = record_optimizer(OptimConfig(), total_steps=num_steps)
    state, update = tx.init(params), jax.jit(tx.update)
    grads_seq = [_grads(params, s) for s in range(num_steps)]
    current = params
    for grads in grads_seq:
        updates, state = update(grads, state, current)
        current = optax.apply_updates(current, updates)
    flat_params = jax.tree_util.tree_flatten_with_path(params)[0]
    flat_current = jax.tree.leaves(current)
    flat_grads = [jax.tree.leaves(g) for g in grads_seq]
    for i, ((path, p0), p1) in enumerate(zip(flat_params, flat_current)):
        group = param_group(dotted_name(path), p0.ndim)
        if group == "muon":
            continue
        expected = _adam_reference(p0, [g[i] for g in flat_grads], ADAM_LR[group], num_steps)
        # fp32 Adam vs float64: ~1e-6 relative on the change (optax's sqrt(v / bc2) vs torch's
        # sqrt(v) / sqrt(bc2) is the same algebra), plus the fp32 rounding of the stored
        # parameter (one ulp). Scaled to the change, not the parameter, so the check has teeth.
        change = np.abs(expected - np.asarray(p0, np.float64)).max()
        ulp = np.spacing(np.abs(expected).astype(np.float32).max())
        np.testing.assert_allclose(p1, expected, rtol=0, atol=1e-6 * change + ulp, err_msg=dotted_name(path))


@pytest.mark.slow
def test_record_optimizer_muon_group_first_step():
    params = _tiny_record_params()
    config = OptimConfig(ns_dtype="fp32")
    tx = record_optimizer(config, total_steps=20)
    grads = _grads(params, 0)
    updates, _ = jax.jit(tx.update)(grads, tx.init(params), params)
    qkv_grad = grads["blocks"]["0"]["attn"]["qkv_w"]
    m = 0.85  # momentum at step 0; u = (1-m) g + m (1-m) g is a multiple of g, NS ignores the scale
    u = ((1 - m) + m * (1 - m)) * qkv_grad
    expected = -0.05 * np.asarray(newton_schulz(u, dtype=jnp.float32))
    # fp32 NS of inputs equal up to fp32 rounding: errors ~1e-6 of the largest entry.
    np.testing.assert_allclose(updates["blocks"]["0"]["attn"]["qkv_w"], expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    fc_grad = grads["blocks"]["1"]["mlp"]["c_fc"]["weight"]
    expected = -0.05 * update_scale(fc_grad.shape) * np.asarray(newton_schulz(fc_grad, dtype=jnp.float32))
    # Same fp32 NS bound; the shape scale 2 would break it by 100%.
    np.testing.assert_allclose(updates["blocks"]["1"]["mlp"]["c_fc"]["weight"], expected, rtol=0, atol=1e-5 * np.abs(expected).max())


@pytest.mark.slow
def test_record_optimizer_bf16_embeddings_store_bf16_and_round_params():
    params = _tiny_record_params(embed_dtype=jnp.bfloat16)
    tx = record_optimizer(OptimConfig(), total_steps=10, bf16_embeddings=True)
    state, update = tx.init(params), jax.jit(tx.update)
    current = params
    bf16 = ml_dtypes.bfloat16
    p_ref = np.asarray(params["embed"]["weight"]).astype(np.float32)
    m_ref = np.zeros_like(p_ref, dtype=bf16)
    v_ref = np.zeros_like(p_ref, dtype=bf16)
    for step in range(3):
        grads = _grads(params, step)
        updates, state = update(grads, state, current)
        current = optax.apply_updates(current, updates)
        # The record's fused kernel: load bf16 state, fp32 math, store bf16 state and param.
        g = np.asarray(grads["embed"]["weight"]).astype(np.float32)
        m32 = 0.8 * m_ref.astype(np.float32) + 0.2 * g
        v32 = 0.95 * v_ref.astype(np.float32) + 0.05 * g * g
        k = step + 1
        step_size = 0.6 * lr_multiplier(step, 10)
        p_ref = p_ref - (step_size / (1 - 0.8**k)) * m32 / (np.sqrt(v32) / math.sqrt(1 - 0.95**k) + 1e-10)
        p_ref = p_ref.astype(bf16).astype(np.float32)
        m_ref, v_ref = m32.astype(bf16), v32.astype(bf16)
    assert current["embed"]["weight"].dtype == jnp.bfloat16
    moments = [leaf for leaf in jax.tree.leaves(state) if leaf.dtype == jnp.bfloat16]
    assert len(moments) == 4  # mu and nu of the two tables
    # Same fp32 math in a different order; a 1-ulp fp32 difference can flip a bf16 rounding,
    # so allow 1 bf16 ulp (2^-8 relative) on a few elements.
    got = np.asarray(current["embed"]["weight"]).astype(np.float32)
    np.testing.assert_allclose(got, p_ref, rtol=2**-7, atol=0)
    assert np.mean(got == p_ref) > 0.99


def test_record_optimizer_works_on_nnx_state():
    class Linear(nnx.Module):
        def __init__(self, rows, cols):
            self.weight = nnx.Param(jnp.full((rows, cols), 0.1))

    class Model(nnx.Module):
        def __init__(self):
            self.embed = Linear(V, D)
            self.blocks = nnx.List([nnx.Dict(mlp=nnx.Dict(c_fc=Linear(4 * D, D)), lambdas=nnx.Param(jnp.ones(2)))])
            self.lm_head = Linear(V, D)

    model = Model()
    params = nnx.state(model, nnx.Param)
    tx = record_optimizer(OptimConfig(), total_steps=5)
    grads = jax.tree.map(lambda p: jnp.full(p.shape, 0.01), params)
    updates, _ = jax.jit(tx.update)(grads, tx.init(params), params)
    nnx.update(model, optax.apply_updates(params, updates))
    # Adam's first step moves every element by lr (m_hat / sqrt(v_hat) = 1); Muon's does not.
    np.testing.assert_allclose(model.lm_head.weight[...], 0.1 - 0.008, rtol=1e-6)  # one fp32 Adam step
    np.testing.assert_allclose(model.blocks[0]["lambdas"][...], 1 - 0.04, rtol=1e-6)  # one fp32 Adam step
    assert not np.allclose(model.blocks[0]["mlp"]["c_fc"].weight[...], 0.1 - 0.05)
