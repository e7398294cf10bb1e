"""jaxgpt_tools.parity.compare_checkpoint and its command scripts/compare_checkpoint.py, end to end on a tiny
record-format checkpoint and shard."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from jaxgpt.data import write_shard
from jaxgpt_tools.parity import compare_checkpoint
from scripts import compare_checkpoint as command
from torch_ref import model as torch_model
from torch_ref.run import convert as torch_convert

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "compare_checkpoint.py"
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
    assert command.main([*args, *extra]) == 1  # in-process: errors come before any model runs
    assert message in capsys.readouterr().err


def test_missing_eot_for_small_vocabulary_is_reported(tiny_files, capsys):
    checkpoint, shard = tiny_files
    assert command.main([str(checkpoint), "--tokens", str(shard), "--window-blocks", "2",
                                    "--head-dim", "64"]) == 1
    assert "pass eot_id" in capsys.readouterr().err


def _shapes_only(width: int) -> dict:
    return {"embed.weight": torch.empty(VOCAB, width)}


@pytest.mark.parametrize(
    "payload_config, width, requested, expected",
    [
        (None, 128, 32, (32, "--head-dim")),
        (None, 128, None, (64, "the tiny preset (width 128)")),
        (None, 768, None, (128, "the record preset (width 768)")),
        ({"model": {"model_dim": 256, "num_heads": 4}}, 256, None, (64, "the checkpoint's saved config")),
    ],
)
def test_head_dim_comes_from_the_flag_the_saved_config_or_the_preset_of_that_width(payload_config, width, requested, expected):
    payload = {} if payload_config is None else {"config": payload_config}
    assert compare_checkpoint.choose_head_dim(_shapes_only(width), payload, requested) == expected


def test_head_count_of_an_unknown_width_is_refused_not_guessed():
    with pytest.raises(ValueError, match="how many heads a 256-wide model has.*pass --head-dim"):
        compare_checkpoint.choose_head_dim(_shapes_only(256), {}, None)


def test_mismatched_keys_are_each_named(tiny_files, tmp_path, capsys):
    checkpoint, shard = tiny_files
    state = torch.load(checkpoint, weights_only=True)["model"]
    state["_orig_mod.blocks.0.extra"] = torch.zeros(3)
    del state["_orig_mod.blocks.3.mlp.c_fc.weight"]
    broken = tmp_path / "broken.pt"
    torch.save({"model": state}, broken)
    assert command.main([str(broken), "--tokens", str(shard), "--window-blocks", "2", "--eot-id", str(EOT)]) == 1
    err = capsys.readouterr().err
    assert "blocks.0.extra" in err and "blocks.3.mlp.c_fc.weight" in err


@pytest.mark.slow
def test_val_tokens_is_the_record_mean_of_sequence_losses_in_both_frameworks(tiny_files):
    """--val-tokens 256 with T 128: two sequences at tokens 0 and 128; fp32 and bf16 policies."""
    checkpoint, shard = tiny_files
    request = dict(window_blocks=1, eot_id=EOT, val_tokens=256, seq_len=128)
    fp32 = compare_checkpoint.compare(checkpoint, shard, **request)
    assert fp32["head_dim_from"] == "the tiny preset (width 128)" and fp32["model"]["num_heads"] == 2
    from jaxgpt.data import read_shard

    tokens = np.asarray(read_shard(shard), dtype=np.int32)
    gpt = torch_model.GPT(VOCAB, 12, 2, 128, eot_id=EOT)
    torch_convert.load_record_state_dict(gpt, torch.load(checkpoint, weights_only=True)["model"])
    gpt.eval()
    with torch.inference_mode():
        by_hand = np.mean([float(gpt(torch.from_numpy(tokens[s : s + 128]), torch.from_numpy(tokens[s + 1 : s + 129]).long(), 1))
                           for s in (0, 128)])
    assert fp32["torch_val_loss"] == pytest.approx(by_hand, rel=1e-6)  # same fp32 model, same tokens
    assert abs(fp32["jax_val_loss"] - fp32["torch_val_loss"]) <= 1e-5 * fp32["torch_val_loss"]  # fp32 parity
    bf16 = compare_checkpoint.compare(checkpoint, shard, **request, dtype="bf16")
    # bf16 activations: ~3 significant digits per rounding; the losses still agree to 1e-2 relative
    assert abs(bf16["jax_val_loss"] - bf16["torch_val_loss"]) <= 1e-2 * bf16["torch_val_loss"]
    assert bf16["torch_val_loss"] != fp32["torch_val_loss"]  # the policy did change the numerics


def _record_named(state: dict, name: str) -> dict:
    """torch_ref's state dict under the names the record `name`'s own code saves (LINEAGE.md)."""
    out = {}
    for key, value in state.items():
        for ours, theirs in ((".attn.q_w", ".attn.c_q.weight"), (".attn.k_w", ".attn.c_k.weight"),
                             (".attn.v_w", ".attn.c_v.weight")):
            key = key.replace(ours, theirs)
        if name in ("shortcuts", "unet-value-embeds"):
            key = key.replace("value_embeds.embed.0.", "transformer.vte.").replace("blocks.", "transformer.h.")
            key = key.replace("embed.weight", "transformer.wte.weight") if key == "embed.weight" else key
        out["_orig_mod." + key] = value
    return out


@pytest.fixture(scope="module")
def lineage_checkpoints(tmp_path_factory, tiny_files) -> dict[str, Path]:
    """#9 and #15 checkpoints at width 64 (2 heads of 32) in their records' own names."""
    from torch_ref import config as torch_cfg
    from torch_ref import presets as torch_presets

    root = tmp_path_factory.mktemp("lineage_compare")
    paths = {}
    for name in ("shortcuts", "unet-value-embeds"):
        config = torch_cfg.replace(torch_presets.get_preset(name).model, vocab_size=VOCAB, eot_id=EOT, model_dim=64,
                                   num_heads=2, dtype_policy="fp32")
        torch.manual_seed(1)
        gpt = torch_model.GPT.from_config(config, fp8_head=False)
        with torch.no_grad():
            for key, param in gpt.named_parameters():
                if "embed" not in key:
                    param.add_(torch.randn_like(param) * (0.5 / math.sqrt(param.shape[-1]) if param.ndim >= 2 else 0.1))
        paths[name] = root / f"{name}.pt"
        torch.save({"model": _record_named(gpt.state_dict(), name)}, paths[name])
    return paths


@pytest.mark.slow
@pytest.mark.parametrize("name, window", [("shortcuts", {}), ("unet-value-embeds", {"window_tokens": 192})])
def test_lineage_record_checkpoints_compare_in_fp32(lineage_checkpoints, tiny_files, name, window):
    _, shard = tiny_files
    report = compare_checkpoint.compare(lineage_checkpoints[name], shard, preset=name, head_dim=32, eot_id=EOT, **window)
    assert report["preset"] == name and report["model"]["model_dim"] == 64
    assert report["seq_len"] == 384  # #9: its 1024-token rows, cut to what the 400-token shard holds
    # fp32 on both sides: the rows of the lineage parity checks (docs/PARITY.md), 1e-6 / 1e-5.
    assert abs(report["jax_loss"] - report["torch_loss"]) <= 1e-6 * report["torch_loss"]
    assert report["max_abs_logit_diff"] <= 1e-5 * report["max_abs_logit"]


@pytest.mark.parametrize("name, flags, message", [
    ("unet-value-embeds", ["--window-blocks", "2"], "--window-blocks does not apply: this preset's forward takes --window-tokens"),
    ("unet-value-embeds", [], "pass --window-tokens"),
    ("shortcuts", ["--window-tokens", "64"], "takes no window"),
])
def test_lineage_presets_take_their_records_window_flag(lineage_checkpoints, tiny_files, name, flags, message, capsys):
    _, shard = tiny_files
    args = [str(lineage_checkpoints[name]), "--preset", name, "--tokens", str(shard), "--head-dim", "32",
            "--eot-id", str(EOT), *flags]
    assert command.main(args) == 1
    assert message in capsys.readouterr().err
