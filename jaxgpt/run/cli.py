"""The training command line (`python -m jaxgpt.train --help`): flags -> (Preset, RunOptions).

The config flags are derived from the config dataclasses (runkit.flags, the mechanism torch_ref's
command line uses too): every field of ModelConfig, OptimConfig and TrainConfig and of their
lineage objects is a flag `--field-name` whose choices come from its `Literal` type and whose help
is its comment; a flag given overrides that field of the chosen preset (`--preset`), a flag left
out keeps the preset's value. Per-layer tuples have no flags (presets and `--init-from` set them).
The flags that are not config fields are declared here. Imports no jax.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from jaxgpt import config as cfg
from jaxgpt import presets
from jaxgpt.run import compile_cache
from runkit import flags
from runkit.cli import add_run_flags

PROG = "python -m jaxgpt.train"
# A process of a multi-process run whose heartbeat is silent this long is lost (jaxgpt.run.peers,
# which beats every 2 s: the bound's floor leaves a live process three beats).
PEER_TIMEOUT_S = 20.0
MIN_PEER_TIMEOUT_S = 6.0
SECTIONS = (("train", cfg.TrainConfig), ("model", cfg.ModelConfig), ("optim", cfg.OptimConfig))


def print_error(message: object) -> None:
    """A runtime error's one line on stderr, `PROG: error: MESSAGE`, the form argparse gives a
    usage error (every command of the project writes its errors so)."""
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RunOptions:
    """What a run does besides its config: where it starts from and what it writes."""

    preset: str | None = None  # the --preset the config started from, in the run header (None: built in Python)
    init_from: str | None = None  # record-format torch checkpoint to start from
    resume: str | None = None  # checkpoint directory to continue from (and keep saving into)
    export_torch: str | None = None  # write the final params as {"model": state_dict} here
    run_id: str | None = None  # None: a fresh uuid4
    progress: bool = True  # tqdm bar when stdout is a terminal
    save_checkpoint: bool = False  # save the final state even when checkpoint_every is 0
    coordinator: str | None = None  # multi-host: jax.distributed coordinator "host:port"
    num_processes: int | None = None
    process_id: int | None = None
    head_dim: int | None = None  # --init-from: heads = model_dim / head_dim (None: the preset's)
    debug: bool = False  # show tracebacks instead of one-line errors
    sync: bool = False  # wait for every step before dispatching the next (debugging; the record's loop shape)
    allow_nonfinite_loss: bool = False  # train on through a NaN / inf loss instead of stopping with exit 1
    profile: tuple[int, int] | None = None  # trace steps START..STOP (train-line numbers) with jax.profiler
    compile_cache: str | None = None  # JAX's persistent compilation cache folder (None: none)
    tensorboard: str | None = None  # also write the metrics as TensorBoard events into <tensorboard>/<run_id>
    peer_timeout_s: float = PEER_TIMEOUT_S  # multi-process: a process silent this long is lost (run.peers)
    verify_shards: bool = False  # hash every shard against meta.json, even those hashed before unchanged
    overridden: tuple[str, ...] = ()  # "section.field" of every config flag given


def parse_peer_timeout(text: str) -> float:
    """--peer-timeout's seconds: at least MIN_PEER_TIMEOUT_S (a live process must never look silent)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not seconds >= MIN_PEER_TIMEOUT_S:  # NaN too
        raise argparse.ArgumentTypeError(f"{text} s is below {MIN_PEER_TIMEOUT_S:g} s, three of the heartbeat's 2-s beats")
    return seconds


def config_flags() -> tuple[flags.ConfigFlag, ...]:
    """One flag per field of the model, optimizer and run configs (runkit.flags: derived from the
    dataclasses, help from each field's comment)."""
    return tuple(flag for section, config_class in SECTIONS for flag in flags.config_flags(section, config_class))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train the Sub3Min GPT with JAX on a data-parallel device mesh (the record's optimizers, "
        "schedules, validation and log lines). Config flags override the chosen preset's values.",
    )
    add_run_flags(parser, tuple(presets.PRESETS), profiler="jax.profiler into OUT_DIR/profile/RUN_ID (TensorBoard/XProf, "
                  "Perfetto)", preset_help="starting config (default: record, alias sub3min); the lineage: "
                  + ", ".join(f"{name} (#{number} {record})" for name, (number, record, _) in presets.LINEAGE_PRESETS.items()))
    parser.add_argument("--resume", metavar="DIR",
                        help="continue the run whose checkpoints are in DIR (same config required); new checkpoints go there too")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (it is only shown on a terminal anyway)")
    parser.add_argument("--sync", action="store_true", help="wait for each step and log it before dispatching the next "
                        "(debugging; same losses and log lines, the device idles between steps)")
    parser.add_argument("--compile-cache", metavar="DIR",
                        help=f"JAX's persistent compilation cache: a second identical run skips compiling (default: "
                        f"${compile_cache.ENV_VAR}, else ${compile_cache.JAX_ENV_VAR}, else "
                        f"{compile_cache.default_folder()}; {compile_cache.OFF}: off)")
    flags.add_config_groups(parser, config_flags())
    hosts = parser.add_argument_group("several hosts (jax.distributed)")
    hosts.add_argument("--coordinator", metavar="HOST:PORT", help="coordinator address; also read from JAX_COORDINATOR_ADDRESS")
    hosts.add_argument("--num-processes", type=int, help="number of processes (hosts)")
    hosts.add_argument("--process-id", type=int, help="index of this process")
    hosts.add_argument("--peer-timeout", type=parse_peer_timeout, default=PEER_TIMEOUT_S, metavar="SECONDS",
                       help="a process whose heartbeat is silent this long is lost: the others stop, naming it and "
                            f"the newest checkpoint (default {PEER_TIMEOUT_S:g}; at least {MIN_PEER_TIMEOUT_S:g})")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> tuple[cfg.Preset, RunOptions]:
    """Parse the command line into a validated Preset and the RunOptions.

    Raises ValueError (naming the field) for an invalid combination of values."""
    args = build_parser().parse_args(argv)
    given = flags.overrides(args, [section for section, _ in SECTIONS])
    preset = presets.get_preset(args.preset)
    preset = cfg.Preset(
        model=cfg.with_fields(preset.model, **given["model"]),
        optim=cfg.with_fields(preset.optim, **given["optim"]),
        train=cfg.with_fields(preset.train, **given["train"]),
    )
    overridden = {f"{section}.{name}" for section, fields in given.items() for name in fields}
    options = RunOptions(
        preset=args.preset, init_from=args.init_from, resume=args.resume, export_torch=args.export_torch, run_id=args.run_id,
        progress=not args.no_progress, save_checkpoint=args.save_checkpoint, coordinator=args.coordinator,
        num_processes=args.num_processes, process_id=args.process_id, head_dim=args.head_dim,
        debug=args.debug, sync=args.sync, allow_nonfinite_loss=args.allow_nonfinite_loss, profile=args.profile,
        compile_cache=compile_cache.resolve(args.compile_cache), tensorboard=args.tensorboard,
        peer_timeout_s=args.peer_timeout, verify_shards=args.verify_shards, overridden=tuple(sorted(overridden)),
    )
    return preset, options
