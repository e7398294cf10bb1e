"""The training command line (`python -m torch_ref.train --help`): flags -> (Preset, RunOptions).

A config flag overrides one field of the chosen preset (`--preset`); a flag left out keeps the
preset's value. Under torchrun (env RANK and WORLD_SIZE) the process count is torchrun's.
The same concept as jaxgpt.cli, written here: torch_ref imports nothing from jaxgpt.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

import torch_ref.config as cfg

PROG = "python -m torch_ref.train"


@dataclass(frozen=True)
class RunOptions:
    """Options of one run that are not part of the preset's config."""

    device: Literal["cpu", "cuda"] = "cpu"
    init_from: str | None = None
    head_dim: int | None = None
    save_checkpoint: str | None = None  # the final state (or the last completed step on a signal) here
    log_dir: str | None = None  # None: <out_dir>/logs
    resume: str | None = None  # a checkpoint file, or a folder whose newest <step>.pt is used
    run_id: str | None = None  # None: a fresh uuid4 (names the log files and checkpoints/<run id>)
    profile: tuple[int, int] | None = None  # trace steps START..STOP (train-line numbers) with torch.profiler
    tensorboard: str | None = None  # also write the metrics as TensorBoard events into <tensorboard>/<run id>
    allow_nonfinite_loss: bool = False  # train on through a NaN / inf loss instead of stopping with exit 1
    overridden: tuple[str, ...] = ()  # checkpoint_every / keep_checkpoints when given on the command line


def parse_profile_window(text: str) -> tuple[int, int]:
    """"START:STOP" (or one step "S") -> (START, STOP), train-line step numbers, both included."""
    start, sep, stop = text.partition(":")
    try:
        window = (int(start), int(stop)) if sep else (int(text), int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP (train-line step numbers, e.g. 2:3), got {text!r}") from None
    if not 1 <= window[0] <= window[1]:
        raise argparse.ArgumentTypeError(f"need 1 <= START <= STOP (steps count from 1, as the train lines), got {text!r}")
    return window


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train the Sub3Min record's GPT in PyTorch (torchrun for several GPUs).",
    )
    parser.add_argument("--preset", choices=sorted(cfg.PRESETS), default="record", help="starting config; flags override it")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available, else cpu")
    parser.add_argument("--devices", type=int, help="processes (one per device); default: torchrun's WORLD_SIZE, else 1")
    parser.add_argument("--seed", type=int, help="torch seed of the fresh init (the record has none); ignored with --init-from")
    parser.add_argument("--init-from", metavar="CKPT.pt", help="start from a record-format checkpoint {'model': state_dict}; dims inferred from it")
    parser.add_argument("--head-dim", type=int, help="with --init-from: heads = model_dim // head_dim (default: the preset's, 128 for record)")
    parser.add_argument("--train-files", help="glob of training shards")
    parser.add_argument("--val-files", help="glob of validation shards")
    parser.add_argument("--steps", type=int, help="training steps; the LR cooldown and window warm-up follow it")
    parser.add_argument("--seq-len", type=int, help="tokens per packed sequence (a multiple of 128)")
    parser.add_argument("--batch-tokens", type=int, help="global tokens per step (a multiple of devices * seq_len)")
    parser.add_argument("--cycle-data", action="store_true", default=None,
                        help="start the training shards over when they run out (default: stop with an error)")
    parser.add_argument("--val-every", type=int, help="validate every K steps (and after the last)")
    parser.add_argument("--val-tokens", type=int, help="validation tokens (a multiple of devices * seq_len)")
    parser.add_argument("--window-max-tokens", type=int, help="attention window at the last step, in tokens (1728 in the record)")
    parser.add_argument("--dtype", choices=["record", "fp32"], help="record: bf16 + FP8 head; fp32: all fp32, plain head (NS stays bf16)")
    parser.add_argument("--out-dir", help="where logs/ and checkpoints/<run id>/ go (default: runs)")
    parser.add_argument("--checkpoint-every", type=int, metavar="K", help="save <out-dir>/checkpoints/<run id>/<step>.pt every K steps and at the end (default 0: never)")
    parser.add_argument("--keep-checkpoints", type=int, metavar="K", help="keep only the newest K step files (default 3)")
    parser.add_argument("--resume", metavar="DIR|FILE", help="continue exactly from the newest checkpoint in DIR (new ones go there too) or from FILE; the config must be the same")
    parser.add_argument("--save-checkpoint", metavar="PATH", help="after training (or on SIGINT/SIGTERM), save {'model', 'optimizers', 'step', ...} here; --resume PATH continues from it")
    parser.add_argument("--run-id", help="names the log files and the checkpoint folder (default: a random uuid)")
    parser.add_argument("--log-dir", help="where rank 0 writes <run id>.txt and .jsonl (default: <out-dir>/logs)")
    parser.add_argument("--tensorboard", metavar="DIR", help="also write the metrics JSONL's numbers as TensorBoard "
                        "events into DIR/RUN_ID (tensorboard --logdir DIR shows every run there)")
    parser.add_argument("--profile", metavar="START:STOP", type=parse_profile_window,
                        help="trace the steps whose train lines read step:START .. step:STOP with torch.profiler into "
                        "OUT_DIR/profile/RUN_ID/trace_rank<r>.json (Chrome trace; scripts/trace_kernels.py ranks its kernels)")
    parser.add_argument("--allow-nonfinite-loss", action="store_true",
                        help="train on through a NaN or infinite loss (by default the run stops within two steps "
                        "of one, exit 1, and saves nothing after it)")
    return parser


def torchrun_world_size() -> int | None:
    """torchrun's WORLD_SIZE when this process was started by torchrun (RANK is set), else None."""
    return int(os.environ["WORLD_SIZE"]) if "RANK" in os.environ and "WORLD_SIZE" in os.environ else None


def parse_args(argv: Sequence[str] | None = None) -> tuple[cfg.Preset, RunOptions]:
    """Command line -> (preset with overrides applied, run options). Raises ValueError on bad values."""
    args = build_parser().parse_args(argv)
    preset = cfg.get_preset(args.preset)
    torchrun_world = torchrun_world_size()
    if args.devices is not None and torchrun_world is not None and args.devices != torchrun_world:
        raise ValueError(f"--devices {args.devices} disagrees with torchrun's WORLD_SIZE {torchrun_world}")
    devices = args.devices if args.devices is not None else torchrun_world or 1
    if devices < 1:
        raise ValueError(f"--devices must be >= 1, got {devices}")
    train_overrides = {
        "train_files": args.train_files,
        "val_files": args.val_files,
        "steps": args.steps,
        "seq_len": args.seq_len,
        "batch_tokens": args.batch_tokens,
        "val_every": args.val_every,
        "val_tokens": args.val_tokens,
        "window_max_tokens": args.window_max_tokens,
        "seed": args.seed,
        "out_dir": args.out_dir,
        "checkpoint_every": args.checkpoint_every,
        "keep_checkpoints": args.keep_checkpoints,
        "cycle_data": args.cycle_data,
    }
    train = cfg.replace(preset.train, devices=devices, **{k: v for k, v in train_overrides.items() if v is not None})
    model = preset.model if args.dtype is None else cfg.replace(preset.model, dtype_policy=args.dtype)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA device")
    options = RunOptions(
        device=device, init_from=args.init_from, head_dim=args.head_dim, save_checkpoint=args.save_checkpoint,
        log_dir=args.log_dir, resume=args.resume, run_id=args.run_id, profile=args.profile,
        tensorboard=args.tensorboard, allow_nonfinite_loss=args.allow_nonfinite_loss,
        overridden=tuple(name for name in ("checkpoint_every", "keep_checkpoints") if getattr(args, name) is not None),
    )
    return dataclasses.replace(preset, model=model, train=train), options


def with_run_id(options: RunOptions) -> RunOptions:
    """`options` with a fresh uuid4 as the run id when none was given."""
    return options if options.run_id is not None else dataclasses.replace(options, run_id=str(uuid.uuid4()))
