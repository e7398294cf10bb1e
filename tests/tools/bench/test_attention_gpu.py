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
