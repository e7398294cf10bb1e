"""jaxgpt.train with a lineage preset: --init-from a checkpoint saved under that record's own
state-dict names (#9's `transformer.h.i.attn.c_q.weight`, `...attn.lamb`), at a width override."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from jaxgpt import train as train_lib
from jaxgpt.data import write_shard
from jaxgpt.testing import synthetic_tokens
from torch_ref import config as torch_cfg
from torch_ref import model as torch_model
from torch_ref import presets as torch_presets

VOCAB, EOT = 512, 511


def _shortcuts_named(state: dict) -> dict:
    """torch_ref's state dict under #9's own names (LINEAGE.md 4.1), with torch.compile's prefix."""
    renamed = {}
    for key, value in state.items():
        key = key.replace("embed.weight", "transformer.wte.weight").replace("blocks.", "transformer.h.")
        for ours, theirs in (("q_w", "c_q.weight"), ("k_w", "c_k.weight"), ("v_w", "c_v.weight")):
            key = key.replace(f".attn.{ours}", f".attn.{theirs}")
        renamed["_orig_mod." + key] = value
    return renamed


@pytest.mark.slow
def test_init_from_a_shortcuts_checkpoint_in_its_records_names(tmp_path):
    config = torch_cfg.replace(torch_presets.get_preset("shortcuts").model, vocab_size=VOCAB, eot_id=EOT, model_dim=64,
                               num_heads=2, dtype_policy="fp32")
    torch.manual_seed(0)
    gpt = torch_model.GPT.from_config(config, fp8_head=False)
    with torch.no_grad():  # no silent path: the zero-initialised projections and head drawn too
        for name, param in gpt.named_parameters():
            if "embed" not in name:
                param.add_(torch.randn_like(param) * (0.5 / math.sqrt(param.shape[-1]) if param.ndim >= 2 else 0.1))
    checkpoint = tmp_path / "shortcuts.pt"
    torch.save({"model": _shortcuts_named(gpt.state_dict())}, checkpoint)
    tokens = synthetic_tokens(5_000, seed=3)
    write_shard(tmp_path / "t_train_000001.bin", tokens)
    write_shard(tmp_path / "t_val_000000.bin", tokens)
    args = ["--preset", "shortcuts", "--init-from", str(checkpoint), "--head-dim", "32", "--eot-id", str(EOT),
            "--train-files", str(tmp_path / "t_train_*.bin"), "--val-files", str(tmp_path / "t_val_*.bin"),
            "--steps", "0", "--seq-len", "1024", "--batch-tokens", "1024", "--val-tokens", "1024",
            "--dtype", "fp32", "--devices", "1", "--out-dir", str(tmp_path / "out"), "--no-progress"]
    preset, options = train_lib.parse_args(args)
    result = train_lib.train(preset, options)
    assert result.preset.model.model_dim == 64 and result.preset.model.lineage.value_residual
    with torch.no_grad():
        chunk = torch.from_numpy(np.asarray(tokens[:1025], np.int64))
        expected = float(gpt.eval()(chunk[:-1], chunk[1:], 0))
    # fp32 on both sides, the same weights: the lineage forward rows' 1e-6 loss bound (PARITY.md).
    assert abs(result.val_losses[0] - expected) <= 1e-6 * expected
    assert abs(expected - math.log(VOCAB)) > 0.1  # the checkpoint's weights, not a fresh zero head
