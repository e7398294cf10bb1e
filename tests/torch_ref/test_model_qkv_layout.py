"""torch_ref's qkv_layout "separate": q_w, k_w, v_w (D, D) are the merged qkv_w's slices, and
the two layouts give the same logits, gradients and one optimizer step (jaxgpt's twin:
tests/test_model_qkv_layout.py)."""

from __future__ import annotations

import pytest
import torch

from torch_ref.config import ModelConfig, OptimConfig
from torch_ref.model import GPT
from torch_ref.muon import zeropower_via_newtonschulz5
from torch_ref.optim import build_optimizers
from torch_ref.run.convert import load_record_state_dict, model_config_from_state_dict, to_qkv_layout

VOCAB, LAYERS, HEADS, DIM, SEQ, WINDOW = 1000, 12, 2, 64, 256, 2


def _gpt(layout: str) -> GPT:
    torch.manual_seed(0)
    return GPT(VOCAB, LAYERS, HEADS, DIM, attention="sdpa", fp8_head=False, rotary_max_len=SEQ,
               eot_id=VOCAB - 1, qkv_layout=layout)


def _pair() -> tuple[GPT, GPT]:
    """(merged, separate) with the same weights, noised so no gradient is zero at init."""
    merged, separate = _gpt("merged"), _gpt("separate")
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in merged.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=generator))
    load_record_state_dict(separate, merged.state_dict())
    return merged, separate


def _assert_same(separate: dict, merged: dict, rtol: float = 0.0, scale_frac: float = 0.0) -> None:
    """Every tensor of `separate` equal (or within rtol, or scale_frac of its largest entry) to
    the merged one in the separate layout."""
    expected = to_qkv_layout(merged, "separate")
    assert sorted(separate) == sorted(expected)
    for name, value in expected.items():
        atol = scale_frac * float(value.abs().max())
        torch.testing.assert_close(separate[name], value, rtol=rtol, atol=atol, msg=name)


def test_separate_init_is_the_merged_init_split():
    merged, separate = _gpt("merged"), _gpt("separate")
    assert separate.blocks[0].attn.q_w.shape == (DIM, DIM)
    assert not hasattr(separate.blocks[0].attn, "qkv_w") and separate.blocks[7].attn is None
    _assert_same(separate.state_dict(), merged.state_dict())


def test_state_dicts_convert_both_ways_and_config_reads_the_layout():
    merged, separate = _pair()
    back = _gpt("merged")
    load_record_state_dict(back, separate.state_dict())
    _assert_same(to_qkv_layout(back.state_dict(), "separate"), merged.state_dict())
    config = model_config_from_state_dict(ModelConfig(), separate.state_dict(), DIM // HEADS)
    assert config.qkv_layout == "separate" and config.attention_free_layers == (7,)
    assert model_config_from_state_dict(ModelConfig(), merged.state_dict(), DIM // HEADS).qkv_layout == "merged"
    partial = to_qkv_layout(merged.state_dict(), "separate")
    del partial["blocks.0.attn.v_w"]
    with pytest.raises(ValueError, match="blocks.0.attn"):
        to_qkv_layout(partial, "merged")
    with pytest.raises(ValueError, match="qkv_layout"):
        ModelConfig(qkv_layout="fused")


def _grads_and_step(model: GPT, tokens: torch.Tensor) -> tuple[dict, dict]:
    loss = model(tokens[:-1], tokens[1:], WINDOW)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    # Muon's NS in fp32: in bf16 a last-bit gradient difference flips roundings that five NS
    # iterations amplify to several bf16 ulps; fp32 keeps the layouts' own difference visible.
    for optimizer in build_optimizers(model, OptimConfig(ns_dtype="fp32")):
        optimizer.step()
    return grads, {name: p.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.slow  # two 12-layer training steps: ~1 min on the shared 2-core machine
def test_merged_and_separate_agree_on_logits_gradients_and_one_step():
    merged, separate = _pair()
    merged_before = {name: p.detach().clone() for name, p in merged.named_parameters()}
    separate_before = {name: p.detach().clone() for name, p in separate.named_parameters()}
    tokens = torch.randint(0, VOCAB - 1, (SEQ + 1,), generator=torch.Generator().manual_seed(2))
    tokens[0] = VOCAB - 1
    with torch.no_grad():
        torch.testing.assert_close(separate.logits(tokens[:-1], WINDOW), merged.logits(tokens[:-1], WINDOW),
                                   rtol=0, atol=0)
    grads_m, stepped_m = _grads_and_step(merged, tokens)
    grads_s, stepped_s = _grads_and_step(separate, tokens)
    assert grads_m["blocks.0.attn.qkv_w"].abs().max() > 0
    # fp32 throughout. The gradient into x sums three (D, D) GEMMs' contributions instead of
    # one (3D, D) GEMM's: another summation order, so fp32 rounding (~1e-7 relative) upstream.
    _assert_same(grads_s, grads_m, rtol=1e-5, scale_frac=1e-5)
    initial_m, initial_s = merged_before, separate_before
    step_m = {name: stepped_m[name] - initial_m[name] for name in initial_m}
    step_s = {name: stepped_s[name] - initial_s[name] for name in initial_s}
    # Adam's first step is lr * g / (|g| + eps), about lr * sign(g): an entry's step carries its
    # gradient's relative error times max|g| / |g|, so entries with |g| <= 1e-3 max|g| (the sign
    # of noise) are left out and the rest agree to 1e-3 (1e-7 grads x 1e3 x NS's growth).
    step_m, grads_m = to_qkv_layout(step_m, "separate"), to_qkv_layout(grads_m, "separate")
    for name, grad in grads_m.items():
        keep = grad.abs() > 1e-3 * grad.abs().max()
        step_m[name], step_s[name] = (torch.where(keep, steps[name], 0.0) for steps in (step_m, step_s))
    _assert_same(step_s, step_m, rtol=1e-3, scale_frac=1e-3)


def test_batched_newton_schulz_is_per_slice_newton_schulz():
    # Muon on q_w, k_w, v_w orthogonalises each as the batched NS does the merged (3, D, D):
    # bit for bit in the record's bf16.
    stacked = torch.randn(3, DIM, DIM, generator=torch.Generator().manual_seed(4))
    batched = zeropower_via_newtonschulz5(stacked, 5)
    for i in range(3):
        torch.testing.assert_close(zeropower_via_newtonschulz5(stacked[i], 5), batched[i], rtol=0, atol=0)
