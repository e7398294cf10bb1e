"""Train the record's GPT in PyTorch: `python -m torch_ref.train` (RECORD.md sections 7-9).

    torchrun --standalone --nproc_per_node 8 -m torch_ref.train            # the record, 8 GPUs
    python -m torch_ref.train --preset tiny --device cpu                   # one CPU process
    python -m torch_ref.train --preset tiny --device cpu --devices 2       # two gloo processes
    python -m torch_ref.train --preset tiny --checkpoint-every 20          # runs/checkpoints/<run id>/<step>.pt
    python -m torch_ref.train --preset tiny --resume runs/checkpoints/ID   # continue exactly where it stopped

Defaults are the record's: 1393 steps of 524,288 tokens (65,536 per rank), validation every 125
steps over 10,485,760 tokens, the record's iteration order, log lines and timing (the first 10
steps and validation excluded). A process handling several `seq_len` sequences per step runs them
one after another and averages their gradients, which equals the record's per-rank mean loss
followed by the AVG all-reduce over ranks.

Run conventions as jaxgpt.train's (docs/RELIABILITY.md): logs and checkpoints under --out-dir,
--checkpoint-every / --keep-checkpoints, --resume (model, optimizers, LR schedulers, data
position and step; a changed config is refused), SIGINT/SIGTERM stop between steps and save the
last completed step (exit 130/143), every output path checked before the first step, exit 2 for
usage errors and 1 for runtime errors. `--steps 0` runs the start-up checks and the step-0
validation, then exits.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import Tensor, nn

import torch_ref.config as cfg
from torch_ref import checkpoint as ckpt
from torch_ref.data import (ShardsExhaustedError, check_holds_one_batch, distributed_data_generator, list_shards,
                            read_shard, read_shard_header, val_batches)
from torch_ref.interrupt import Interrupted, StopRequest, agreed_signal
from torch_ref.model import GPT, cast_embeddings_to_bf16, load_record_state_dict, strip_compile_prefix
from torch_ref.optim import build_lr_schedulers, build_optimizers, set_muon_momentum, window_blocks

CLOCK_RESET_STEP = 10  # the record excludes steps 0..9 (compile warm-up) from train_time
RECORD_RANK_TOKENS = 65536  # tokens per rank-level loss mean that the FP8 gradient scale is sized for


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
    overridden: tuple[str, ...] = ()  # checkpoint_every / keep_checkpoints when given on the command line


@dataclass(frozen=True)
class RunResult:
    val_losses: dict[int, float]
    train_time_ms: float
    log_path: str | None
    metrics_path: str | None


# ---------------------------------------------------------------------------------------------
# Command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torch_ref.train",
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
    return parser


def _torchrun_world_size() -> int | None:
    return int(os.environ["WORLD_SIZE"]) if "RANK" in os.environ and "WORLD_SIZE" in os.environ else None


def parse_args(argv: Sequence[str] | None = None) -> tuple[cfg.Preset, RunOptions]:
    """Command line -> (preset with overrides applied, run options). Raises ValueError on bad values."""
    args = build_parser().parse_args(argv)
    preset = cfg.get_preset(args.preset)
    torchrun_world = _torchrun_world_size()
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
    }
    train = cfg.replace(preset.train, devices=devices, **{k: v for k, v in train_overrides.items() if v is not None})
    model = preset.model if args.dtype is None else cfg.replace(preset.model, dtype_policy=args.dtype)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA device")
    options = RunOptions(
        device=device, init_from=args.init_from, head_dim=args.head_dim, save_checkpoint=args.save_checkpoint,
        log_dir=args.log_dir, resume=args.resume, run_id=args.run_id,
        overridden=tuple(name for name in ("checkpoint_every", "keep_checkpoints") if getattr(args, name) is not None),
    )
    return dataclasses.replace(preset, model=model, train=train), options


def check_run(preset: cfg.Preset, options: RunOptions, start_step: int = 0,
              position: tuple[int, int] = (0, 0)) -> None:
    """Fail early, naming the problem, on inputs the loop could only trip over later. `preset`
    is the run's own (model dims from --init-from, cadence from --resume applied)."""
    train = preset.train
    world = train.devices
    if train.batch_tokens % (world * train.seq_len):
        raise ValueError(
            f"--batch-tokens {train.batch_tokens} is not divisible by devices * seq_len = {world} * {train.seq_len}"
        )
    if train.val_tokens % (world * train.seq_len):
        raise ValueError(f"--val-tokens {train.val_tokens} is not divisible by devices * seq_len = {world} * {train.seq_len}")
    train_shards = list_shards(train.train_files)  # raises NoShardsError naming the pattern
    val_shards = list_shards(train.val_files) if train.val_tokens else []
    # Every shard the run can reach serves one batch on its own: a short one fails here, not
    # when the stream reaches it after minutes of training.
    for shard in train_shards if train.cycle_data else train_shards[position[0]:]:
        check_holds_one_batch(shard, read_shard_header(shard), train.batch_tokens)
    for shard in val_shards:
        check_holds_one_batch(shard, read_shard_header(shard), world * train.seq_len)
    available = batches_available(train_shards, train.batch_tokens, position)
    needed = train.steps - start_step
    if not train.cycle_data and available < needed:
        raise ValueError(f"{train.train_files!r} holds {available} batches of {train.batch_tokens} tokens; "
                         f"{train.steps} steps need {needed}" + (f" from step {start_step}" if start_step else ""))
    if train.val_tokens:
        val_batch = world * train.seq_len
        available = batches_available(val_shards, val_batch)
        if available < train.val_tokens // val_batch:
            raise ValueError(f"{train.val_files!r} holds {available} batches of {val_batch} tokens; "
                             f"--val-tokens {train.val_tokens} needs {train.val_tokens // val_batch}")
    check_token_ids(train_shards + val_shards, preset.model.vocab_size)
    if options.device == "cuda" and world > torch.cuda.device_count() and _torchrun_world_size() is None:
        raise ValueError(f"--devices {world} but only {torch.cuda.device_count()} CUDA devices are visible")
    check_outputs(preset, options)


def check_writable(directory: Path, what: str) -> None:
    """Create `directory` if needed and prove a file can be written there; ValueError otherwise
    (checked before the first step, so no trained state is lost to a bad path at the end)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-test-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise ValueError(f"{what} {directory} is not writable: {error.strerror or error}") from None


def check_outputs(preset: cfg.Preset, options: RunOptions) -> None:
    """Every place the run writes to: the log folder, the checkpoint folder, --save-checkpoint's
    folder (and --save-checkpoint does not name a folder)."""
    check_writable(log_directory(preset, options), "--log-dir" if options.log_dir else "--out-dir")
    directory = checkpoint_directory(preset, options)
    if directory is not None:
        check_writable(directory, "--resume folder" if options.resume else "checkpoint folder")
    if options.save_checkpoint is not None:
        target = Path(options.save_checkpoint)
        if target.is_dir():
            raise ValueError(f"--save-checkpoint {target} is a directory; give a file path such as {target / 'final.pt'}")
        check_writable(target.parent, "--save-checkpoint folder")


def log_directory(preset: cfg.Preset, options: RunOptions) -> Path:
    return Path(options.log_dir) if options.log_dir is not None else Path(preset.train.out_dir) / "logs"


def checkpoint_directory(preset: cfg.Preset, options: RunOptions) -> Path | None:
    """Where the run's <step>.pt files go: the --resume folder, else <out_dir>/checkpoints/<run
    id> when --checkpoint-every asks for any, else None (--save-checkpoint PATH is separate)."""
    if options.resume is not None and Path(options.resume).is_dir():
        return Path(options.resume)
    if preset.train.checkpoint_every > 0:
        return Path(preset.train.out_dir) / "checkpoints" / (options.run_id or "unnamed")
    return None


def check_token_ids(shards: Sequence[Path], vocab_size: int) -> None:
    """Every token id of every shard is below `vocab_size` (one max over each memmap), else a
    ValueError naming the shard, its largest id and the vocabulary (not an IndexError deep in
    the embedding)."""
    for shard in shards:
        tokens = read_shard(shard)
        largest = int(tokens.max()) if len(tokens) else -1
        if largest >= vocab_size:
            raise ValueError(f"{shard}: token id {largest} is outside the model's vocabulary of {vocab_size} "
                             "(were these shards made with another tokenizer?)")


def batches_available(shards: Sequence[Path], batch_tokens: int, position: tuple[int, int] = (0, 0)) -> int:
    """Batches the record's generator takes from `shards`, starting at `position` = (shard
    index, pos), before running out: a shard of n tokens serves batches at pos = p0, p0 + B, ...
    while pos + B + 1 < n (RECORD.md 8.3; p0 = 0 except in the starting shard)."""
    total = 0
    first, start_pos = position
    for index, shard in enumerate(shards[first:], start=first):
        num_tokens, pos = read_shard_header(shard), start_pos if index == first else 0
        if pos + batch_tokens + 1 < num_tokens:
            total += (num_tokens - pos - batch_tokens - 2) // batch_tokens + 1
    return total


# ---------------------------------------------------------------------------------------------
# Model, checkpoints


def model_config_from_state_dict(base: cfg.ModelConfig, state_dict: dict[str, Tensor], head_dim: int) -> cfg.ModelConfig:
    """`base` with vocab, width, depth, heads and attention-free layers read off a record state dict.

    D = embed.weight.shape[1], vocab = its rows, layers = the number of `blocks.i`, heads =
    D // head_dim; a block without `attn.qkv_w` (or `attn.q_w`...) is attention-free (layer 7 in
    the record); qkv_layout is the state dict's.
    """
    if "embed.weight" not in state_dict:
        raise ValueError("checkpoint state dict has no 'embed.weight'; not a record-format model")
    vocab_size, model_dim = state_dict["embed.weight"].shape
    layers = sorted({int(key.split(".")[1]) for key in state_dict if key.startswith("blocks.")})
    if not layers or layers != list(range(len(layers))):
        raise ValueError(f"checkpoint blocks are not numbered 0..n-1: {layers}")
    if model_dim % head_dim:
        raise ValueError(f"model_dim {model_dim} from the checkpoint is not divisible by --head-dim {head_dim}")
    has_attention = {i for i in layers for name in ("qkv_w", "q_w") if f"blocks.{i}.attn.{name}" in state_dict}
    attention_free = tuple(i for i in layers if i not in has_attention)
    separate = any(f"blocks.{i}.attn.q_w" in state_dict for i in layers)
    return cfg.replace(
        base,
        qkv_layout="separate" if separate else "merged" if has_attention else base.qkv_layout,
        vocab_size=int(vocab_size),
        model_dim=int(model_dim),
        num_layers=len(layers),
        num_heads=int(model_dim) // head_dim,
        attention_free_layers=attention_free,
    )


def build_model(model_config: cfg.ModelConfig, local_tokens: int, seed: int,
                init_state: dict[str, Tensor] | None, device: torch.device) -> GPT:
    """The record's GPT on `device` under the config's dtype policy, from a seed or a state dict.

    Built in fp32 on the CPU (so a seed gives the same init on any device), then moved; under the
    "record" policy the embedding tables become bf16 and training uses the FP8 head.
    """
    torch.manual_seed(seed)
    fp8 = model_config.dtype_policy == "record"
    model = GPT(
        model_config.vocab_size, model_config.num_layers, model_config.num_heads, model_config.model_dim,
        fp8_head=fp8,
        # 2^29 suits a rank-level mean over 65,536 tokens; keep the quantised gradients the same.
        fp8_grad_scale=model_config.fp8_grad_scale * local_tokens / RECORD_RANK_TOKENS,
        rotary_max_len=model_config.rope_max_len,
        eot_id=model_config.eot_id,
        value_embed_slots=model_config.value_embed_slots,
        long_window_layers=model_config.long_window_layers,
        attention_free_layers=model_config.attention_free_layers,
        qkv_layout=model_config.qkv_layout,
    )
    if fp8:
        cast_embeddings_to_bf16(model)
    if init_state is not None:
        load_record_state_dict(model, init_state)  # casts to the model's dtypes
    return model.to(device)


def load_checkpoint_state(path: str) -> dict[str, Tensor]:
    """The model state dict of a record-format checkpoint, prefixes stripped, on the CPU."""
    return strip_compile_prefix(ckpt.read_checkpoint(path, "--init-from checkpoint")["model"])


def run_preset(preset: cfg.Preset, options: RunOptions, init_state: dict[str, Tensor] | None,
               resumed: dict[str, Any] | None, resume_path: Path | None) -> cfg.Preset:
    """The config the run trains: model dims read off the --init-from state, the saved
    checkpoint cadence kept on --resume (unless given again); a resumed run whose config differs
    from the saved one is refused, listing the fields."""
    if init_state is not None:
        head_dim = options.head_dim or preset.model.head_dim
        preset = dataclasses.replace(preset, model=model_config_from_state_dict(preset.model, init_state, head_dim))
    if resumed is not None:
        for key in ("config", "step", "optimizers", "schedulers", "data_position"):
            if key not in resumed:
                raise ValueError(f"{resume_path} holds no {key!r}: it has weights only (written by the record or an "
                                 "older torch_ref); start from it with --init-from instead of --resume")
        preset = ckpt.keep_saved_cadence(preset, resumed["config"], options.overridden)
        ckpt.refuse_config_change(resumed["config"], ckpt.config_dict(preset), resume_path)
    return preset


def read_resume(options: RunOptions) -> tuple[dict[str, Any] | None, Path | None]:
    """(the --resume checkpoint, its file), or (None, None) without --resume."""
    if options.resume is None:
        return None, None
    path = ckpt.resume_file(options.resume)
    return ckpt.read_checkpoint(path, "--resume checkpoint"), path


def checkpoint_payload(model: nn.Module, optimizers: tuple[torch.optim.Optimizer, ...], schedulers: Sequence[Any],
                       step: int, position: tuple[int, int], preset: cfg.Preset, control: Any | None) -> dict[str, Any]:
    """The record's {'model', 'optimizers', 'step'} and what resuming needs (torch_ref.checkpoint).
    A collective when several ranks run (Muon's momentum buffers are gathered)."""
    return dict(
        step=step,
        model=model.state_dict(),
        optimizers=ckpt.optimizer_states(optimizers, control),
        schedulers=[sched.state_dict() for sched in schedulers],
        data_position={"shard_index": position[0], "pos": position[1]},
        config=ckpt.config_dict(preset),
    )


# ---------------------------------------------------------------------------------------------
# Logging and timing


def timed_steps(step: int) -> float:
    """The record's step count for averages: NaN through step 11, then step - 9."""
    return float("nan") if step <= CLOCK_RESET_STEP + 1 else float(step - CLOCK_RESET_STEP + 1)


def val_line(step: int, total: int, loss: float, train_time_ms: float) -> str:
    avg = train_time_ms / (timed_steps(step) - 1)
    return f"step:{step}/{total} val_loss:{loss:.4f} train_time:{train_time_ms:.0f}ms step_avg:{avg:.2f}ms"


def train_line(step: int, total: int, train_time_ms: float) -> str:
    """Logged after the update made at `step`; shows step + 1 as the record does."""
    avg = train_time_ms / timed_steps(step)
    return f"step:{step + 1}/{total} train_time:{train_time_ms:.0f}ms step_avg:{avg:.2f}ms"


class TrainClock:
    """Accumulated training wall time in ms; paused around validation (device synchronised)."""

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self.reset()

    def _sync(self) -> None:
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)

    def reset(self) -> None:
        self._sync()
        self._accumulated_ms = 0.0
        self._start = time.perf_counter()

    def pause(self) -> float:
        self._sync()
        self._accumulated_ms += 1000 * (time.perf_counter() - self._start)
        return self._accumulated_ms

    def resume(self) -> None:
        self._sync()
        self._start = time.perf_counter()

    def elapsed_ms(self) -> float:
        """Without a sync, as the record's train line (an approximate time)."""
        return self._accumulated_ms + 1000 * (time.perf_counter() - self._start)


class RunLog:
    """Rank 0 writes `<log_dir>/<run id>.txt` and prints the step lines; other ranks stay silent.

    Metrics go to `<log_dir>/<run id>.jsonl` in jaxgpt's schema (one object per line:
    framework, run_id, kind "train" or "val", step, train_loss or val_loss, train_time_ms,
    step_avg_ms, window_blocks), so that scripts/plot_runs.py reads both trainers' runs."""

    def __init__(self, log_dir: str | os.PathLike, run_id: str, enabled: bool) -> None:
        self.path = self.metrics_path = None
        if enabled:
            os.makedirs(log_dir, exist_ok=True)
            self.run_id = run_id
            self.path = os.path.join(log_dir, f"{self.run_id}.txt")
            self.metrics_path = os.path.join(log_dir, f"{self.run_id}.jsonl")
            print(self.path, flush=True)

    def metrics(self, **record: Any) -> None:
        if self.metrics_path is None:
            return
        with open(self.metrics_path, "a") as f:
            print(json.dumps({"framework": "torch_ref", "run_id": self.run_id, **record}), file=f)

    def write(self, line: str, console: bool = False) -> None:
        if self.path is None:
            return
        with open(self.path, "a") as f:
            print(line, file=f)
        if console:
            print(line, flush=True)


def environment_lines(device: torch.device) -> list[str]:
    lines = [f"Running Python {sys.version}", f"Running PyTorch {torch.__version__} compiled for CUDA {torch.version.cuda}"]
    if device.type == "cuda":
        smi = subprocess.run(["nvidia-smi"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines.append(smi.stdout)
    else:
        lines.append(f"CPU run: {os.cpu_count()} cores visible, {torch.get_num_threads()} torch threads per process")
    return lines


def write_train_metrics(log: RunLog, pending: list[tuple[int, Tensor, float, int]], world_size: int) -> None:
    """Metrics of the updates since the last call: (step, loss tensor, train_time_ms, window).
    Written at each validation and at the end, so that logging adds no device sync per step;
    the losses are averaged over the ranks (one all-reduce per call), as jaxgpt logs them."""
    if not pending:
        return
    losses = torch.stack([loss for _, loss, _, _ in pending])
    if world_size > 1:
        dist.all_reduce(losses, op=dist.ReduceOp.AVG)
    for (step, _, train_time_ms, window), loss in zip(pending, losses.tolist()):
        log.metrics(kind="train", step=step + 1, train_loss=loss, train_time_ms=train_time_ms,
                    step_avg_ms=train_time_ms / timed_steps(step), window_blocks=window)
    pending.clear()


def write_header(log: RunLog, preset: cfg.Preset, options: RunOptions, device: torch.device) -> None:
    """The log's preamble: the run's full config as JSON, then the environment, between '=' lines."""
    log.write(json.dumps({"preset": dataclasses.asdict(preset), "options": dataclasses.asdict(options)}, indent=1))
    log.write("=" * 100)
    for line in environment_lines(device):
        log.write(line)
    log.write("=" * 100)


# ---------------------------------------------------------------------------------------------
# Steps


def window_argument(window: int, device: torch.device) -> int | Tensor:
    """W_long as the model's argument: a 0-d int32 device tensor on CUDA, as the record passes it
    (a compiled model then does not specialise on each value), a plain int elsewhere."""
    if device.type == "cuda":
        return torch.tensor(window, dtype=torch.int32, device=device)
    return window


def forward_backward(model: nn.Module, inputs: Tensor, targets: Tensor, seq_len: int, window: int | Tensor) -> Tensor:
    """This rank's tokens (Bl,) as Bl / seq_len sequences, gradients averaged over them.

    Returns the mean loss as a detached fp32 scalar (no host sync, as the record's loop)."""
    num_seqs = inputs.numel() // seq_len
    total = torch.zeros((), device=inputs.device)
    for input_seq, target_seq in zip(inputs.split(seq_len), targets.split(seq_len)):
        loss = model(input_seq, target_seq, window)
        (loss / num_seqs).backward()
        total += loss.detach()
    return total / num_seqs


def average_gradients(model: nn.Module, world_size: int) -> None:
    """The record's manual data parallelism: every .grad all-reduced with AVG (bf16 stays bf16)."""
    if world_size == 1:
        return
    for param in model.parameters():
        dist.all_reduce(param.grad, op=dist.ReduceOp.AVG)


@torch.no_grad()
def evaluate(model: nn.Module, train_cfg: cfg.TrainConfig, window: int | Tensor, rank: int, world_size: int,
             device: torch.device) -> float:
    """Mean val loss over the first val_tokens tokens (one seq_len sequence per rank per batch)."""
    model.eval()
    batches = val_batches(train_cfg.val_files, train_cfg.val_tokens, world_size * train_cfg.seq_len, rank, world_size,
                          device=device)
    losses = [model(inputs, targets, window) for inputs, targets in batches]
    val_loss = torch.stack(losses).mean()
    if world_size > 1:
        dist.all_reduce(val_loss, op=dist.ReduceOp.AVG)
    model.train()
    return val_loss.item()


# ---------------------------------------------------------------------------------------------
# The run


def train(preset: cfg.Preset, options: RunOptions, rank: int = 0, world_size: int = 1) -> RunResult:
    """One rank's whole run; torch.distributed must already be initialised when world_size > 1."""
    options = with_run_id(options)
    device = _rank_device(options.device, rank)
    control = _control_group(options.device, world_size)
    init_state = load_checkpoint_state(options.init_from) if options.init_from else None
    resumed, resume_path = read_resume(options)
    preset = run_preset(preset, options, init_state, resumed, resume_path)
    train_cfg = preset.train
    log = RunLog(log_directory(preset, options), options.run_id, enabled=rank == 0)
    local_tokens = train_cfg.batch_tokens // world_size
    raw_model = build_model(preset.model, local_tokens, train_cfg.seed, init_state, device)
    if world_size > 1:  # every rank starts from rank 0's weights, as the record
        for param in raw_model.parameters():
            dist.broadcast(param.detach(), 0)
    model = torch.compile(raw_model) if device.type == "cuda" else raw_model
    optimizers = build_optimizers(raw_model, preset.optim, rank, world_size)
    # steps == 0 only validates the initial model (with the step-0 window).
    schedule_steps = max(train_cfg.steps, 1)
    schedulers = build_lr_schedulers(optimizers, schedule_steps, preset.optim)
    start_step, position = 0, (0, 0)
    if resumed is not None:  # every rank reads the same file: no broadcast needed
        raw_model.load_state_dict(strip_compile_prefix(resumed["model"]))
        ckpt.load_optimizer_states(optimizers, resumed["optimizers"])
        for sched, state in zip(schedulers, resumed["schedulers"], strict=True):
            sched.load_state_dict(state)
        start_step = int(resumed["step"])
        position = (int(resumed["data_position"]["shard_index"]), int(resumed["data_position"]["pos"]))
        del resumed
    write_header(log, preset, options, device)

    steps, val_losses, pending_metrics = train_cfg.steps, {}, []
    directory = checkpoint_directory(preset, options)
    train_batches = distributed_data_generator(train_cfg.train_files, train_cfg.batch_tokens, rank, world_size,
                                               cycle=train_cfg.cycle_data, device=device, position=position)

    def save(step: int, *, to_folder: bool, to_path: bool) -> list[Path]:
        """Write the state after `step` updates (every rank joins; rank 0 writes)."""
        to_folder, to_path = to_folder and directory is not None, to_path and options.save_checkpoint is not None
        if not (to_folder or to_path):
            return []
        payload = checkpoint_payload(raw_model, optimizers, schedulers, step, train_batches.position, preset, control)
        if rank != 0:
            return []
        written = [ckpt.save_step(directory, step, payload, train_cfg.keep_checkpoints)] if to_folder else []
        return written + ([ckpt.write_atomically(payload, options.save_checkpoint)] if to_path else [])

    clock = TrainClock(device)
    with StopRequest(announce=rank == 0) as stop:
        for step in range(start_step, steps + 1):
            signum = agreed_signal(stop, control)
            if signum is not None:  # the model holds `step` updates: save them, then stop
                written = save(step, to_folder=True, to_path=True) if step != start_step else []
                raise Interrupted(signum, interrupted_message(signum, step, written, directory, options))
            last_step = step == steps
            if step == CLOCK_RESET_STEP:
                clock.reset()
            blocks = window_blocks(step, schedule_steps, train_cfg.window_max_tokens)[0]
            window = window_argument(blocks, device)
            if train_cfg.val_tokens and (last_step or step % train_cfg.val_every == 0):
                train_time_ms = clock.pause()
                val_losses[step] = evaluate(model, train_cfg, window, rank, world_size, device)
                log.write(val_line(step, steps, val_losses[step], train_time_ms), console=True)
                write_train_metrics(log, pending_metrics, world_size)
                log.metrics(kind="val", step=step, val_loss=val_losses[step], train_time_ms=train_time_ms,
                            step_avg_ms=train_time_ms / (timed_steps(step) - 1), window_blocks=blocks)
                clock.resume()
            if ckpt.is_due(step, start_step, train_cfg, save_final=False):
                clock.pause()
                save(step, to_folder=True, to_path=False)
                clock.resume()
            if last_step:
                break
            inputs, targets = next(train_batches)
            loss = forward_backward(model, inputs, targets, train_cfg.seq_len, window)
            average_gradients(raw_model, world_size)
            set_muon_momentum(optimizers[1], step, preset.optim)
            for opt, sched in zip(optimizers, schedulers):
                opt.step()
                sched.step()
            raw_model.zero_grad(set_to_none=True)
            train_time_ms = clock.elapsed_ms()
            log.write(train_line(step, steps, train_time_ms), console=True)
            pending_metrics.append((step, loss, train_time_ms, blocks))
    total_train_ms = clock.pause()
    write_train_metrics(log, pending_metrics, world_size)

    if device.type == "cuda":
        log.write(f"peak memory allocated: {torch.cuda.max_memory_allocated() // 1024 // 1024} MiB "
                  f"reserved: {torch.cuda.max_memory_reserved() // 1024 // 1024} MiB", console=True)
    save(steps, to_folder=False, to_path=True)  # the final state (the initial one with --steps 0)
    return RunResult(val_losses=val_losses, train_time_ms=total_train_ms, log_path=log.path,
                     metrics_path=log.metrics_path)


def interrupted_message(signum: int, step: int, written: list[Path], directory: Path | None,
                        options: RunOptions) -> str:
    """One line: where the state of the last completed step is, and how to continue from it."""
    head = f"interrupted by {signal.Signals(signum).name} at step {step}; "
    if written:
        target = directory if directory is not None else written[0]
        return head + f"the state after step {step} is in {target} (continue with --resume {target})"
    if options.resume is not None:
        return head + f"no step was completed since the start; {options.resume} still holds step {step}"
    return head + "no checkpoint was written (checkpointing is off: --checkpoint-every K or --save-checkpoint PATH)"


def with_run_id(options: RunOptions) -> RunOptions:
    return options if options.run_id is not None else dataclasses.replace(options, run_id=str(uuid.uuid4()))


def _control_group(device_type: str, world_size: int) -> Any | None:
    """A CPU (gloo) process group for the per-step stop flag and checkpoint gathers, so that
    neither waits on the accelerator; None for a single process."""
    if world_size == 1:
        return None
    return dist.group.WORLD if device_type == "cpu" else dist.new_group(backend="gloo")


def _rank_device(device_type: str, rank: int) -> torch.device:
    if device_type == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _init_process_group(device_type: str, rank: int, world_size: int, init_method: str | None) -> None:
    backend = "nccl" if device_type == "cuda" else "gloo"
    kwargs: dict[str, Any] = {}
    if device_type == "cuda":
        kwargs["device_id"] = _rank_device(device_type, rank)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size, **kwargs)
    dist.barrier()


def _spawned_rank(rank: int, world_size: int, preset: cfg.Preset, options: RunOptions, init_method: str) -> None:
    # Out of the terminal's process group: the parent forwards a signal once (a Ctrl-C would
    # otherwise reach every rank, then again through the parent, and abandon the step).
    os.setpgrp()
    # Share the CPU cores between the processes instead of oversubscribing them.
    if options.device == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    _init_process_group(options.device, rank, world_size, init_method)
    try:
        train(preset, options, rank, world_size)
    except Interrupted as interrupted:
        if rank == 0:
            print(interrupted, file=sys.stderr, flush=True)
        sys.exit(interrupted.exit_code)
    except RUNTIME_ERRORS as err:
        if rank == 0:
            print(f"torch_ref.train: error: {err}", file=sys.stderr, flush=True)
        sys.exit(1)
    finally:
        dist.destroy_process_group()


def _spawn(world_size: int, preset: cfg.Preset, options: RunOptions) -> None:
    """`world_size` CPU/GPU processes on this host; SIGINT/SIGTERM are passed on to them once.
    Raises mp.ProcessExitedException carrying a rank's exit code when one fails."""
    with tempfile.TemporaryDirectory() as rendezvous, StopRequest(announce=False) as stop:
        init_method = f"file://{os.path.join(rendezvous, 'store')}"
        context = mp.spawn(_spawned_rank, args=(world_size, preset, options, init_method), nprocs=world_size,
                           join=False)
        forwarded = False
        while not context.join(timeout=0.5):
            if stop.signum is not None and not forwarded:
                forwarded = True
                for process in context.processes:
                    if process.is_alive():
                        os.kill(process.pid, stop.signum)


def run(preset: cfg.Preset, options: RunOptions) -> RunResult | None:
    """Run under torchrun (env RANK/WORLD_SIZE), as `devices` spawned processes, or in this process.

    Returns rank 0's result when it ran in this process, else None.
    """
    options = with_run_id(options)
    init_state = load_checkpoint_state(options.init_from) if options.init_from else None
    resumed, resume_path = read_resume(options)
    start_step, position = 0, (0, 0)
    if resumed is not None:
        start_step = int(resumed.get("step", 0))
        saved_position = resumed.get("data_position", {})
        position = (int(saved_position.get("shard_index", 0)), int(saved_position.get("pos", 0)))
        for leftover in ckpt.leftover_tmp_files(resume_path.parent) if Path(options.resume).is_dir() else ():
            print(f"warning: ignoring {leftover}: an unfinished save of a run that was killed (never restored; "
                  "delete it to reclaim the space)", file=sys.stderr)
    run_config = run_preset(preset, options, init_state, resumed, resume_path)
    del init_state, resumed
    check_run(run_config, options, start_step, position)
    if (checkpoint_directory(run_config, options) is None and options.save_checkpoint is None
            and run_config.train.steps > start_step and int(os.environ.get("RANK", 0)) == 0):
        print("note: this run writes no checkpoint (pass --checkpoint-every K or --save-checkpoint PATH to keep its "
              "state)", file=sys.stderr)
    world_size = preset.train.devices
    if _torchrun_world_size() is not None:
        rank = int(os.environ["RANK"])
        _init_process_group(options.device, rank, world_size, None)
        try:
            result = train(preset, options, rank, world_size)
        finally:
            dist.destroy_process_group()
        return result if rank == 0 else None
    if world_size == 1:
        return train(preset, options)
    _spawn(world_size, preset, options)
    return None


RUNTIME_ERRORS = (ValueError, OSError, ShardsExhaustedError)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry, with jaxgpt.train's convention: 2 for a usage error (bad flag or value),
    1 for a runtime error (data, checkpoint, devices, paths), 128 + the signal for SIGINT (130)
    and SIGTERM (143); one line each."""
    try:
        preset, options = parse_args(argv)
    except ValueError as err:
        print(f"torch_ref.train: error: {err}", file=sys.stderr)
        return 2
    try:
        run(preset, options)
    except Interrupted as interrupted:
        if int(os.environ.get("RANK", 0)) == 0:
            print(interrupted, file=sys.stderr)
        return interrupted.exit_code
    except mp.ProcessExitedException as exited:  # a spawned rank's code; rank 0 printed why
        return exited.exit_code if exited.exit_code > 0 else 1
    except RUNTIME_ERRORS as err:
        print(f"torch_ref.train: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
