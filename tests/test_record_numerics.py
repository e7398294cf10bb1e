"""Checks for RECORD.md section 11 points that no other test pins down directly (see docs/NUMERICS.md).

Tiny fp32 models only: each test runs in a few seconds on two CPU cores.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch
import torch.nn.functional as F
from flax import nnx

from jaxgpt import masks
from jaxgpt import model as M
from jaxgpt.config import ModelConfig, replace
from torch_ref import model as torch_model

# Layer 1 has attention but no value embedding; layer 2 has no attention (RECORD.md layer patterns).
SHALLOW = replace(
    ModelConfig(num_heads=2, model_dim=64, dtype_policy="fp32", attention_backend="dense", max_window_blocks=4,
                vocab_size=2000, eot_id=1999),
    num_layers=4, value_embed_slots=(0, None, None, 0), long_window_layers=(0, 3), attention_free_layers=(2,),
)
SEQ = 256


def _random_model(seed: int) -> M.GPT:
    """A SHALLOW fp32 model whose every parameter is random, so zero-initialised paths carry signal."""
    model = M.GPT(SHALLOW, rngs=nnx.Rngs(seed))
    params = M.param_dict(model)
    keys = jax.random.split(jax.random.key(seed + 1), len(params))
    new = {}
    for key, (name, value) in zip(keys, sorted(params.items())):
        noise = jax.random.normal(key, value.shape, jnp.float32)
        offset = 1.0 if name.endswith("lambdas") or name == "skip_weights" else 0.0
        new[name] = noise * (1.0 if "embed" in name else 0.05) + offset
    M.load_param_dict(model, new)
    return model


def _shifted_tokens(seed: int, eot_id: int, vocab: int, eot_positions=(0, 60, 130, 131)) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) of length SEQ cut from one stream, as the loaders do (targets = inputs shifted by 1)."""
    stream = np.random.default_rng(seed).integers(0, eot_id, size=SEQ + 1).astype(np.int32)
    stream[list(eot_positions)] = eot_id
    return stream[:-1], stream[1:]


# --- 13: document ids come from the inputs -----------------------------------------------------


@pytest.mark.slow  # ~11 s: three compilations of the 4-layer model
def test_jaxgpt_document_mask_comes_from_inputs_not_targets():
    model = _random_model(0)
    inputs, targets = _shifted_tokens(0, SHALLOW.eot_id, SHALLOW.vocab_size)
    # The two candidate masks really differ for this stream (otherwise the test proves nothing).
    assert not np.array_equal(np.asarray(masks.document_ids(jnp.asarray(inputs), SHALLOW.eot_id)),
                              np.asarray(masks.document_ids(jnp.asarray(targets), SHALLOW.eot_id)))
    ids, tgt = jnp.asarray(inputs)[None], jnp.asarray(targets)[None]
    loss = float(nnx.jit(lambda m, x, y: m(x, y, 2))(model, ids, tgt))
    # logits() sees the inputs only: the loss built from it is the loss with input document ids.
    capped = M.soft_cap(nnx.jit(lambda m, x: m.logits(x, 2))(model, ids), 30.0, 7.5)[0]
    from_inputs = float(optax.softmax_cross_entropy_with_integer_labels(capped, tgt[0]).mean())
    capped_t = M.soft_cap(nnx.jit(lambda m, x: m.logits(x, 2))(model, tgt), 30.0, 7.5)[0]
    np.testing.assert_allclose(loss, from_inputs, rtol=1e-6)  # fp32: same ops, sum order may differ
    # Feeding the targets through the trunk gives a clearly different loss (teeth for the check above).
    from_targets = float(optax.softmax_cross_entropy_with_integer_labels(capped_t, tgt[0]).mean())
    assert abs(from_targets - loss) > 1e-3


def _small_torch_gpt(seed: int) -> torch_model.GPT:
    torch.manual_seed(seed)
    gpt = torch_model.GPT(1000, 12, 1, 32, attention="sdpa", fp8_head=False, rotary_max_len=SEQ, eot_id=999)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in gpt.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            param.copy_(noise if "embed" in name else 0.05 * noise + (1.0 if name.endswith("lambdas") else 0.0))
    return gpt


def test_torch_ref_document_mask_comes_from_inputs_not_targets():
    gpt = _small_torch_gpt(0)
    inputs, targets = (torch.from_numpy(a) for a in _shifted_tokens(1, 999, 1000))
    with torch.no_grad():
        loss = gpt(inputs, targets.long(), 2)
        from_inputs = F.cross_entropy(torch_model.soft_cap(gpt.logits(inputs, 2)), targets.long())
        from_targets = F.cross_entropy(torch_model.soft_cap(gpt.logits(targets, 2)), targets.long())
    torch.testing.assert_close(loss, from_inputs, rtol=1e-6, atol=0)  # fp32: identical ops
    assert abs(float(from_targets - loss)) > 1e-3  # the other choice is visibly different


# --- 14: parameters without signal and padded head rows ------------------------------------------


def test_jaxgpt_gradients_of_silent_lambda_and_padded_head_rows():
    model = _random_model(2)
    inputs, targets = _shifted_tokens(2, SHALLOW.eot_id, SHALLOW.vocab_size)
    grads = nnx.jit(lambda m, x, y: nnx.grad(lambda mm: mm(x, y, 2))(m))(
        model, jnp.asarray(inputs)[None], jnp.asarray(targets)[None])
    flat = {M.path_to_name(path): np.asarray(v.get_value()) for path, v in nnx.to_flat_state(grads)}
    # lambdas[1] scales the value embedding; in layer 1 there is none, so its gradient is exactly 0.
    assert flat["blocks.1.attn.lambdas"][1] == 0.0
    assert flat["blocks.1.attn.lambdas"][0] != 0.0
    for layer in (0, 3):  # layers with a value embedding: lambdas[1] does get signal
        assert flat[f"blocks.{layer}.attn.lambdas"][1] != 0.0, layer
    head = flat["lm_head.weight"]
    assert head.shape[0] > SHALLOW.vocab_size  # padded to a multiple of 128
    # Padded classes sit in the softmax, so their rows get p * x != 0 (never exactly 0).
    assert (np.abs(head[SHALLOW.vocab_size:]).sum(axis=1) > 0).all()


# --- 5: rotary tables are fp32 products t * freq ----------------------------------------------------


def test_jaxgpt_rotary_arguments_are_fp32_products_at_large_positions():
    head_dim, max_len = 16, 65536
    cos, sin = M.rotary_tables(head_dim, max_len)
    quarter = head_dim // 4
    freq = (np.float32(1 / 1024) ** np.linspace(0, 1, quarter, dtype=np.float32)).astype(np.float32)
    t = np.arange(max_len - 512, max_len, dtype=np.float32)
    theta32 = t[:, None] * freq  # rounded to fp32, as the record's outer product
    theta64 = t.astype(np.float64)[:, None] * freq.astype(np.float64)
    got_cos, got_sin = cos[max_len - 512:, :quarter], sin[max_len - 512:, :quarter]
    # cos/sin of fp32 arguments ~6.5e4 differ across libms by a few ulp of the result: 1e-5 absolute.
    np.testing.assert_allclose(got_cos, np.cos(theta32.astype(np.float64)), atol=1e-5)
    np.testing.assert_allclose(got_sin, np.sin(theta32.astype(np.float64)), atol=1e-5)
    # A float64 product is off by up to half an fp32 ulp of theta (~2e-3 rad here): far outside 1e-5.
    assert np.abs(got_cos - np.cos(theta64)).max() > 1e-4


# --- 6: attention scale 0.12 in torch_ref ------------------------------------------------------------


def test_torch_ref_attention_uses_scale_0_12():
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 64, 128, generator=generator) for _ in range(3))
    causal = torch.ones(64, 64, dtype=torch.bool).tril()
    got = torch_model._attend(q, k, v, causal).double()
    scores = (q.double() @ k.double().mT) * 0.12
    want = scores.masked_fill(~causal, -math.inf).softmax(-1) @ v.double()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)  # fp32 SDPA vs float64
    default = (q.double() @ k.double().mT) / math.sqrt(128)
    other = default.masked_fill(~causal, -math.inf).softmax(-1) @ v.double()
    assert (got - other).abs().max() > 1e-2  # 1/sqrt(128) would be clearly different
