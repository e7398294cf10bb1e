"""torch_ref.run.cli: flags -> (Preset, RunOptions); a bad flag or config value is a usage error
(exit 2, one `error:` line naming it) before any file is read."""

from __future__ import annotations

import pytest

from torch_ref.presets import get_preset
from torch_ref.run import cli

ARGS = ["--device", "cpu", "--steps", "1", "--seq-len", "256", "--batch-tokens", "512", "--val-tokens", "512",
        "--train-files", "nowhere/none_*.bin"]  # never read: usage errors come first


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--seq-len", "100"], "seq_len"),  # invalid config values are usage errors
        (["--batch-tokens", "384"], "batch_tokens"),  # not a multiple of seq_len 256
        (["--val-every", "-1"], "`val_every`: must be >= 0"),  # 0 is legal: after the last step only
        (["--devices", "0"], "--devices must be >= 1"),
    ],
)
def test_bad_values_are_usage_errors(fails, extra, message):
    assert message in fails([*ARGS, *extra], code=2)


def test_flags_override_the_preset_and_torchrun_sets_the_devices(monkeypatch):
    preset, options = cli.parse_args([*ARGS, "--checkpoint-every", "5", "--dtype", "fp32"])
    assert (preset.train.steps, preset.train.seq_len, preset.train.devices) == (1, 256, 1)
    assert preset.model.dtype_policy == "fp32" and preset.optim == get_preset("record").optim
    assert options.overridden == ("checkpoint_every",)  # a resumed run keeps the saved keep_checkpoints
    assert not preset.train.cycle_data and cli.parse_args([*ARGS, "--cycle-data"])[0].train.cycle_data
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert cli.parse_args(ARGS)[0].train.devices == 4
    with pytest.raises(ValueError, match="--devices 2 disagrees with torchrun's WORLD_SIZE 4"):
        cli.parse_args([*ARGS, "--devices", "2"])
