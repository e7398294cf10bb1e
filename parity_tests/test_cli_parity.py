"""One experiment, two trainers: jaxgpt's and torch_ref's command lines compared.

Both derive their config flags from their config dataclasses (runkit.flags), so a config field
both frameworks have is one flag with one name, type, choices, default and help; the flags that
are not config fields are runkit.cli's, shared. Every difference between the two surfaces is
listed below with its reason; any other difference fails.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import jaxgpt.config as jax_cfg
import torch_ref.config as torch_cfg
from jaxgpt import presets as jax_presets
from jaxgpt.run import cli as jax_cli
from runkit import flags
from torch_ref import presets as torch_presets
from torch_ref.run import cli as torch_cli

REPO = Path(__file__).resolve().parents[1]

# Config fields only jaxgpt has, and why torch_ref has no such knob.
JAX_ONLY_FIELDS = {
    "model.block_size": "torch_ref's FlexAttention block masks use the record's fixed 128-token block",
    "model.mlp_ratio": "torch_ref's MLP is the record's 4 D hidden layer as written",
    "model.attention_backend": "jaxgpt's choice of attention kernel; torch_ref runs the record's FlexAttention",
    "model.max_window_blocks": "the cap jaxgpt's compiled kernels are built for; FlexAttention takes any window",
    "model.loss_chunk_tokens": "a memory option of jaxgpt's loss; torch_ref computes the record's loss in one piece",
    "model.remat": "XLA's rematerialisation policy; the record has none",
    "optim.bf16_embeddings": "an override of the dtype policy for jaxgpt's embedding tables; torch_ref follows the "
                             "policy, as the record",
}
TORCH_ONLY_FIELDS: dict[str, str] = {}

# Flags that are not config fields and only one trainer has.
JAX_ONLY_FLAGS = {
    "--no-progress": "jaxgpt's progress bar; torch_ref prints the record's step lines only",
    "--sync": "JAX dispatches steps asynchronously; torch_ref's loop is the record's synchronous one",
    "--compile-cache": "JAX's persistent compilation cache",
    "--coordinator": "jax.distributed's multi-host start; torch_ref's hosts come from torchrun",
    "--num-processes": "jax.distributed's multi-host start; torch_ref's hosts come from torchrun",
    "--process-id": "jax.distributed's multi-host start; torch_ref's hosts come from torchrun",
    "--peer-timeout": "jaxgpt's heartbeat between processes; torch_ref's ranks learn of a lost peer from gloo",
}
TORCH_ONLY_FLAGS = {
    "--device": "torch's device (cpu or cuda); jaxgpt runs on JAX's default platform (JAX_PLATFORMS)",
}
# Flags both take whose meaning differs, and how.
DIFFERENT_FLAGS = {
    "--resume": "torch_ref also takes one checkpoint FILE: its checkpoints are files, jaxgpt's orbax folders",
}


def by_dest(config_flags: tuple[flags.ConfigFlag, ...]) -> dict[str, flags.ConfigFlag]:
    return {flag.dest: flag for flag in config_flags}


JAX_FLAGS, TORCH_FLAGS = by_dest(jax_cli.config_flags()), by_dest(torch_cli.config_flags())


def test_the_config_fields_only_one_trainer_has_are_the_listed_ones():
    assert set(JAX_FLAGS) - set(TORCH_FLAGS) == set(JAX_ONLY_FIELDS)
    assert set(TORCH_FLAGS) - set(JAX_FLAGS) == set(TORCH_ONLY_FIELDS)


@pytest.mark.parametrize("dest", sorted(set(JAX_FLAGS) & set(TORCH_FLAGS)))
def test_a_shared_config_field_is_one_flag(dest):
    """Name, type, choices, default (the record's value) and help: the same in both trainers."""
    jax_flag, torch_flag = JAX_FLAGS[dest], TORCH_FLAGS[dest]
    for part in ("flag", "owner", "type_name", "choices", "default", "help", "aliases"):
        assert getattr(jax_flag, part) == getattr(torch_flag, part), (dest, part)
    assert jax_flag.help, f"{dest} has no help: write a comment on its config field"


def test_every_config_field_is_a_flag_or_a_per_layer_tuple():
    for section, klass in (("model", jax_cfg.ModelConfig), ("model", torch_cfg.ModelConfig)):
        assert set(flags.flagless_fields(klass)) == {"value_embed_slots", "long_window_layers",
                                                     "attention_free_layers"}, (section, klass.__module__)
    for klass in (jax_cfg.OptimConfig, jax_cfg.TrainConfig, torch_cfg.OptimConfig, torch_cfg.TrainConfig):
        assert flags.flagless_fields(klass) == (), klass


def _other_flags(parser) -> dict[str, dict]:
    config_options = {name for flag in (*JAX_FLAGS.values(), *TORCH_FLAGS.values()) for name in (flag.flag, *flag.aliases)}
    return {option: row for option, row in flags.surface(parser).items() if option not in config_options}


def test_the_flags_that_are_not_config_fields_are_shared_or_listed():
    jax_other, torch_other = _other_flags(jax_cli.build_parser()), _other_flags(torch_cli.build_parser())
    assert set(jax_other) - set(torch_other) == set(JAX_ONLY_FLAGS)
    assert set(torch_other) - set(jax_other) == set(TORCH_ONLY_FLAGS)
    for option in sorted(set(jax_other) & set(torch_other)):
        assert jax_other[option] == torch_other[option], option  # dest, choices, whether it takes a value
    assert set(DIFFERENT_FLAGS) <= set(jax_other) & set(torch_other)


def test_both_trainers_offer_the_same_presets():
    assert sorted(jax_presets.PRESETS) == sorted(torch_presets.PRESETS)


def readme_args() -> list[str]:
    """The README's `ARGS="..."`: the one command line it runs with both trainers."""
    found = re.findall(r'^ARGS="([^"]+)"$', (REPO / "README.md").read_text(), flags=re.MULTILINE)
    assert len(found) == 1, "the README shows one $ARGS"
    return shlex.split(found[0])


def shared_values(preset, dests) -> dict[str, object]:
    values = {}
    for dest in dests:
        section, name = dest.split(".")
        config = getattr(preset, section)
        values[dest] = getattr(config, name) if hasattr(config, name) else getattr(config.lineage, name)
    return values


@pytest.mark.parametrize("extra", [[], ["--muon-lr", "0.03", "--soft-cap", "tanh", "--logit-cap", "15",
                                        "--ns-iteration", "chain", "--cooldown-whole-steps", "--cycle-data", "false"]],
                         ids=["readme", "overrides"])
def test_one_command_line_is_one_experiment(extra):
    """The README's $ARGS (and more flags on top) give both trainers the same value of every
    shared config field, except the device count, which torch_ref settles from torchrun."""
    argv = [*readme_args(), *extra]
    jax_preset, _ = jax_cli.parse_args(argv)
    torch_preset, _ = torch_cli.parse_args([*argv, "--device", "cpu"])
    shared = sorted((set(JAX_FLAGS) & set(TORCH_FLAGS)) - {"train.devices"})
    assert shared_values(jax_preset, shared) == shared_values(torch_preset, shared)
    if extra:  # the flags took effect (not only agreed)
        assert (jax_preset.optim.muon_lr, jax_preset.model.lineage.soft_cap, jax_preset.optim.lineage.ns_iteration,
                jax_preset.optim.lineage.cooldown_whole_steps) == (0.03, "tanh", "chain", True)
