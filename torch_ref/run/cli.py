"""The training command line (`python -m torch_ref.train --help`): flags -> (Preset, RunOptions).

A config flag overrides one field of the chosen preset (`--preset`); a flag left out keeps the
preset's value. Under torchrun (env RANK and WORLD_SIZE) the process count is torchrun's.
Imports torch only to pick the default device (`with_device`): `parse_flags` is the part that the
light command (torch_ref.train) runs before the run holds its folders.
The same concept as jaxgpt.run.cli (torch_ref imports nothing from jaxgpt); the flag types both
use and the run-id check are runkit's (runkit.cli, runkit.names).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch_ref.config as cfg
from runkit import names
from runkit.cli import parse_bool, parse_profile_window
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
    init_from: str | None = None
    head_dim: int | None = None
    save_checkpoint: str | None = None  # the final state (or the last completed step on a signal) here
    log_dir: str | None = None  # None: <out_dir>/logs
    resume: str | None = None  # a checkpoint file, or a folder whose newest <step>.pt is used
    run_id: str | None = None  # None: a fresh uuid4 (names the log files and checkpoints/<run id>)
    profile: tuple[int, int] | None = None  # trace steps START..STOP (train-line numbers) with torch.profiler
    tensorboard: str | None = None  # also write the metrics as TensorBoard events into <tensorboard>/<run id>
    allow_nonfinite_loss: bool = False  # train on through a NaN / inf loss instead of stopping with exit 1
    debug: bool = False  # show tracebacks instead of one-line errors
    verify_shards: bool = False  # hash every shard against meta.json, even those hashed before unchanged
    overridden: tuple[str, ...] = ()  # checkpoint_every / keep_checkpoints when given on the command line


# The lineage switches on the command line: (section, field, type, choices, help). Each flag is
# --field-with-dashes and overrides that field of the preset (docs/spec/LINEAGE.md section 7).
LINEAGE_FLAGS = (
    ("model", "model_dim", int, None, "model width D (a tiny-width variant of any preset)"),
    ("model", "num_heads", int, None, "attention heads"),
    ("model", "rms_norm_eps", str, cfg.RMS_NORM_EPS, "RMSNorm eps: fp32 (2^-23) or as_run (2^-7 on bf16 inputs)"),
    ("model", "embed_rows", str, cfg.EMBED_ROWS, "embedding rows: vocab or padded (#8-#18)"),
    ("model", "linear_init", str, cfg.LINEAR_INITS, "linear init: record or torch_default (#8-#18)"),
    ("model", "block_lambdas", parse_bool, None, "x <- l0 x + l1 x0 (#9 on)"),
    ("model", "unet_skips", parse_bool, None, "U-net skip weights (#11 on)"),
    ("model", "value_embed_layout", str, cfg.VALUE_EMBED_LAYOUTS, "value embeddings: tables or chunks (#15)"),
    ("model", "attn_value_lambdas", parse_bool, None, "attention value lambdas (#15 on)"),
    ("model", "value_residual", parse_bool, None, "#9's value residual"),
    ("model", "attention_mask", str, cfg.ATTENTION_MASKS, "document_blocks, document_tokens (#15), causal (#8/#9)"),
    ("model", "rotary", str, cfg.ROTARY_KINDS, "rotary tables and precision"),
    ("model", "as_written_roundings", parse_bool, None, "the records' own bf16 roundings (full rotary tables)"),
    ("model", "soft_cap", str, cfg.SOFT_CAPS, "sigmoid (Sub3Min), tanh (#9-#18), none (#8)"),
    ("model", "logit_cap", float, None, "soft-cap constant"),
    ("model", "soft_cap_rounding", str, cfg.SOFT_CAP_ROUNDINGS, "tanh cap on bf16 logits: once or per_op"),
    ("model", "fp8_head", parse_bool, None, "FP8 lm_head in training (#19 on)"),
    ("optim", "muon_momentum_form", str, cfg.MUON_MOMENTUM_FORMS, "Muon momentum: ema or sgd (#8/#9)"),
    ("optim", "ns_iteration", str, cfg.NS_ITERATIONS, "Newton-Schulz step: poly or chain (#8/#9)"),
    ("optim", "cooldown_whole_steps", parse_bool, None, "cooldown in whole steps (#8-#15)"),
    ("train", "window_schedule", str, cfg.WINDOW_SCHEDULES, "blocks_ceil, blocks_floor (#18), tokens (#15), none"),
    ("train", "repeat_first_batch", parse_bool, None, "steps 0 and 1 on the first batch (#8/#9)"),
    ("train", "shard_switch", str, cfg.SHARD_SWITCHES, "global, per_rank (#15), per_rank_inclusive (#8/#9)"),
    ("train", "data_ranks", int, None, "record ranks of the per-rank shard switch (8)"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train the Sub3Min record's GPT in PyTorch (torchrun for several GPUs).",
    )
    parser.add_argument("--preset", choices=sorted(presets.PRESETS), default="record",
                        help="starting config; flags override it (record alias sub3min; the lineage: "
                        + ", ".join(f"{name} #{number}" for name, (number, _, _) in presets.LINEAGE_PRESETS.items()) + ")")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available, else cpu")
    parser.add_argument("--devices", type=int, help="processes (one per device); default: torchrun's WORLD_SIZE, else 1")
    parser.add_argument("--seed", type=int, help="torch seed of the fresh init (the record has none); ignored with --init-from")
    parser.add_argument("--init-from", metavar="CKPT.pt",
                        help="start from a record-format checkpoint {'model': state_dict}; dims inferred from it")
    parser.add_argument("--head-dim", type=int,
                        help="with --init-from: heads = model_dim // head_dim (default: the preset's, 128 for record)")
    parser.add_argument("--train-files", help="glob of training shards")
    parser.add_argument("--val-files", help="glob of validation shards")
    parser.add_argument("--steps", type=int, help="training steps; the LR cooldown and window warm-up follow it")
    parser.add_argument("--seq-len", type=int, help="tokens per packed sequence (a multiple of 128)")
    parser.add_argument("--batch-tokens", type=int, help="global tokens per step (a multiple of devices * seq_len)")
    parser.add_argument("--cycle-data", action="store_true", default=None,
                        help="start the training shards over when they run out (default: stop with an error)")
    parser.add_argument("--val-every", type=int, help="validate at step 0, every K steps and after the last step; 0: after "
                        "the last step only (the record's val_loss_every 0, 'only at the end')")
    parser.add_argument("--val-tokens", type=int, help="validation tokens (a multiple of devices * seq_len)")
    parser.add_argument("--window-max-tokens", type=int, help="attention window at the last step, in tokens (1728 in the record)")
    parser.add_argument("--dtype", choices=cfg.DTYPE_POLICIES, help="record: bf16 + FP8 head; fp32: all fp32, plain head "
                        "(NS stays bf16); bf16_model (#15), autocast (#8/#9)")
    parser.add_argument("--out-dir", help="where logs/ and checkpoints/<run id>/ go (default: runs)")
    parser.add_argument("--checkpoint-every", type=int, metavar="K",
                        help="save <out-dir>/checkpoints/<run id>/<step>.pt every K steps and at the end (default 0: never)")
    parser.add_argument("--keep-checkpoints", type=int, metavar="K", help="keep only the newest K step files (default 3)")
    parser.add_argument("--resume", metavar="DIR|FILE",
                        help="continue exactly from the newest checkpoint in DIR (new ones go there too) or from FILE; "
                             "the config must be the same")
    parser.add_argument("--save-checkpoint", metavar="PATH",
                        help="after training (or on SIGINT/SIGTERM), save {'model', 'optimizers', 'step', ...} here; "
                             "--resume PATH continues from it")
    parser.add_argument("--run-id", type=names.argparse_name("--run-id"), metavar="NAME",
                        help="names the log files and the checkpoint folder, a plain name (default: a random uuid)")
    parser.add_argument("--debug", action="store_true", help="on an error, show the full traceback instead of one line")
    parser.add_argument("--log-dir", help="where rank 0 writes <run id>.txt and .jsonl (default: <out-dir>/logs)")
    parser.add_argument("--tensorboard", metavar="DIR", help="also write the metrics JSONL's numbers as TensorBoard "
                        "events into DIR/RUN_ID (tensorboard --logdir DIR shows every run there)")
    parser.add_argument("--profile", metavar="START:STOP", type=parse_profile_window,
                        help="trace the steps whose train lines read step:START .. step:STOP with torch.profiler into "
                        "OUT_DIR/profile/RUN_ID/trace_rank<r>.json (Chrome trace; scripts/trace_kernels.py ranks its kernels)")
    parser.add_argument("--allow-nonfinite-loss", action="store_true",
                        help="train on through a NaN or infinite loss (by default the run stops within two steps "
                        "of one, exit 1, and saves nothing after it)")
    parser.add_argument("--verify-shards", action="store_true", help="hash every shard the run reads against the "
                        "SHA-256 its folder's meta.json records (by default a shard is hashed once per file identity: "
                        "path, inode, size, mtime, ctime)")
    lineage = parser.add_argument_group("model dims and lineage switches (override the preset)")
    for section, name, parse, choices, help_text in LINEAGE_FLAGS:
        lineage.add_argument("--" + name.replace("_", "-"), dest=f"{section}.{name}", type=parse, choices=choices,
                             metavar="{true,false}" if parse is parse_bool else None, help=help_text)
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
    switches: dict[str, dict[str, Any]] = {"model": {}, "optim": {}, "train": {}}
    for section, name, *_ in LINEAGE_FLAGS:
        if (value := getattr(args, f"{section}.{name}")) is not None:
            switches[section][name] = value
    if args.dtype is not None:
        switches["model"]["dtype_policy"] = args.dtype
    model = cfg.with_fields(preset.model, **switches["model"])
    train = cfg.with_fields(train, **switches["train"])
    preset = cfg.replace(preset, optim=cfg.with_fields(preset.optim, **switches["optim"]))
    options = RunOptions(
        init_from=args.init_from, head_dim=args.head_dim, save_checkpoint=args.save_checkpoint,
        log_dir=args.log_dir, resume=args.resume, run_id=args.run_id, profile=args.profile,
        tensorboard=args.tensorboard, allow_nonfinite_loss=args.allow_nonfinite_loss, debug=args.debug,
        verify_shards=args.verify_shards,
        overridden=tuple(name for name in ("checkpoint_every", "keep_checkpoints") if getattr(args, name) is not None),
    )
    return dataclasses.replace(preset, model=model, train=train), options, args.device


def with_run_id(options: RunOptions) -> RunOptions:
    """`options` with a fresh uuid4 as the run id when none was given; ValueError when the one
    given is not a plain name (runkit.names)."""
    if options.run_id is not None:
        names.plain_name(options.run_id)  # a Python caller's name: the command line checked its own
        return options
    return dataclasses.replace(options, run_id=str(uuid.uuid4()))
