"""scripts/compare_checkpoint.py end to end on a tiny record-format checkpoint and shard."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from jaxgpt.data import write_shard
from torch_ref import model as torch_model

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "compare_checkpoint.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("compare_checkpoint", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compare_checkpoint = _load_script()
VOCAB, EOT = 1000, 999


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory) -> tuple[Path, Path]:
    """A 12-layer, 128-wide record checkpoint (bf16 embeddings, `_orig_mod.` keys, perturbed
    weights so that every path matters) and a 400-token shard with a few documents."""
    root = tmp_path_factory.mktemp("compare")
    torch.manual_seed(0)
    gpt = torch_model.GPT(VOCAB, 12, 2, 128, eot_id=EOT)
    with torch.no_grad():
        for name, param in gpt.named_parameters():
            if "embed" not in name:
                scale = 0.5 / math.sqrt(param.shape[-1]) if param.ndim >= 2 else 0.1
                param.add_(torch.randn_like(param) * scale)
    torch_model.cast_embeddings_to_bf16(gpt)
    checkpoint = root / "state.pt"
    torch.save({"model": {f"_orig_mod.{k}": v for k, v in gpt.state_dict().items()}, "step": 0}, checkpoint)
    tokens = np.random.default_rng(0).integers(0, EOT, size=400)
    tokens[[0, 150, 300, 301]] = EOT
    shard = root / "tokens.bin"
    write_shard(shard, tokens)
    return checkpoint, shard


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_end_to_end_json_and_logit_dump(tiny_files, tmp_path):
    checkpoint, shard = tiny_files
    dump = tmp_path / "logits.npz"
    result = _run(str(checkpoint), "--tokens", str(shard), "--window-blocks", "3", "--head-dim", "64",
                  "--eot-id", str(EOT), "--json", "--dump-logits", str(dump))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["seq_len"] == 384  # largest multiple of 128 with T + 1 <= 400
    assert report["model"] == {"vocab_size": 1000, "padded_vocab_size": 1024, "num_layers": 12, "num_heads": 2,
                               "model_dim": 128, "attention_free_layers": [7]}
    # Both run in fp32: the loss agrees to 1e-6 relative and the logits to 1e-5 of their scale
    # (summation order, softmax form and libm cos/sin ulps only).
    assert abs(report["jax_loss"] - report["torch_loss"]) <= 1e-6 * report["torch_loss"]
    assert report["max_abs_logit_diff"] <= 1e-5 * report["max_abs_logit"]
    assert report["max_abs_logit"] > 0.1  # the perturbed head is not silent
    with np.load(dump) as arrays:
        assert arrays["torch"].shape == arrays["jax"].shape == (384, 1024)
        assert arrays["torch"].dtype == np.float32
        diff = np.abs(arrays["torch"] - arrays["jax"]).max()
    assert diff == pytest.approx(report["max_abs_logit_diff"])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--seq-len", "512"], "needs 513 tokens"),
        (["--seq-len", "200"], "not a positive multiple of 128"),
        (["--window-blocks", "-1"], "must be >= 0"),
    ],
)
def test_bad_arguments_fail_with_a_clear_message(tiny_files, extra, message, capsys):
    checkpoint, shard = tiny_files
    args = [str(checkpoint), "--tokens", str(shard), "--head-dim", "64", "--eot-id", str(EOT), "--json"]
    if "--window-blocks" not in extra:
        args += ["--window-blocks", "2"]
    assert compare_checkpoint.main([*args, *extra]) == 1  # in-process: errors come before any model runs
    assert message in capsys.readouterr().err


def test_missing_eot_for_small_vocabulary_is_reported(tiny_files, capsys):
    checkpoint, shard = tiny_files
    assert compare_checkpoint.main([str(checkpoint), "--tokens", str(shard), "--window-blocks", "2",
                                    "--head-dim", "64"]) == 1
    assert "pass eot_id" in capsys.readouterr().err
