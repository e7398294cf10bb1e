"""The training command line (`python -m torch_ref.train --help`): flags -> (Preset, RunOptions).

The config flags are derived from the config dataclasses by runkit.flags, as jaxgpt's are: every
field of the model, optimizer and run configs and of their lineage objects is a flag `--field-name`
with the same name, type, choices, default and help as jaxgpt's (parity_tests/test_cli_parity.py);
a flag given overrides that field of the chosen preset (`--preset`). The flags that are not config
fields are runkit.cli's, shared with jaxgpt, plus `--resume` and `--device`. Under torchrun (env
RANK and WORLD_SIZE) the process count is torchrun's. Imports torch only to pick the default
device (`with_device`): `parse_flags` is the part that the light command (torch_ref.train) runs
before the run holds its folders. torch_ref imports nothing from jaxgpt.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch_ref.config as cfg
from runkit import flags, names
from runkit.cli import add_run_flags
from torch_ref import presets

PROG = "python -m torch_ref.train"


def print_error(message: object) -> None:
    """A runtime error's one line on stderr, `PROG: error: MESSAGE`, the form argparse gives a
    usage error (every command of the project writes its errors so)."""
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RunOptions:
    """Options of one run that are not part of the preset's config."""

    device: Literal["cpu", "cuda"] = "cpu"
    preset: str | None = None  # the --preset the config started from, in the run header (None: built in Python)
    init_from: str | None = None
    head_dim: int | None = None
    save_checkpoint: bool = False  # save the final state into the checkpoint folder even when checkpoint_every is 0
    export_torch: str | None = None  # write the final parameters as {"model": state_dict} here
    resume: str | None = None  # a checkpoint file, or a folder whose newest <step>.pt is used
    run_id: str | None = None  # None: a fresh uuid4 (names the log files and checkpoints/<run id>)
    profile: tuple[int, int] | None = None  # trace steps START..STOP (train-line numbers) with torch.profiler
    tensorboard: str | None = None  # also write the metrics as TensorBoard events into <tensorboard>/<run id>
    allow_nonfinite_loss: bool = False  # train on through a NaN / inf loss instead of stopping with exit 1
    debug: bool = False  # show tracebacks instead of one-line errors
    verify_shards: bool = False  # hash every shard against meta.json, even those hashed before unchanged
    overridden: tuple[str, ...] = ()  # checkpoint_every / keep_checkpoints when given on the command line


SECTIONS = (("train", cfg.TrainConfig), ("model", cfg.ModelConfig), ("optim", cfg.OptimConfig))


def config_flags() -> tuple[flags.ConfigFlag, ...]:
    """One flag per field of the model, optimizer and run configs (runkit.flags: derived from the
    dataclasses, help from each field's comment), as jaxgpt's command line has them."""
    return tuple(flag for section, config_class in SECTIONS for flag in flags.config_flags(section, config_class))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train the Sub3Min record's GPT in PyTorch (torchrun for several GPUs). Config flags override "
        "the chosen preset's values.",
    )
    add_run_flags(parser, tuple(presets.PRESETS), profiler="torch.profiler into OUT_DIR/profile/RUN_ID/trace_rank<r>.json "
                  "(Chrome trace)", preset_help="starting config (default: record, alias sub3min); the lineage: "
                  + ", ".join(f"{name} (#{number} {record})" for name, (number, record, _) in presets.LINEAGE_PRESETS.items()))
    parser.add_argument("--resume", metavar="DIR|FILE",
                        help="continue the run whose checkpoints are in DIR (same config required; new checkpoints go "
                        "there too), or from one checkpoint FILE")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available, else cpu")
    flags.add_config_groups(parser, config_flags())
    return parser


def torchrun_world_size() -> int | None:
    """torchrun's WORLD_SIZE when this process was started by torchrun (RANK is set), else None."""
    return int(os.environ["WORLD_SIZE"]) if "RANK" in os.environ and "WORLD_SIZE" in os.environ else None


def parse_args(argv: Sequence[str] | None = None) -> tuple[cfg.Preset, RunOptions]:
    """Command line -> (preset with overrides applied, run options). Raises ValueError on bad values."""
    preset, options, device = parse_flags(argv)
    return preset, with_device(options, device)


def with_device(options: RunOptions, device: Literal["cpu", "cuda"] | None) -> RunOptions:
    """`options` on `device` (--device; None: cuda when torch sees one, else cpu). ValueError for
    --device cuda without a CUDA device. Imports torch."""
    import torch  # noqa: PLC0415 - seconds: only once the run holds its folders (torch_ref.train)

    chosen: Literal["cpu", "cuda"] = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if chosen == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA device")
    return dataclasses.replace(options, device=chosen)


def parse_flags(argv: Sequence[str] | None = None) -> tuple[cfg.Preset, RunOptions, Literal["cpu", "cuda"] | None]:
    """`parse_args` without torch: (preset, options, --device or None). The options' device is
    cpu until `with_device` sets the one asked for. Raises ValueError on bad values."""
    args = build_parser().parse_args(argv)
    preset = presets.get_preset(args.preset)
    given = flags.overrides(args, [section for section, _ in SECTIONS])
    torchrun_world = torchrun_world_size()
    asked = given["train"].get("devices")
    if asked is not None and torchrun_world is not None and asked != torchrun_world:
        raise ValueError(f"--devices {asked} disagrees with torchrun's WORLD_SIZE {torchrun_world}")
    devices = asked if asked is not None else torchrun_world or 1
    if devices < 1:
        raise ValueError(f"--devices must be >= 1, got {devices}")
    model = cfg.with_fields(preset.model, **given["model"])
    optim = cfg.with_fields(preset.optim, **given["optim"])
    train = cfg.with_fields(preset.train, **{**given["train"], "devices": devices})
    options = RunOptions(
        preset=args.preset, init_from=args.init_from, head_dim=args.head_dim, save_checkpoint=args.save_checkpoint,
        export_torch=args.export_torch, resume=args.resume, run_id=args.run_id, profile=args.profile,
        tensorboard=args.tensorboard, allow_nonfinite_loss=args.allow_nonfinite_loss, debug=args.debug,
        verify_shards=args.verify_shards,
        overridden=tuple(name for name in ("checkpoint_every", "keep_checkpoints") if name in given["train"]),
    )
    return cfg.Preset(model=model, optim=optim, train=train), options, args.device



def with_run_id(options: RunOptions) -> RunOptions:
    """`options` with a fresh uuid4 as the run id when none was given; ValueError when the one
    given is not a plain name (runkit.names)."""
    if options.run_id is not None:
        names.plain_name(options.run_id)  # a Python caller's name: the command line checked its own
        return options
    return dataclasses.replace(options, run_id=str(uuid.uuid4()))
