"""Newton-Schulz and the Muon transformation (jaxgpt/muon.py), and how they relate to optax's.

References here are independent of the code under test: NS is a polynomial in X X^T times X,
so it acts on singular values alone, NS(G) = U p(S / ||G||_F) V^T with p the 5-fold quintic;
a float64 SVD gives that exactly.
"""

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from optax.contrib import _muon as optax_muon

from jaxgpt.muon import NS_COEFFICIENTS, MuonState, muon, newton_schulz, scale_by_muon, torch_lerp, update_scale

# Compiled once per (shape, dtype): op-by-op eager dispatch is slower than the compile here.
ns_fp32 = jax.jit(lambda g: newton_schulz(g, dtype=jnp.float32))
ns_bf16 = jax.jit(newton_schulz)


def _random(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _ns_reference(g: np.ndarray, steps: int = 5, eps: float = 1e-7) -> np.ndarray:
    """float64 NS through the SVD: the quintic applied to normalised singular values."""
    a, b, c = NS_COEFFICIENTS
    g = g.astype(np.float64)
    u, s, vt = np.linalg.svd(g, full_matrices=False)
    s = s / (np.linalg.norm(g, axis=(-2, -1), keepdims=True)[..., 0] + eps)
    for _ in range(steps):
        s = a * s + b * s**3 + c * s**5
    return (u * s[..., None, :]) @ vt


def _rel(x, ref) -> float:
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


# --- Newton-Schulz ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(48, 48), (32, 96), (96, 32), (3, 40, 40)], ids=["square", "wide", "tall", "batched"])
def test_newton_schulz_fp32_matches_svd_reference(shape):
    g = _random(shape)
    out = ns_fp32(jnp.asarray(g))
    assert out.shape == shape and out.dtype == jnp.float32
    # fp32 matmuls through 5 quintic steps: ~1e-6 per op, amplified by the map's slope (<= 3.44).
    assert _rel(out, _ns_reference(g)) < 1e-4


@pytest.mark.parametrize("shape", [(48, 48), (32, 96), (96, 32), (3, 40, 40)], ids=["square", "wide", "tall", "batched"])
def test_newton_schulz_bf16_close_to_exact_and_bounded(shape):
    g = _random(shape, seed=1)
    out = ns_bf16(jnp.asarray(g))
    assert out.dtype == jnp.bfloat16
    # bf16 (u = 2^-8) roundings amplified ~2x per step over 5 steps: 2-4% measured on random
    # matrices, whose many small singular values sit where the quintic's slope is largest.
    assert _rel(out.astype(jnp.float32), _ns_reference(g)) < 6e-2
    s = np.linalg.svd(np.asarray(out, np.float32), compute_uv=False)
    assert 0.3 < s.min() and s.max() < 1.6  # the record's coefficients leave S' in about [0.5, 1.5]


def test_newton_schulz_batched_is_per_slice_and_tall_is_transposed_wide():
    g = jnp.asarray(_random((3, 32, 32), seed=2))
    ns = ns_bf16
    stacked = ns(g)
    for i in range(3):  # qkv: q, k, v slices are normalised and orthogonalised independently
        np.testing.assert_array_equal(np.asarray(stacked[i], np.float32), np.asarray(ns(g[i]), np.float32))
    tall = jnp.asarray(_random((64, 16), seed=3))
    np.testing.assert_array_equal(np.asarray(ns(tall), np.float32), np.asarray(ns(tall.T).T, np.float32))


def test_newton_schulz_zero_matrix_and_bad_input():
    assert not np.any(np.asarray(ns_bf16(jnp.zeros((8, 8))), np.float32))  # eps keeps 0/0 away
    with pytest.raises(ValueError, match="ndim >= 2"):
        newton_schulz(jnp.ones(4))
    with pytest.raises(ValueError, match="floating-point"):
        newton_schulz(jnp.ones((4, 4), jnp.int32))
    with pytest.raises(ValueError, match="steps"):
        newton_schulz(jnp.ones((4, 4)), steps=-1)


def test_newton_schulz_keeps_fp32_coefficients():
    """One step on a matrix with singular values all 1/sqrt(n): a + b s^2 + c s^4 evaluated with
    -4.775 (fp32), not bf16's -4.78125; the two differ by ~1e-3 relative here."""
    n = 4
    out = np.asarray(newton_schulz(jnp.eye(n), steps=1, dtype=jnp.float32))
    s = 1 / np.sqrt(n)
    a, b, c = NS_COEFFICIENTS
    np.testing.assert_allclose(np.diag(out), a * s + b * s**3 + c * s**5, rtol=1e-6)  # fp32 scalar math


# --- Muon transformation ----------------------------------------------------------------------


def test_torch_lerp_branches():
    a, b = jnp.float32(1.0), jnp.float32(3.0)
    np.testing.assert_allclose(torch_lerp(a, b, 0.25), 1.5)
    np.testing.assert_allclose(torch_lerp(a, b, 0.75), 2.5)
    # Different rounding of the two forms: w = 0.9 uses end - diff*(1-w), which in fp32 differs
    # from start + w*diff for these operands; check we take torch's branch.
    s, e = np.float32(0.1), np.float32(0.7)
    w = np.float32(0.9)
    torch_form = np.float32(e - (e - s) * (np.float32(1) - w))
    assert float(torch_lerp(jnp.float32(s), jnp.float32(e), w)) == float(torch_form)


def _params():
    return {
        "qkv": jnp.asarray(_random((3, 16, 16), seed=10)),
        "fc": jnp.asarray(_random((64, 16), seed=11)),
        "proj": jnp.asarray(_random((16, 64), seed=12)),
    }


def _grads(seed):
    return {k: jnp.asarray(_random(v.shape, seed=seed + i)) for i, (k, v) in enumerate(_params().items())}


def test_scale_by_muon_two_steps_against_numpy_momentum():
    m = 0.9
    tx = scale_by_muon(momentum=m, ns_dtype=jnp.float32)
    state = tx.init(_params())
    assert isinstance(state, MuonState) and int(state.count) == 0
    buffers = {k: np.zeros(v.shape) for k, v in _params().items()}
    for step in range(2):
        grads = _grads(100 * step)
        out, state = jax.jit(tx.update)(grads, state)
        for k, g in grads.items():
            g = np.asarray(g, np.float64)
            buffers[k] = m * buffers[k] + (1 - m) * g  # no bias correction, zeros at first
            nesterov = (1 - m) * g + m * buffers[k]
            expected = update_scale(g.shape) * _ns_reference(nesterov)
            assert out[k].dtype == jnp.float32
            assert _rel(out[k], expected) < 1e-4  # fp32 NS vs float64 SVD (see NS test)
            np.testing.assert_allclose(state.momentum[k], buffers[k], rtol=1e-5, atol=1e-7)  # fp32 lerps
    assert int(state.count) == 2


def test_momentum_schedule_is_read_at_zero_based_step():
    # m = 0 at step 0 makes u = g; m = 1 at step 1 makes B and u the old B (= g0).
    tx = scale_by_muon(momentum=lambda count: jnp.where(count == 0, 0.0, 1.0), ns_dtype=jnp.float32)
    p = {"w": jnp.zeros((8, 8))}
    g0, g1 = {"w": jnp.asarray(_random((8, 8), 20))}, {"w": jnp.asarray(_random((8, 8), 21))}
    state, update = tx.init(p), jax.jit(tx.update)
    out0, state = update(g0, state)
    out1, state = update(g1, state)
    np.testing.assert_allclose(out0["w"], ns_fp32(g0["w"]), rtol=1e-6)
    np.testing.assert_allclose(out1["w"], out0["w"], rtol=1e-6)  # g1 ignored when m = 1


def test_muon_alias_applies_learning_rate_and_update_scale():
    lr = 0.05
    tx = muon(lr, momentum=0.0, ns_dtype=jnp.float32)
    grads = _grads(5)
    out, _ = jax.jit(tx.update)(grads, tx.init(_params()))
    for k, g in grads.items():
        expected = -lr * update_scale(g.shape) * np.asarray(ns_fp32(g))
        np.testing.assert_allclose(out[k], expected, rtol=1e-6, atol=1e-9)  # same fp32 ops, one extra product
    assert update_scale((64, 16)) == 2.0 and update_scale((16, 64)) == 1.0 and update_scale((3, 16, 16)) == 1.0


def test_scale_by_muon_rejects_vectors():
    with pytest.raises(ValueError, match=r"\['bias'\].*optax.partition"):
        scale_by_muon().init({"w": jnp.ones((4, 4)), "bias": jnp.ones(4)})


def test_muon_state_round_trips_through_orbax(tmp_path):
    tx = muon(0.05, momentum=0.9)
    params = _params()
    state = tx.init(params)
    _, state = jax.jit(tx.update)(_grads(1), state)
    with ocp.PyTreeCheckpointer() as ckpt:
        ckpt.save(tmp_path / "state", state)
        restored = ckpt.restore(tmp_path / "state", item=state)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)
    assert jax.tree.structure(restored) == jax.tree.structure(state)


# --- Where the record's Muon and optax.contrib.muon agree (docs/MUON_VS_OPTAX.md) -------------


def test_optax_newton_schulz_equals_ours_with_matched_eps_and_dtype():
    g = _random((40, 72), seed=30)
    ours = ns_fp32(jnp.asarray(g))
    theirs_ns = jax.jit(lambda x: optax_muon.orthogonalize_via_newton_schulz(x, jnp.asarray(NS_COEFFICIENTS), 5, eps=1e-7))
    theirs = theirs_ns(jnp.asarray(g))
    # Same algorithm, both fp32; only the summation order of the norm and matmuls differs.
    np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-6)
    # In bf16 they part: optax rounds the coefficients to bf16 (-4.775 -> -4.78125) and every
    # intermediate to bf16 in its own way. Both stay within the bf16 NS error of the exact map.
    theirs_bf16 = theirs_ns(jnp.asarray(g, jnp.bfloat16))
    # Measured on random inputs: ours 2-4% from the exact map, optax's bf16 3-8%.
    assert _rel(theirs_bf16.astype(jnp.float32), _ns_reference(g)) < 1.2e-1


def test_optax_shape_scale_through_dimension_numbers():
    # The record's matrices are (out, in) = (rows, cols): reduction (fan-in) is the last axis,
    # output the one before; the qkv leaf's first axis is a batch of three matrices.
    dims = optax_muon.MuonDimensionNumbers(reduction_axis=-1, output_axis=-2)
    shapes = [(3, 16, 16), (64, 16), (16, 64), (3, 32, 16)]
    updates = {str(s): jnp.ones(s) for s in shapes}
    tx = optax_muon.scale_by_shape(weight_dimension_numbers={k: dims for k in updates})
    scaled, _ = tx.update(updates, tx.init(updates))
    for s in shapes:
        np.testing.assert_allclose(scaled[str(s)], update_scale(s), rtol=1e-7)  # a product of exact values


@pytest.mark.slow
def test_optax_scale_by_muon_on_qkv_leaf_matches_without_momentum():
    """With beta = 0 optax's bias correction and Nesterov are identities, so on a (3, D, D) leaf
    both transforms return NS(g) per slice; with momentum they differ from the second step."""
    dims = optax_muon.MuonDimensionNumbers(reduction_axis=2, output_axis=1)
    params = {"qkv": jnp.zeros((3, 24, 24))}
    grads = [{"qkv": jnp.asarray(_random((3, 24, 24), seed=40 + i))} for i in range(2)]

    def run(tx):
        state, outs, update = tx.init(params), [], jax.jit(tx.update)
        for g in grads:
            out, state = update(g, state)
            outs.append(np.asarray(out["qkv"], np.float32))
        return outs

    theirs = run(optax_muon.scale_by_muon(beta=0.0, eps=1e-7, weight_dimension_numbers={"qkv": dims}))
    ours = run(scale_by_muon(momentum=0.0, ns_dtype=jnp.float32))
    for t, o in zip(theirs, ours):
        # optax orthogonalises each slice's transpose (reduction axis first); NS(X^T)^T = NS(X)
        # in exact arithmetic, fp32 differences only.
        np.testing.assert_allclose(t, o, rtol=1e-4, atol=1e-5)
    theirs = run(optax_muon.scale_by_muon(beta=0.95, eps=1e-7, weight_dimension_numbers={"qkv": dims}))
    ours = run(scale_by_muon(momentum=0.95, ns_dtype=jnp.float32))
    np.testing.assert_allclose(theirs[0], ours[0], rtol=1e-4, atol=1e-5)  # NS is scale invariant
    assert _rel(theirs[1], ours[1]) > 1e-2  # bias correction reweights g0 vs g1 at step 2


def test_momentum_complement_is_formed_before_rounding():
    """The buffer's lerp weight is torch's fp32(1 - m), not 1 - fp32(m) (they differ for 0.85)."""
    g = {"w": jnp.asarray(_random((8, 8), 50))}
    expected = np.float32(1 - 0.85) * np.asarray(g["w"])  # first step: B = 0 + w (g - 0)
    assert np.float32(1 - 0.85) != np.float32(1) - np.float32(0.85)
    for tx in (
        scale_by_muon(momentum=0.85, ns_dtype=jnp.float32),  # Python float: float64 complement
        scale_by_muon(momentum=lambda c: jnp.float32(0.85), momentum_complement=lambda c: jnp.float32(1 - 0.85), ns_dtype=jnp.float32),
    ):
        _, state = jax.jit(tx.update)(g, tx.init(g))
        np.testing.assert_array_equal(state.momentum["w"], expected)  # one fp32 product on both sides
