"""What a torch_ref run reports: the training clock, the record's log lines, JSONL metrics, the header.

Rank 0 writes `<log_dir>/<run id>.txt` (the record's step lines, also printed on stdout, after a
header with the config, the options and the environment) and `<log_dir>/<run id>.jsonl` (one
JSON object per logged step, jaxgpt's schema; with `--tensorboard DIR` the same numbers also as
TensorBoard scalars in `DIR/<run id>/`). The record's lines, its timing (the clock reset at
step 10, compilation excluded, and paused around validation and checkpoint saves) and the
non-finite loss error are runkit.runlog's, jaxgpt's too; this module is jaxgpt.run.runlog's twin.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

import runkit.runlog
import torch_ref.config as cfg
from runkit.full_disk import append_line
from runkit.runlog import add_scalars, metrics_line, train_step_avg_ms
from torch_ref.run.claim import log_directory as log_directory  # where it is decided, before torch
from torch_ref.run.cli import RunOptions


class LossWatch:
    """Each update's loss (a 0-d device tensor), read on the host once the device has it, so
    that checking it for NaN / inf adds no wait per step: on CUDA each loss is copied into
    pinned memory without blocking and `first_nonfinite(wait=False)` reads only the copies
    whose event has completed (a step or two late); on the CPU the loss is already there."""

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._pending: list[tuple[int, Tensor, Any]] = []  # (update, loss on the host or the CPU, event)

    def add(self, step: int, loss: Tensor) -> None:
        if not self._cuda:
            self._pending.append((step, loss, None))
            return
        host = torch.empty((), dtype=loss.dtype, pin_memory=True)
        host.copy_(loss, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self._pending.append((step, host, event))

    def first_nonfinite(self, wait: bool) -> tuple[int, float] | None:
        """(update, loss) of the first NaN or infinite loss among those read now (all of them
        when `wait`: before a save or a validation, which wait for the device anyway)."""
        while self._pending:
            step, loss, event = self._pending[0]
            if event is not None and not (wait or event.query()):
                return None
            if event is not None:
                event.synchronize()
            self._pending.pop(0)
            value = float(loss)
            if not math.isfinite(value):
                return step, value
        return None


class TrainClock(runkit.runlog.TrainClock):
    """runkit's training clock, the CUDA device synchronised before it is reset, paused or restarted."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(sync=(lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None)


class RunLog:
    """Rank 0 writes `<log_dir>/<run id>.txt` and prints the step lines; other ranks stay silent.

    Metrics go to `<log_dir>/<run id>.jsonl` in jaxgpt's schema (one object per line:
    framework, run_id, kind "train" or "val", step, train_loss or val_loss, train_time_ms,
    step_avg_ms, window_blocks), so that scripts/plot_runs.py reads both trainers' runs."""

    def __init__(self, log_dir: str | os.PathLike, run_id: str, enabled: bool, tensorboard_dir: str | None = None) -> None:
        self.path = self.metrics_path = self._tensorboard = None
        if enabled:
            os.makedirs(log_dir, exist_ok=True)
            self.run_id = run_id
            self.path = os.path.join(log_dir, f"{self.run_id}.txt")
            self.metrics_path = os.path.join(log_dir, f"{self.run_id}.jsonl")
            print(self.path, flush=True)
            if tensorboard_dir is not None:
                from tensorboardX import SummaryWriter

                self._tensorboard = SummaryWriter(os.path.join(tensorboard_dir, run_id))

    def metrics(self, **record: Any) -> None:
        if self.metrics_path is None:
            return
        append_line(Path(self.metrics_path), metrics_line("torch_ref", self.run_id, record))
        if self._tensorboard is not None:  # the same numbers
            add_scalars(self._tensorboard, record)

    def close(self) -> None:
        """Write the TensorBoard events still queued (tensorboardX also does at exit)."""
        if self._tensorboard is not None:
            self._tensorboard.close()

    def write(self, line: str, console: bool = False) -> None:
        if self.path is None:
            return
        append_line(Path(self.path), line)  # whole or not at all: runkit.full_disk.LogWriteError on a full disk
        if console:
            print(line, flush=True)


def environment_lines(device: torch.device) -> list[str]:
    lines = [f"Running Python {sys.version}", f"Running PyTorch {torch.__version__} compiled for CUDA {torch.version.cuda}"]
    if device.type == "cuda":
        smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True)
        lines.append(smi.stdout)
    else:
        lines.append(f"CPU run: {os.cpu_count()} cores visible, {torch.get_num_threads()} torch threads per process")
    return lines


def write_train_metrics(log: RunLog, pending: list[tuple[int, Tensor, float, dict[str, int]]], world_size: int) -> None:
    """Metrics of the updates since the last call: (step, loss tensor, train_time_ms, the window's
    fields: the lineage's `logged_window`).
    Written at each validation and at the end, so that logging adds no device sync per step;
    the losses are averaged over the ranks (one all-reduce per call), as jaxgpt logs them."""
    if not pending:
        return
    losses = torch.stack([loss for _, loss, _, _ in pending])
    if world_size > 1:
        dist.all_reduce(losses, op=dist.ReduceOp.AVG)
    for (step, _, train_time_ms, window), loss in zip(pending, losses.tolist(), strict=True):
        log.metrics(kind="train", step=step + 1, train_loss=loss, train_time_ms=train_time_ms,
                    step_avg_ms=train_step_avg_ms(step, train_time_ms), **window)
    pending.clear()


def write_header(log: RunLog, preset: cfg.Preset, options: RunOptions, device: torch.device) -> None:
    """The log's preamble: the run's full config as JSON, then the environment, between '=' lines."""
    log.write(json.dumps({"preset": dataclasses.asdict(preset), "options": dataclasses.asdict(options)}, indent=1))
    log.write("=" * 100)
    for line in environment_lines(device):
        log.write(line)
    log.write("=" * 100)
