"""qkv_layout "separate" is the merged model with its (3, D, D) qkv_w held as three (D, D)
weights: same init, logits, gradients and optimizer step (jaxgpt side; torch_ref's twin is
tests/torch_ref/test_model_qkv_layout.py)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxgpt import model as model_lib
from jaxgpt import params as params_lib
from jaxgpt.config import ModelConfig, OptimConfig, fp8_grad_scale_for, replace
from jaxgpt.muon import newton_schulz
from jaxgpt.optim import record_optimizer
from jaxgpt.run import convert
from jaxgpt.testing import small_model_config, synthetic_tokens

SEQ = 256
WINDOW = 2


def _batch():
    tokens = synthetic_tokens(SEQ + 1, seed=3)
    return jnp.asarray(tokens[:-1][None], jnp.int32), jnp.asarray(tokens[1:][None], jnp.int32)


def _models(policy: str, perturb: bool = False):
    # The FP8 head's gradient scale sized for this loss mean (the record's 2^29 overflows e5m2
    # with SEQ tokens); the fp32 policy has no FP8 head and ignores it.
    merged = small_model_config(num_heads=2, dtype_policy=policy, fp8_grad_scale=fp8_grad_scale_for(SEQ))
    separate = replace(merged, qkv_layout="separate")
    models = (model_lib.GPT(merged, rngs=nnx.Rngs(0)), model_lib.GPT(separate, rngs=nnx.Rngs(0)))
    if not perturb:
        return models
    # Noise on every weight: the record's zero-init projections would leave qkv_w's gradient 0.
    params = params_lib.param_dict(models[0])
    keys = jax.random.split(jax.random.key(1), len(params))
    params = {name: value + (0.02 * jax.random.normal(key, value.shape)).astype(value.dtype)
              for key, (name, value) in zip(keys, sorted(params.items()))}
    return (convert.model_from_params(params, merged),
            convert.model_from_params(convert.to_qkv_layout(params, "separate"), separate))


def _assert_same(separate: dict, merged: dict) -> None:
    expected = convert.to_qkv_layout(merged, "separate")
    assert sorted(separate) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(np.asarray(separate[name]), np.asarray(expected[name]), err_msg=name)


def _assert_close(separate: dict, merged: dict, rtol: float, scale_frac: float) -> None:
    """Every array of `separate` within rtol, or within scale_frac of its largest entry, of the
    merged one in the separate layout."""
    expected = convert.to_qkv_layout(merged, "separate")
    assert sorted(separate) == sorted(expected)
    for name in expected:
        want = np.asarray(expected[name], np.float32)
        atol = scale_frac * float(np.abs(want).max()) + 1e-12
        np.testing.assert_allclose(np.asarray(separate[name], np.float32), want, rtol=rtol, atol=atol, err_msg=name)


def _grads(model, x, y):
    """(params, loss, grads) over the {record name: array} params; one compile beats op-by-op dispatch."""
    graph, params = params_lib.ModelGraph.split(model)
    loss, grads = jax.jit(jax.value_and_grad(lambda p: graph.bind(p)(x, y, WINDOW)))(params)
    return params, loss, grads


@functools.cache
def _update_fn(ns_dtype: str, bf16_embeddings: bool):
    """One record-optimizer step's updates from a fresh state, jitted once per setting (shapes reuse it)."""
    optimizer = record_optimizer(OptimConfig(ns_dtype=ns_dtype, bf16_embeddings=bf16_embeddings), total_steps=10)
    return jax.jit(lambda grads, params: optimizer.update(grads, optimizer.init(params), params)[0])


def _update(model, params, grads, ns_dtype: str):
    grads = {name: g.astype(params[name].dtype) for name, g in grads.items()}
    return _update_fn(ns_dtype, model.config.dtype_policy == "record")(grads, params)


def _step(model, x, y, ns_dtype: str = "fp32"):
    """(loss, grads, update of one record-optimizer step). Muon's NS in fp32 by default: in bf16 a
    last-bit gradient difference flips roundings that five NS iterations amplify to several bf16
    ulps; fp32 keeps the layouts' own difference visible."""
    params, loss, grads = _grads(model, x, y)
    return loss, grads, _update(model, params, grads, ns_dtype)


def test_config_rejects_unknown_layout():
    with pytest.raises(ValueError, match="qkv_layout"):
        ModelConfig(qkv_layout="fused")


def test_separate_parameters_are_the_merged_slices():
    merged, separate = _models("fp32")
    names = [n for n in params_lib.param_dict(separate) if ".attn." in n]
    assert "blocks.0.attn.q_w" in names and not any(n.endswith("qkv_w") for n in names)
    assert params_lib.param_dict(separate)["blocks.0.attn.q_w"].shape == (64, 64)
    # Same key, same numbers: the separate init is the merged one, split.
    _assert_same(params_lib.param_dict(separate), params_lib.param_dict(merged))


def test_to_qkv_layout_round_trips_and_names_what_is_missing():
    merged, _ = _models("fp32")
    params = params_lib.param_dict(merged)
    back = convert.to_qkv_layout(convert.to_qkv_layout(params, "separate"), "merged")
    assert sorted(back) == sorted(params)
    for name in params:
        np.testing.assert_array_equal(np.asarray(back[name]), np.asarray(params[name]))
    broken = convert.to_qkv_layout(params, "separate")
    del broken["blocks.0.attn.k_w"]
    with pytest.raises(ValueError, match=r"blocks\.0\.attn.*k_w"):
        convert.to_qkv_layout(broken, "merged")
    with pytest.raises(ValueError, match="qkv_layout"):
        convert.to_qkv_layout(params, "fused")


def test_torch_state_dict_loads_into_either_layout_and_config_reads_the_layout():
    merged, separate = _models("fp32")
    merged_sd = convert.params_to_torch_state_dict(params_lib.param_dict(merged))
    separate_sd = convert.to_qkv_layout(merged_sd, "separate")
    assert convert.model_config_from_state_dict(separate_sd, merged.config).qkv_layout == "separate"
    assert convert.model_config_from_state_dict(merged_sd, separate.config).qkv_layout == "merged"
    loaded = convert.torch_state_dict_to_params(merged_sd, separate.config)
    _assert_same(loaded, params_lib.param_dict(merged))
    rebuilt = convert.model_from_params(separate_sd, merged.config)  # separate weights, merged model
    np.testing.assert_array_equal(
        np.asarray(params_lib.param_dict(rebuilt)["blocks.0.attn.qkv_w"]),
        np.asarray(params_lib.param_dict(merged)["blocks.0.attn.qkv_w"]))


@pytest.mark.slow  # two small-model training steps compiled: ~1 min here
# fp32 here; the record policy (bf16 activations, FP8 head) has its own test below.
@pytest.mark.parametrize("policy", ["fp32"])
def test_merged_and_separate_agree_on_logits_gradients_and_one_step(policy):
    merged, separate = _models(policy, perturb=True)
    x, y = _batch()
    # The forward is bit-identical: each q/k/v output element is the same length-D dot product.
    logits = nnx.jit(lambda model: model.logits(x, WINDOW))  # one compile per layout, not one per op
    np.testing.assert_array_equal(np.asarray(logits(separate)), np.asarray(logits(merged)))
    loss_m, grads_m, step_m = _step(merged, x, y)
    loss_s, grads_s, step_s = _step(separate, x, y)
    assert float(jnp.abs(grads_m["blocks.0.attn.qkv_w"]).max()) > 0
    # The backward sums in another order (XLA fuses dq, dk, dv differently): fp32 rounding,
    # ~1e-7 relative, or one bf16 rounding (2^-8) of the activation gradients under "record".
    rtol = 1e-5 if policy == "fp32" else 1e-2
    assert float(loss_s) == pytest.approx(float(loss_m), rel=1e-6)
    _assert_close(grads_s, grads_m, rtol=rtol, scale_frac=rtol)
    # Adam's first step is lr * g / (|g| + eps), about lr * sign(g): an entry's step carries its
    # gradient's relative error times max|g| / |g|, so entries with |g| <= 1e-3 max|g| (the sign
    # of noise) are left out and the rest agree to 1e-3 (fp32 grads) or 1e-2 (bf16 activations).
    step_m, grads_m = convert.to_qkv_layout(step_m, "separate"), convert.to_qkv_layout(grads_m, "separate")
    for name, grad in grads_m.items():
        keep = jnp.abs(grad) > 1e-3 * jnp.abs(grad).max()
        step_m[name], step_s[name] = (jnp.where(keep, steps[name], 0.0) for steps in (step_m, step_s))
    tol = 1e-3 if policy == "fp32" else 1e-2
    _assert_close(step_s, step_m, rtol=tol, scale_frac=tol)


def _norm(array) -> float:
    return float(np.linalg.norm(np.asarray(array, np.float32)))


@pytest.mark.slow  # three small models' gradients and optimizer steps compiled: ~1 min here
def test_merged_and_separate_agree_under_the_record_policy():
    """bf16 activations, FP8 head, the record's bf16 NS. Elementwise bounds do not fit here: a
    scalar lambda's gradient is a bf16-rounded sum over all T*D products that cancels to a few
    percent of its terms, so two summation orders differ by a few percent of the result (measured
    4%). The reference that isolates the dtype's share instead: the same merged weights under the
    fp32 policy. ||g_record - g_fp32|| is everything bf16 and FP8 rounding do to a gradient; the
    layouts only reorder the sums of dx over q, k, v, so their difference must be a small part
    of it (measured at most 0.15 of it over every tensor; bound 0.5)."""
    merged, separate = _models("record", perturb=True)
    x, y = _batch()
    reference = convert.model_from_params(params_lib.param_dict(merged), replace(merged.config, dtype_policy="fp32"))
    params_m, loss_m, grads_m = _grads(merged, x, y)
    step_m = _update(merged, params_m, grads_m, "bf16")
    loss_s, grads_s, step_s = _step(separate, x, y, ns_dtype="bf16")
    _, _, grads_32 = _grads(reference, x, y)
    # Same forward products in both layouts: the losses may differ by one bf16 rounding (2^-8).
    assert abs(float(loss_s) - float(loss_m)) <= 2.0**-8 * abs(float(loss_m))
    grads_s = convert.to_qkv_layout(grads_s, "merged")
    assert float(jnp.abs(grads_m["blocks.0.attn.qkv_w"]).max()) > 0
    for name in grads_m:
        dtype_error = _norm(grads_m[name] - grads_32[name])
        assert _norm(grads_s[name] - grads_m[name]) <= 0.5 * dtype_error + 1e-12, name
    # One optimizer step. The reference step takes the fp32-policy gradients through the same
    # record optimizer (bf16 NS): Muon's bf16 NS amplifies any gradient difference, the dtype's
    # too, so the layouts' step difference must stay within that step's own dtype error
    # (measured up to 0.55 of it; bound 1.0).
    step_32 = _update(merged, params_m, grads_32, "bf16")
    step_s = convert.to_qkv_layout(step_s, "merged")
    muon = [name for name in step_m if name.startswith("blocks.") and step_m[name].ndim >= 2]
    assert muon
    for name in muon:
        assert _norm(step_s[name] - step_m[name]) <= 1.0 * _norm(step_m[name] - step_32[name]) + 1e-12, name
    # Adam's first step is lr * g / (|g| + eps), lr * sign(g) once |g| >> eps: compare the
    # entries whose gradient sign stands above their own dtype error (|g| > 2 |g_record - g_fp32|)
    # and whose |g| > 1000 eps (below that the step still carries g's relative error: measured
    # 3% on value-embedding rows with |g| ~ 7 eps); there the steps agree to two bf16 roundings.
    eps = OptimConfig().adam_eps
    for name in step_m:
        if name in muon:
            continue
        grad, error = (np.asarray(a, np.float32) for a in (grads_m[name], grads_m[name] - grads_32[name]))
        keep = (np.abs(grad) > 2 * np.abs(error)) & (np.abs(grad) > 1e3 * eps)
        assert keep.any() or name.endswith("lambdas") or name == "skip_weights", name
        want, got = (np.asarray(a, np.float32)[keep] for a in (step_m[name], step_s[name]))
        np.testing.assert_allclose(got, want, rtol=2.0**-7, atol=1e-12, err_msg=name)


def test_batched_newton_schulz_is_per_slice_newton_schulz():
    # Muon on q_w, k_w, v_w orthogonalises each as the batched NS does the merged (3, D, D):
    # bit for bit in the record's bf16.
    stacked = jax.random.normal(jax.random.key(4), (3, 64, 64))
    batched = newton_schulz(stacked, 5)
    for i in range(3):
        np.testing.assert_array_equal(np.asarray(newton_schulz(stacked[i], 5)), np.asarray(batched[i]))


@pytest.mark.slow  # ~12 s on the loaded shared machine (one jit of the 4-layer model + torch's forward)
def test_separate_layout_matches_torch_ref_separate():
    """jaxgpt's and torch_ref's separate-QKV models on the same weights give the same logits
    (the merged layout's cross-framework check lives in parity_tests/test_model_parity.py)."""
    import torch

    from torch_ref.model import GPT as TorchGPT

    config = small_model_config(num_heads=2, qkv_layout="separate")
    # Random weights drawn in numpy (no eager init; any weights do for the same-function check).
    rng = np.random.default_rng(1)
    params = {name: (0.1 * rng.standard_normal(shape.shape)).astype(np.float32)
              for name, shape in params_lib.param_shapes(config).items()}
    separate = convert.model_from_params(params, config)
    torch_gpt = TorchGPT(config.vocab_size, config.num_layers, config.num_heads, config.model_dim, fp8_head=False,
                         eot_id=config.eot_id, value_embed_slots=config.value_embed_slots,
                         long_window_layers=config.long_window_layers,
                         attention_free_layers=config.attention_free_layers, qkv_layout="separate").eval()
    state_dict = convert.params_to_torch_state_dict(params_lib.param_dict(separate))
    assert "blocks.0.attn.q_w" in state_dict and "blocks.0.attn.qkv_w" not in state_dict
    torch_gpt.load_state_dict(state_dict, strict=True)  # same names and layout, no conversion
    x, _ = _batch()
    with torch.inference_mode():
        torch_logits = torch_gpt.logits(torch.from_numpy(np.asarray(x[0])), WINDOW).float().numpy()
    jax_logits = np.asarray(nnx.jit(lambda model, ids: model.logits(ids, WINDOW))(separate, x)[0], np.float32)
    # fp32 end to end: summation order and libm ulps only; parity_tests bound the merged layout's
    # logits by 1e-5 of their scale over 12 layers, and these 4 layers stay within it.
    assert np.abs(jax_logits - torch_logits).max() < 1e-5 * np.abs(torch_logits).max()
