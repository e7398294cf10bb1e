"""jaxgpt.model's lineage switches: the facts LINEAGE.md states about each, checked directly
(cross-framework agreement is parity_tests/'s)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx

from jaxgpt import config as cfg
from jaxgpt import layers as layers_lib
from jaxgpt import loss as loss_lib
from jaxgpt import model as model_lib
from jaxgpt import params as params_lib
from jaxgpt import presets
from jaxgpt import rotary as rotary_lib


def _bf16(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def test_full_rotary_tables_are_the_records_frequencies():
    cos, sin = rotary_lib.rotary_tables(128, 1024, "full", as_written=False)
    freq = 1.0 / 10000 ** (np.arange(0, 128, 2) / 128)  # 64 frequencies, none zero (LINEAGE.md 3.3)
    theta = np.arange(1024)[:, None] * freq[None, :]
    np.testing.assert_allclose(cos, np.cos(theta), atol=2e-4)  # fp32 angles of up to ~1000 rad: ~1e-4
    np.testing.assert_allclose(sin, np.sin(theta), atol=2e-4)
    assert cos[-1, -1] < 0.995  # even the slowest frequency rotates (none of half-truncation's zeros)


@pytest.mark.parametrize("kind", ["full", "full_bf16_freq", "full_bf16_freq_eager"])
def test_full_rotary_tables_are_rounded_to_bf16_as_written(kind):
    """The records round their full tables to bf16 by hand (#8/#9's .bfloat16(), #15's bf16 buffer),
    in every dtype policy; as_written_roundings=False keeps the fp32 tables (NUMERICS.md)."""
    written, studied = rotary_lib.rotary_tables(128, 4096, kind), rotary_lib.rotary_tables(128, 4096, kind, False)
    for table, fp32 in zip(written, studied, strict=True):
        np.testing.assert_array_equal(table, _bf16(fp32))  # the fp32 table rounded once (exact test)
        assert not np.array_equal(table, fp32)
    half = rotary_lib.rotary_tables(128, 4096, "half_truncated")  # Sub3Min and #18 keep fp32 tables
    assert not np.array_equal(half[0], _bf16(half[0]))


def test_unet_value_embeds_rotary_readings():
    """#15 (LINEAGE.md 5.3): bf16-rounded frequencies; the compiled reading keeps positions exact,
    the eager one rounds them to bf16 (multiples of 256 above 32768)."""
    compiled, _ = rotary_lib.rotary_tables(128, 65536, "full_bf16_freq", False)
    eager, _ = rotary_lib.rotary_tables(128, 65536, "full_bf16_freq_eager", False)
    freq = _bf16((1 / 10000) ** (np.arange(0, 128, 2, dtype=np.float32) / np.float32(128)))
    np.testing.assert_allclose(compiled[40000], np.cos(np.float32(40000) * freq), atol=1e-3)
    assert np.array_equal(eager[40001], eager[40000]) and not np.array_equal(compiled[40001], compiled[40000])
    for t in (12, 300, 40000):  # eager: cos of the bf16 product of the bf16 position and frequency
        np.testing.assert_allclose(eager[t], np.cos(_bf16(_bf16(np.float32(t)) * freq)), atol=1e-6)


def test_rms_norm_eps_as_run_scales_bf16_inputs_only():
    """2^-7 on bf16 inputs: a unit-RMS vector is scaled by 1/sqrt(1 + 2^-7) = 0.99611 (LINEAGE.md 8.2)."""
    x = jnp.ones((4, 768), jnp.float32)
    assert float(layers_lib.norm(x.astype(jnp.bfloat16), "as_run")[0, 0]) == pytest.approx(0.99611, abs=4e-3)
    assert float(layers_lib.norm(x.astype(jnp.bfloat16))[0, 0]) == 1.0
    assert float(layers_lib.norm(x, "as_run")[0, 0]) == pytest.approx(1.0, abs=1e-6)  # fp32 input: 2^-23
    assert layers_lib.norm_eps(jnp.bfloat16, "as_run") == 2.0**-7 and layers_lib.norm_eps(jnp.float32, "as_run") == 2.0**-23


@pytest.mark.parametrize("cap", [30.0, 15.0])
def test_tanh_soft_cap(cap):
    z = jnp.array([-200.0, -3.0, 0.0, 2.5, 200.0], jnp.float32)
    out = loss_lib.soft_cap(z, cap, 7.5, "tanh")
    np.testing.assert_allclose(np.asarray(out), cap * np.tanh(np.asarray(z) / cap), rtol=1e-6)
    zb = z.astype(jnp.bfloat16)
    once, per_op = loss_lib.soft_cap(zb, cap, 7.5, "tanh", "once"), loss_lib.soft_cap(zb, cap, 7.5, "tanh", "per_op")
    assert once.dtype == per_op.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(once), _bf16(cap * np.tanh(np.asarray(zb, np.float32) / cap)))
    np.testing.assert_array_equal(np.asarray(per_op), np.asarray(per_op).astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(np.asarray(loss_lib.soft_cap(z, cap, 7.5, "none")), np.asarray(z))


def test_linear_init_bounds():
    assert layers_lib.init_bound(768, "torch_default") == pytest.approx(0.0360844, abs=1e-7)
    assert layers_lib.init_bound(768) == 0.03125


@pytest.fixture(scope="module")
def small_models():
    def build(name: str, **changes):
        config = cfg.replace(presets.get_preset(name).model, vocab_size=1000, eot_id=999, num_heads=2, model_dim=64,
                             attention_backend="blocked", loss_chunk_tokens=None, max_window_blocks=4, **changes)
        return model_lib.GPT(config, rngs=nnx.Rngs(0))
    return build


def test_dtype_policies_of_the_lineage(small_models):
    unet = small_models("unet-value-embeds")  # bf16 model: bf16 tables and scalars, fp32 bf16-valued weights
    params = params_lib.param_dict(unet)
    assert params["value_embeds.embed.0.weight"].shape == (1024, 6 * 64)
    assert params["blocks.0.lambdas"].dtype == params["skip_weights"].dtype == jnp.bfloat16
    weight = np.asarray(params["blocks.0.attn.q_w"])
    assert weight.dtype == np.float32 and np.array_equal(weight, _bf16(weight)) and np.abs(weight).max() > 0.03
    untie = small_models("untie-embed")  # autocast: fp32 everything stored, fp32 stream, bf16 logits
    params = params_lib.param_dict(untie)
    assert all(value.dtype == jnp.float32 for value in params.values())
    assert not any(name.endswith(("lambdas", "skip_weights", "lamb")) for name in params)
    ids = jnp.asarray(np.random.default_rng(0).integers(0, 999, (1, 256)), jnp.int32)
    hidden, logits = jax.eval_shape(lambda: (untie.hidden(ids, 0), untie.logits(ids, 0)))
    assert hidden.dtype == jnp.float32 and logits.dtype == jnp.bfloat16


def test_value_residual_mixes_layer_zeros_raw_value(small_models):
    """#9: layer 0's lamb multiplies v - v (zero gradient); a later layer's lamb matters."""
    model = small_models("shortcuts", dtype_policy="fp32")
    graph, params = params_lib.ModelGraph.split(model)
    rng = np.random.default_rng(1)
    params = {k: v + 0.05 * rng.standard_normal(v.shape).astype(np.float32) if v.ndim >= 2 else v
              for k, v in params.items()}
    ids = jnp.asarray(rng.integers(0, 999, (1, 256)), jnp.int32)
    grads = jax.jit(jax.grad(lambda p: graph.bind(p)(ids, ids, 0, train=False)))(params)
    assert float(grads["blocks.0.attn.lamb"]) == 0.0
    assert abs(float(grads["blocks.5.attn.lamb"])) > 0.0


def test_the_logged_window_is_the_one_the_attention_takes():
    """The metrics' window (lineage.logged_window): W_long after the kernels' cap; #15's token
    window with the blocks it is attended within; none under #8/#9's plain causal attention."""
    from jaxgpt import lineage

    smoke = presets.get_preset("smoke").model
    assert lineage.logged_window(smoke, 5) == {"window_blocks": 5}
    assert lineage.logged_window(smoke, 11) == {"window_blocks": 8}  # blocked / pallas attend over the cap's 8
    unet = presets.get_preset("unet-value-embeds").model
    assert lineage.logged_window(unet, 192) == {"window_blocks": 2, "window_tokens": 192}
    assert lineage.logged_window(unet, 1792) == {"window_blocks": 14, "window_tokens": 1792}
    assert lineage.logged_window(presets.get_preset("untie-embed").model, 0) == {"window_blocks": 0}
