"""jaxgpt_tools.bench.parity_step (scripts/bench.py's suite parity_step) at a tiny size: its keys, its
ratio, and that both frameworks really ran the same step from the same weights on the same batches."""

from __future__ import annotations

import math

import pytest

from jaxgpt import config as cfg
from jaxgpt_tools.bench.parity_step import ParityConfig, bench_parity_step, layer_patterns


def test_layer_patterns_fit_the_config():
    for layers in (2, 4, 6, 12):
        model = cfg.replace(cfg.ModelConfig(), num_layers=layers, **layer_patterns(layers))  # validated
        assert len(model.value_embed_slots) == layers


@pytest.mark.slow  # ~15-25 s on the shared 2-core machine: jaxgpt's train step compiles
def test_parity_step_tiny():
    config = ParityConfig(num_layers=2, model_dim=64, num_heads=2, vocab_size=512, seq_len=128, sequences=1)
    result = bench_parity_step(config, warmup=1, repeats=2, compiled=False)
    for key in ("jax_step_s", "torch_step_s", "ratio_jax_over_torch"):
        assert result[key] > 0
    assert math.isclose(result["ratio_jax_over_torch"], result["jax_step_s"] / result["torch_step_s"])
    assert len(result["jax_steps_s"]) == len(result["torch_steps_s"]) == 2
    assert result["config"]["num_layers"] == 2 and result["config"]["dtype_policy"] == "record"
    # The first step's loss is computed before any update: same weights and tokens must give the
    # same loss up to the record policy's bf16 activations (2^-8 relative per rounding; a loss of
    # ~ln(512) = 6.2 over 128 tokens stays within 1% between two bf16 implementations).
    jax_loss, torch_loss = result["jax_losses"][0], result["torch_losses"][0]
    assert abs(jax_loss - torch_loss) <= 1e-2 * abs(torch_loss), (jax_loss, torch_loss)
    # Later steps follow the same optimizer from there, so losses keep moving together.
    assert abs(result["jax_losses"][-1] - result["torch_losses"][-1]) <= 2e-2 * abs(torch_loss)
