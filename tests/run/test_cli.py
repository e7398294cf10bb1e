"""jaxgpt.run.cli: flags -> (Preset, RunOptions), and `python -m jaxgpt.train --help`."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import get_args

import pytest

from jaxgpt import config as cfg
from jaxgpt import presets
from jaxgpt.run import cli, peers


def test_cli_presets_and_overrides():
    preset, options = cli.parse_args(
        ["--preset", "tiny", "--steps", "7", "--dtype", "fp32", "--devices", "2", "--seq-len", "256",
         "--batch-tokens", "1024", "--val-every", "5", "--val-tokens", "2048", "--attention-backend", "dense",
         "--muon-lr", "0.1", "--cycle-data", "--init-from", "x.pt", "--resume", "dir", "--run-id", "r",
         "--no-progress", "--checkpoint-every", "3", "--keep-checkpoints", "2", "--seed", "5"]
    )
    assert preset.train.steps == 7 and preset.train.devices == 2 and preset.train.seq_len == 256
    assert preset.train.batch_tokens == 1024 and preset.train.val_every == 5 and preset.train.val_tokens == 2048
    assert preset.train.cycle_data and preset.train.checkpoint_every == 3 and preset.train.keep_checkpoints == 2
    assert preset.train.seed == 5
    assert preset.model.dtype_policy == "fp32" and preset.model.attention_backend == "dense"
    assert preset.optim.muon_lr == 0.1
    assert options.init_from == "x.pt" and options.resume == "dir" and options.run_id == "r" and not options.progress
    assert options.preset == "tiny"  # written into the run header with the other options
    record, _ = cli.parse_args([])
    assert record == presets.record_preset()


def test_help_lists_every_fixed_flag():
    result = subprocess.run([sys.executable, "-m", "jaxgpt.train", "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    for flag in ("--preset", "--init-from", "--train-files", "--val-files", "--steps", "--seq-len", "--batch-tokens",
                 "--val-every", "--val-tokens", "--dtype", "--devices", "--attention-backend", "--seed", "--out-dir",
                 "--run-id", "--checkpoint-every", "--keep-checkpoints", "--resume", "--export-torch",
                 "--cycle-data", "--no-progress", "--coordinator", "--num-processes", "--process-id"):
        assert flag in result.stdout, flag


def test_peer_timeout_takes_seconds_of_at_least_three_heartbeats(capsys):
    assert cli.parse_args([])[1].peer_timeout_s == cli.PEER_TIMEOUT_S == 20.0
    assert cli.MIN_PEER_TIMEOUT_S == 3 * peers.BEAT_S  # the floor is stated in cli, the beat in peers
    assert cli.parse_args(["--peer-timeout", "6"])[1].peer_timeout_s == 6.0
    for bad, said in [("5.9", "below 6 s"), ("nan", "below 6 s"), ("soon", "expected seconds")]:
        with pytest.raises(SystemExit) as exited:
            cli.parse_args(["--peer-timeout", bad])
        assert exited.value.code == 2 and said in capsys.readouterr().err


# Per-layer tuples have no flags (presets and --init-from set them).
TUPLE_FIELDS = {"value_embed_slots", "long_window_layers", "attention_free_layers"}


def test_every_config_field_has_a_flag():
    dests = {action.dest for action in cli.build_parser()._actions}
    # The lineage's switches (each section's `lineage`) have flat flags: --value-residual, not --lineage-...
    sections = (("model", cfg.ModelConfig), ("model", cfg.ModelLineage), ("optim", cfg.OptimConfig),
                ("optim", cfg.OptimLineage), ("train", cfg.TrainConfig), ("train", cfg.TrainLineage))
    for section, klass in sections:
        for field in dataclasses.fields(klass):
            if field.name not in TUPLE_FIELDS | {"lineage"}:
                assert f"{section}.{field.name}" in dests, field.name


@pytest.mark.parametrize("dest, literal", [("model.dtype_policy", cfg.DTypePolicy),
                                           ("model.attention_backend", cfg.AttentionBackend),
                                           ("model.remat", cfg.RematPolicy), ("optim.ns_dtype", cfg.NSDType)])
def test_choices_are_the_config_literals(dest, literal):
    action = next(a for a in cli.build_parser()._actions if a.dest == dest)
    assert tuple(action.choices) == get_args(literal)


def test_none_unsets_optional_fields_and_booleans_parse():
    preset, _ = cli.parse_args(["--preset", "tiny", "--devices", "none", "--loss-chunk-tokens", "512",
                                "--bf16-embeddings", "off"])
    assert preset.train.devices is None and preset.model.loss_chunk_tokens == 512
    assert preset.optim.bf16_embeddings is False
    with pytest.raises(SystemExit):
        cli.parse_args(["--bf16-embeddings", "maybe"])


def test_help_states_each_default_once():
    text = cli.build_parser().format_help()
    assert "(default: None)" not in text
    assert "{none,block,block_dots}" in text  # --remat lists its choices


def test_bad_flag_value_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.parse_args(["--preset", "huge"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_dtype_choices_are_checked(capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(["--dtype", "fp16"])
    assert "--dtype" in capsys.readouterr().err


def test_a_window_beyond_the_kernels_cap_is_a_usage_error(capsys):
    """--window-max-tokens past --max-window-blocks: exit 2 and one line naming both, before any work."""
    from jaxgpt import train as train_lib

    assert train_lib.main(["--preset", "smoke", "--window-max-tokens", "1792"]) == 2
    err = capsys.readouterr().err
    assert err == ("python -m jaxgpt.train: error: invalid config field `window_max_tokens`: 1792 (14 blocks at the last "
                   "step) exceeds `max_window_blocks` 8: raise max_window_blocks to 14 or lower window_max_tokens to 1024\n")
    assert train_lib.main(["--preset", "smoke", "--max-window-blocks", "4"]) == 2
    assert "1024 (8 blocks at the last step) exceeds `max_window_blocks` 4" in capsys.readouterr().err
