"""jaxgpt_tools.bench.attention_gpu (scripts/bench.py's suite attention_gpu): refused without a GPU,
and the token layout and block counts its TFLOP/s rest on."""

from __future__ import annotations

import pytest

from jaxgpt_tools.bench.attention_gpu import document_tokens, listed_blocks


def test_attention_gpu_suite_refuses_without_a_gpu_and_counts_listed_blocks(capsys):
    from scripts import bench as command

    with pytest.raises(SystemExit) as exited:  # a usage error, before any suite spends its minutes
        command.main(["--only", "attention_gpu", "--json"])
    assert exited.value.code == 2 and "error: the attention_gpu suite needs a CUDA GPU" in capsys.readouterr().err
    tokens = document_tokens(4096, 300)
    assert tokens[0] == 50256 and 5 < (tokens == 50256).sum() < 40
    counts = [listed_blocks(tokens, window) for window in (1, 2, 4, 14)]
    # Window 1: each query block lists only its own (diagonal) block; wider windows list more,
    # never more than window x query blocks, and documents cut the widest window short.
    assert counts[0] == 4096 // 128
    assert counts == sorted(counts) and all(c <= w * 32 for c, w in zip(counts, (1, 2, 4, 14)))
    assert counts[-1] < 14 * 32


def test_the_cudnn_baseline_attends_a_causal_token_window_of_window_blocks():
    """The call the cuDNN row times, run by XLA on the CPU (same arguments, same mask): each query
    attends itself and the window x 128 - 1 keys before it, across documents (the mask it computes,
    as the suite's docstring says), and nothing else."""
    import jax.numpy as jnp
    import numpy as np

    from jaxgpt_tools.bench.attention_gpu import sliding_window_attention

    seq, window = 384, 2  # 3 blocks: the first window edge falls inside the sequence
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, seq, 1, 8)).astype(np.float32) for _ in range(3))
    out = np.asarray(sliding_window_attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), window, "xla"))
    positions = np.arange(seq)
    allowed = (positions[None, :] <= positions[:, None]) & (positions[:, None] - positions[None, :] < window * 128)
    scores = np.where(allowed, q[0, :, 0] @ k[0, :, 0].T / np.sqrt(8), -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    expected = (weights / weights.sum(axis=1, keepdims=True)) @ v[0, :, 0]
    np.testing.assert_allclose(out[0, :, 0], expected, rtol=1e-5, atol=1e-5)  # fp32: ~1e-6 from summation order


def test_rows_put_every_implementation_on_one_flop_count_and_name_the_peak():
    from jaxgpt_tools.bench.attention_gpu import peak_bf16_tflops, rows

    tokens = document_tokens(4096, 300)
    timings = {"pallas": {4: {"fwd_ms": 2.0, "fwd_bwd_ms": 6.0}}, "cudnn": {4: {"fwd_ms": 1.0, "fwd_bwd_ms": 4.0}},
               "flex": {"error": "RuntimeError: no GPU"}}
    (row,) = rows(tokens, [4], timings)
    flops = 4 * 128 * 128 * 128 * 6 * listed_blocks(tokens, 4)
    assert row["pallas_fwd_tflops"] == round(flops / 2.0 / 1e9, 1) and row["cudnn_fwd_tflops"] == round(flops / 1e9, 1)
    assert row["pallas_over_cudnn_fwd_bwd"] == 1.5 and "pallas_over_flex_fwd_bwd" not in row
    assert peak_bf16_tflops("NVIDIA H200") == peak_bf16_tflops("NVIDIA H100 80GB HBM3") == 989.4
    assert peak_bf16_tflops("NVIDIA H100 PCIe") == 756.0 and peak_bf16_tflops("NVIDIA A100-SXM4-80GB") is None
