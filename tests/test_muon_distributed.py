"""Distributed Muon under jax.shard_map on 8 virtual CPU devices (conftest sets the count).

The split transform must give the same numbers as the single-device one, and must actually
split: each device's Newton-Schulz batch holds ceil(n / 8) matrices of a shape group, not n.
"""

import re

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from jaxgpt.config import OptimConfig
from jaxgpt.muon import muon
from jaxgpt.optim import record_optimizer
from jaxgpt.schedules import muon_momentum_schedule

AXIS = "data"
D = 16
WORLD = 8


@pytest.fixture(scope="module")
def mesh():
    if len(jax.devices()) < WORLD:
        pytest.fail(f"needs {WORLD} devices (conftest.py sets 8 virtual CPU devices), found {len(jax.devices())}")
    return Mesh(np.array(jax.devices()[:WORLD]), (AXIS,))


def _hidden_params(seed=0, layers=5, attention_layers=(0, 4)):
    """The record's Muon leaves at width D for `layers` MLPs and a few attention layers.
    Default NS groups: 5 c_fc (4D, D) with 5 mlp c_proj (D, 4D) (10: two rounds over 8
    devices, 6 padding slots), 2 qkv (3, D, D) and 2 attention c_proj (D, D) (one round each)."""
    rng = np.random.default_rng(seed)
    r = lambda *shape: jnp.asarray(rng.standard_normal(shape).astype(np.float32))
    blocks = {}
    for i in range(layers):
        block = {"mlp": {"c_fc": {"weight": r(4 * D, D)}, "c_proj": {"weight": r(D, 4 * D)}}}
        if i in attention_layers:
            block["attn"] = {"qkv_w": r(3, D, D), "c_proj": {"weight": r(D, D)}}
        blocks[str(i)] = block
    return {"blocks": blocks}


def _run(tx, params, grads_seq, mesh=None):
    """Apply `tx` for len(grads_seq) steps, inside shard_map (replicated everything, shard_map's
    default replication check on) if mesh."""

    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    if mesh is not None:
        step = jax.shard_map(step, mesh=mesh, in_specs=(P(), P(), P()), out_specs=(P(), P()))
    step = jax.jit(step)
    state = tx.init(params)
    for grads in grads_seq:
        params, state = step(params, state, grads)
    return params, state


def _grads_seq(params, steps):
    return [
        jax.tree.map(lambda p, s=s: jnp.asarray(np.random.default_rng(100 + s).standard_normal(p.shape).astype(np.float32)), params)
        for s in range(steps)
    ]


def _assert_trees_equal(a, b):
    for (path, x), y in zip(jax.tree_util.tree_flatten_with_path(a)[0], jax.tree.leaves(b)):
        # Bitwise: every NS input is computed by the same elementwise code on every device, and a
        # matrix's NS does not depend on the batch it is stacked in (checked in test_muon.py).
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=jax.tree_util.keystr(path))


@pytest.mark.slow
@pytest.mark.parametrize("collective", ["all_gather", "psum"])
def test_split_muon_equals_single_device_over_three_steps(mesh, collective):
    params = _hidden_params()
    grads = _grads_seq(params, 3)
    momentum = muon_momentum_schedule()
    single = _run(muon(0.05, momentum), params, grads)
    split = _run(muon(0.05, momentum, axis_name=AXIS, collective=collective), params, grads, mesh)
    _assert_trees_equal(single[0], split[0])  # parameters
    _assert_trees_equal(single[1], split[1])  # count and momentum buffers


@pytest.mark.parametrize("collective, expected", [(None, "all-gather"), ("psum", "all-reduce")])
def test_collective_in_compiled_update(mesh, collective, expected):
    """The default exchanges NS results by all-gather (the record's collective), with shard_map's
    replication check on; psum stays available as an all-reduce."""
    params = _hidden_params()
    grads = _grads_seq(params, 1)[0]
    kwargs = {} if collective is None else {"collective": collective}
    tx = muon(0.05, 0.95, axis_name=AXIS, **kwargs)
    update = jax.shard_map(lambda g, s: tx.update(g, s)[0], mesh=mesh, in_specs=(P(), P()), out_specs=P())
    hlo = jax.jit(update).lower(grads, tx.init(params)).compile().as_text()
    other = {"all-gather": "all-reduce", "all-reduce": "all-gather"}[expected]
    # XLA's combiners may merge the 3 NS shape groups' collectives (see _hidden_params) into one.
    assert re.search(rf" {expected}(-start)?\(", hlo), hlo
    assert not re.search(rf" {other}(-start)?\(", hlo), hlo


def _matrices_multiplied(jaxpr) -> int:
    """Sum over matmuls of the number of matrices each multiplies (product of batch dims)."""
    return sum(
        int(np.prod(eqn.outvars[0].aval.shape[:-2], dtype=np.int64))
        for eqn in _all_eqns(jaxpr.jaxpr)
        if eqn.primitive.name == "dot_general"
    )


def test_ns_work_is_split_across_devices(mesh):
    params = _hidden_params()
    grads = _grads_seq(params, 1)[0]
    split_tx, single_tx = muon(0.05, 0.95, axis_name=AXIS), muon(0.05, 0.95)
    state = single_tx.init(params)
    sharded = jax.shard_map(lambda g, s: split_tx.update(g, s)[0], mesh=mesh, in_specs=(P(), P()), out_specs=P())
    per_device = _matrices_multiplied(jax.make_jaxpr(sharded)(grads, state))
    single = _matrices_multiplied(jax.make_jaxpr(lambda g, s: single_tx.update(g, s)[0])(grads, state))
    matmuls_per_ns = 3  # A = X X^T, (cA) A, B X: the loop body appears once in the jaxpr
    # Single device: 5 + 5 MLP matrices, 2 qkv x 3 slices, 2 attention c_proj.
    assert single == matmuls_per_ns * (5 + 5 + 2 * 3 + 2)
    # Per device: c_fc (4D, D) is orthogonalised as its transpose, so it shares a group with
    # mlp c_proj (D, 4D): ceil(10/8) = 2; then ceil(2/8) = 1 qkv (3 slices) and 1 c_proj.
    assert per_device == matmuls_per_ns * (2 + 3 + 1)


def _all_eqns(jaxpr):
    """Every equation of a jaxpr and of the jaxprs nested in it (shard_map, pjit bodies)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            yield from _all_eqns(sub)


@pytest.mark.parametrize("collective, expected", [("all_gather", "all-gather"), ("psum", "all-reduce")])
def test_record_optimizer_passes_its_muon_collective(mesh, collective, expected):
    """record_optimizer(muon_collective=...) (what train.make_optimizer and gpu_plan's
    --muon-collective use) reaches Muon: the compiled update holds that collective only."""
    params = _hidden_params(layers=1, attention_layers=())
    tx = record_optimizer(OptimConfig(), total_steps=3, axis_name=AXIS, muon_collective=collective)
    update = jax.shard_map(lambda g, s, p: tx.update(g, s, p)[0], mesh=mesh, in_specs=(P(), P(), P()), out_specs=P())
    hlo = jax.jit(update).lower(params, tx.init(params), params).compile().as_text()
    other = {"all-gather": "all-reduce", "all-reduce": "all-gather"}[expected]
    assert re.search(rf" {expected}(-start)?\(", hlo), hlo
    assert not re.search(rf" {other}(-start)?\(", hlo), hlo
    with pytest.raises(ValueError, match="collective must be 'psum' or 'all_gather'"):
        record_optimizer(OptimConfig(), total_steps=3, axis_name=AXIS, muon_collective="ring")


@pytest.mark.slow
def test_record_optimizer_split_equals_single_device(mesh):
    """The whole optimizer (Muon + three Adam groups), 3 steps, bf16 NS as the record."""
    rng = np.random.default_rng(3)
    r = lambda *shape: jnp.asarray(rng.standard_normal(shape).astype(np.float32) * 0.1)
    params = _hidden_params(seed=1, layers=2, attention_layers=(0,))
    params.update({"embed": {"weight": r(40, D)}, "lm_head": {"weight": r(48, D)}, "skip_weights": r(1)})
    params["blocks"]["0"]["lambdas"] = r(2)
    grads = _grads_seq(params, 3)
    config = OptimConfig()
    single = _run(record_optimizer(config, total_steps=3), params, grads)
    split = _run(record_optimizer(config, total_steps=3, axis_name=AXIS), params, grads, mesh)
    _assert_trees_equal(single[0], split[0])
    _assert_trees_equal(single[1], split[1])
