"""Train the record's GPT in PyTorch: `python -m torch_ref.train` (RECORD.md sections 7-9).

    torchrun --standalone --nproc_per_node 8 -m torch_ref.train            # the record, 8 GPUs
    python -m torch_ref.train --preset tiny --device cpu                   # one CPU process
    python -m torch_ref.train --preset tiny --device cpu --devices 2       # two gloo processes

Defaults are the record's: 1393 steps of 524,288 tokens (65,536 per rank), validation every 125
steps over 10,485,760 tokens, the record's iteration order, log lines and timing (the first 10
steps and validation excluded). A process handling several `seq_len` sequences per step runs them
one after another and averages their gradients, which equals the record's per-rank mean loss
followed by the AVG all-reduce over ranks.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
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
from torch_ref.data import (ShardsExhaustedError, distributed_data_generator, list_shards, read_shard, read_shard_header,
                            val_batches)
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
    save_checkpoint: str | None = None
    log_dir: str = "logs"


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
    parser.add_argument("--save-checkpoint", metavar="PATH", help="after training, save {'model', 'optimizers', 'step', 'config'} here")
    parser.add_argument("--log-dir", default="logs", help="where rank 0 writes <uuid>.txt (default: logs)")
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
    }
    train = cfg.replace(preset.train, devices=devices, **{k: v for k, v in train_overrides.items() if v is not None})
    model = preset.model if args.dtype is None else cfg.replace(preset.model, dtype_policy=args.dtype)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA device")
    options = RunOptions(
        device=device, init_from=args.init_from, head_dim=args.head_dim,
        save_checkpoint=args.save_checkpoint, log_dir=args.log_dir,
    )
    return dataclasses.replace(preset, model=model, train=train), options


def check_run(preset: cfg.Preset, options: RunOptions) -> None:
    """Fail early, naming the problem, on inputs the loop could only trip over later."""
    train = preset.train
    world = train.devices
    if train.batch_tokens % (world * train.seq_len):
        raise ValueError(
            f"--batch-tokens {train.batch_tokens} is not divisible by devices * seq_len = {world} * {train.seq_len}"
        )
    if train.val_tokens % (world * train.seq_len):
        raise ValueError(f"--val-tokens {train.val_tokens} is not divisible by devices * seq_len = {world} * {train.seq_len}")
    train_shards = list_shards(train.train_files)  # raises NoShardsError naming the pattern
    available = batches_available(train_shards, train.batch_tokens)
    if not train.cycle_data and available < train.steps:
        raise ValueError(f"{train.train_files!r} holds {available} batches of {train.batch_tokens} tokens; "
                         f"{train.steps} steps need {train.steps}")
    if train.val_tokens:
        val_batch = world * train.seq_len
        available = batches_available(list_shards(train.val_files), val_batch)
        if available < train.val_tokens // val_batch:
            raise ValueError(f"{train.val_files!r} holds {available} batches of {val_batch} tokens; "
                             f"--val-tokens {train.val_tokens} needs {train.val_tokens // val_batch}")
    check_token_ids(train_shards + (list_shards(train.val_files) if train.val_tokens else []), preset.model.vocab_size)
    if options.init_from is not None and not Path(options.init_from).is_file():
        raise FileNotFoundError(f"--init-from checkpoint not found: {options.init_from}")
    if options.device == "cuda" and world > torch.cuda.device_count() and _torchrun_world_size() is None:
        raise ValueError(f"--devices {world} but only {torch.cuda.device_count()} CUDA devices are visible")


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


def batches_available(shards: Sequence[Path], batch_tokens: int) -> int:
    """Batches the record's generator takes from `shards` before running out: a shard of n
    tokens serves batches at pos = 0, B, 2B, ... while pos + B + 1 < n (RECORD.md 8.3)."""
    total = 0
    for shard in shards:
        num_tokens = read_shard_header(shard)
        if batch_tokens + 1 < num_tokens:
            total += (num_tokens - batch_tokens - 2) // batch_tokens + 1
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


def save_checkpoint(path: str, model: nn.Module, optimizers: Sequence[torch.optim.Optimizer], step: int,
                    preset: cfg.Preset) -> None:
    """The record's checkpoint layout: {'model': state_dict, 'optimizers': [...], 'step', ...}."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    checkpoint = dict(
        step=step,
        model=model.state_dict(),
        optimizers=[opt.state_dict() for opt in optimizers],
        config=dataclasses.asdict(preset),
    )
    torch.save(checkpoint, path)


def load_checkpoint_state(path: str) -> dict[str, Tensor]:
    """The model state dict of a record-format checkpoint, prefixes stripped, on the CPU."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(checkpoint, dict) or "model" not in checkpoint:
        raise ValueError(f"{path} is not a record-format checkpoint (a dict with a 'model' state dict)")
    return strip_compile_prefix(checkpoint["model"])


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
    """Rank 0 writes `<log_dir>/<uuid>.txt` and prints the step lines; other ranks stay silent.

    Metrics go to `<log_dir>/<uuid>.jsonl` in jaxgpt's schema (one object per line:
    framework, run_id, kind "train" or "val", step, train_loss or val_loss, train_time_ms,
    step_avg_ms, window_blocks), so that scripts/plot_runs.py reads both trainers' runs."""

    def __init__(self, log_dir: str, enabled: bool) -> None:
        self.path = self.metrics_path = None
        if enabled:
            os.makedirs(log_dir, exist_ok=True)
            self.run_id = str(uuid.uuid4())
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
    train_cfg, device = preset.train, _rank_device(options.device, rank)
    log = RunLog(options.log_dir, enabled=rank == 0)
    init_state = load_checkpoint_state(options.init_from) if options.init_from else None
    if init_state is not None:
        head_dim = options.head_dim or preset.model.head_dim
        preset = dataclasses.replace(preset, model=model_config_from_state_dict(preset.model, init_state, head_dim))
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
    write_header(log, preset, options, device)

    steps, val_losses, pending_metrics = train_cfg.steps, {}, []
    train_batches = distributed_data_generator(train_cfg.train_files, train_cfg.batch_tokens, rank, world_size,
                                               cycle=train_cfg.cycle_data, device=device)
    clock = TrainClock(device)
    for step in range(steps + 1):
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
    if options.save_checkpoint and rank == 0:
        save_checkpoint(options.save_checkpoint, raw_model, optimizers, steps, preset)
    return RunResult(val_losses=val_losses, train_time_ms=total_train_ms, log_path=log.path,
                     metrics_path=log.metrics_path)


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
    # Share the CPU cores between the processes instead of oversubscribing them.
    if options.device == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    _init_process_group(options.device, rank, world_size, init_method)
    try:
        train(preset, options, rank, world_size)
    finally:
        dist.destroy_process_group()


def run(preset: cfg.Preset, options: RunOptions) -> RunResult | None:
    """Run under torchrun (env RANK/WORLD_SIZE), as `devices` spawned processes, or in this process.

    Returns rank 0's result when it ran in this process, else None.
    """
    check_run(preset, options)
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
    with tempfile.TemporaryDirectory() as rendezvous:
        init_method = f"file://{os.path.join(rendezvous, 'store')}"
        mp.spawn(_spawned_rank, args=(world_size, preset, options, init_method), nprocs=world_size, join=True)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry, with jaxgpt.train's convention: 2 for a usage error (bad flag or value),
    1 for a runtime error (data, checkpoint, devices), one `error:` line each."""
    try:
        preset, options = parse_args(argv)
    except ValueError as err:
        print(f"torch_ref.train: error: {err}", file=sys.stderr)
        return 2
    try:
        run(preset, options)
    except (ValueError, FileNotFoundError, ShardsExhaustedError) as err:
        print(f"torch_ref.train: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
