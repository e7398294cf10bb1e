"""What a run reports: the record's log lines in its text log, JSONL metrics, the run header.

The text log `<out_dir>/logs/<run_id>.txt` holds the record's lines (also printed on stdout)
after a header with the config, the options and the environment (the record logs its own source
there instead); `<out_dir>/logs/<run_id>.jsonl` holds one JSON object per logged step, and with
`--tensorboard DIR` the same numbers go to TensorBoard event files in `DIR/<run_id>/`. Each
line goes into its file whole or not at all (runkit.full_disk.append_line: a full disk is one
LogWriteError, never half a JSONL record). The
record's lines, its timing (the clock reset at step 10, compilation excluded, and paused around
validation and checkpoint saves) and the non-finite loss error are runkit.runlog's, torch_ref's
too; torch_ref.run.runlog is this module's twin.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import flax
import jax
import jaxlib
import optax

from jaxgpt import config as cfg
from jaxgpt import config_json
from runkit.full_disk import append_line
from runkit.runlog import (
    CLOCK_RESET_STEP,
    add_scalars,
    metrics_line,
    train_line,
    train_step_avg_ms,
    val_line,
    val_step_avg_ms,
)


class RunLog:
    """The record's log lines on stdout and in the text log, metrics in the JSONL file, and a
    tqdm bar when stdout is a terminal. Only process 0 writes (`enabled=False` elsewhere)."""

    def __init__(self, out_dir: str, run_id: str, *, total_steps: int, start_step: int, progress: bool,
                 enabled: bool, tensorboard_dir: str | None = None) -> None:
        self.enabled = enabled
        self.run_id = run_id
        self.total_steps = total_steps
        self.clock_reset_step = start_step + CLOCK_RESET_STEP
        log_dir = Path(out_dir) / "logs"
        self.text_path = log_dir / f"{run_id}.txt"
        self.metrics_path = log_dir / f"{run_id}.jsonl"
        self._bar = self._tensorboard = None
        if not enabled:
            return
        log_dir.mkdir(parents=True, exist_ok=True)
        if tensorboard_dir is not None:
            from tensorboardX import SummaryWriter

            self._tensorboard = SummaryWriter(str(Path(tensorboard_dir) / run_id))
        if progress and sys.stdout.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True, leave=False)

    def write(self, line: str, *, console: bool = True) -> None:
        if not self.enabled:
            return
        append_line(self.text_path, line)  # whole or not at all: runkit.full_disk.LogWriteError on a full disk
        if console:
            if self._bar is not None:
                self._bar.write(line)
            else:
                print(line, flush=True)

    def metrics(self, **record: Any) -> None:
        """One JSON object per line, each naming its framework and run (the schema
        torch_ref.train also writes and scripts/plot_runs.py reads)."""
        if self.enabled:
            append_line(self.metrics_path, metrics_line("jaxgpt", self.run_id, record))
            if self._tensorboard is not None:  # the same numbers
                add_scalars(self._tensorboard, record)

    def val(self, step: int, loss: float, train_time_ms: float, window: Mapping[str, int]) -> None:
        """The val line of `step` and its metrics record; `window`: the attention's window
        (the lineage's `logged_window`: window_blocks, and #15's window_tokens)."""
        self.write(val_line(step, self.total_steps, loss, train_time_ms, self.clock_reset_step))
        self.metrics(kind="val", step=step, val_loss=loss, train_time_ms=train_time_ms,
                     step_avg_ms=val_step_avg_ms(step, train_time_ms, self.clock_reset_step), **window)

    def train(self, step: int, loss: float, train_time_ms: float, window: Mapping[str, int]) -> None:
        """The train line after the update made at `step` (shown as step + 1) and its metrics."""
        self.write(train_line(step, self.total_steps, train_time_ms, loss, self.clock_reset_step))
        self.metrics(kind="train", step=step + 1, train_loss=loss, train_time_ms=train_time_ms,
                     step_avg_ms=train_step_avg_ms(step, train_time_ms, self.clock_reset_step), **window)
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{loss:.4f}", refresh=False)

    def close(self) -> None:
        """Close the bar and the TensorBoard writer (the text and JSONL files are opened per line); safe twice."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
        self._bar = self._tensorboard = None


def environment_lines(devices: Sequence[Any]) -> list[str]:
    return [
        f"Running Python {sys.version}",
        f"Running JAX {jax.__version__} (jaxlib {jaxlib.__version__}), flax {flax.__version__}, optax {optax.__version__}",
        f"Backend {jax.default_backend()}; processes {jax.process_count()} (this is {jax.process_index()}); "
        f"devices used {len(devices)} of {jax.device_count()}: " + ", ".join(str(d) for d in devices),
        f"Host {platform.node()} {platform.platform()}",
    ]


def write_header(log: RunLog, preset: cfg.Preset, options: Any, devices: Sequence[Any], start_step: int) -> None:
    """Config, options (a dataclass) and environment at the top of the text log."""
    log.write(str(log.text_path))
    log.write("=" * 100, console=False)
    log.write("config: " + json.dumps(config_json.config_to_json(preset), sort_keys=True), console=False)
    log.write("options: " + json.dumps(dataclasses.asdict(options), sort_keys=True), console=False)
    if start_step:
        log.write(f"resumed at step {start_step} from {options.resume}", console=False)
    for line in environment_lines(devices):
        log.write(line, console=False)
    log.write("=" * 100, console=False)


def shown_path(path: str | Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    path = Path(path).absolute()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def sample_command(checkpoint_dir: str | Path) -> str:
    """The shell command that samples text from a run's checkpoint directory."""
    return shlex.join([shown_path(sys.executable), "-m", "jaxgpt.sample", "--checkpoint", shown_path(checkpoint_dir),
                       "--prompt", "def ", "--max-new-tokens", "50"])
