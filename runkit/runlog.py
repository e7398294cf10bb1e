"""The record's log lines and its training clock, as both trainers write them.

Timing follows the record: the clock is reset at step 10 (compilation excluded; a resumed run
10 steps after its own start), paused around validation and checkpoint saves, and a line's
step_avg divides the clock by the steps it has seen (`timed_steps`). A NaN or infinite loss
stops a run with one line (`nonfinite_loss`). Both write the same metrics: one JSON object per
logged step (`metrics_line`), the same numbers as TensorBoard scalars (`add_scalars`). What each
trainer adds around these (where its files go, its header, jaxgpt's progress bar, torch_ref's
loss watch) is its own run.runlog's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

CLOCK_RESET_STEP = 10  # the record excludes steps 0..9 (compile warm-up) from train_time


def timed_steps(step: int, clock_reset_step: int = CLOCK_RESET_STEP) -> float:
    """Steps the clock has seen at `step`: the record resets the clock at step 10 and counts
    step - 9 from step 12 on, NaN before (its `<= 11` guard for the val line). A resumed run
    resets its clock 10 steps after its start step."""
    return float("nan") if step <= clock_reset_step + 1 else float(step - clock_reset_step + 1)


def val_step_avg_ms(step: int, train_time_ms: float, clock_reset_step: int = CLOCK_RESET_STEP) -> float:
    """step_avg on the val line of `step`: the record divides by one step fewer than its train line."""
    return train_time_ms / (timed_steps(step, clock_reset_step) - 1)


def train_step_avg_ms(step: int, train_time_ms: float, clock_reset_step: int = CLOCK_RESET_STEP) -> float:
    """step_avg on the train line logged after the update made at `step`."""
    return train_time_ms / timed_steps(step, clock_reset_step)


def val_line(step: int, total: int, loss: float, train_time_ms: float, clock_reset_step: int = CLOCK_RESET_STEP) -> str:
    avg = val_step_avg_ms(step, train_time_ms, clock_reset_step)
    return f"step:{step}/{total} val_loss:{loss:.4f} train_time:{train_time_ms:.0f}ms step_avg:{avg:.2f}ms"


def train_line(step: int, total: int, train_time_ms: float, loss: float | None = None,
               clock_reset_step: int = CLOCK_RESET_STEP) -> str:
    """Logged after the update made at `step`; shows step + 1 as the record does, then, when
    `loss` is given, the train loss as an extra trailing field (jaxgpt's; torch_ref's line is
    the record's)."""
    avg = train_step_avg_ms(step, train_time_ms, clock_reset_step)
    line = f"step:{step + 1}/{total} train_time:{train_time_ms:.0f}ms step_avg:{avg:.2f}ms"
    return line if loss is None else f"{line} train_loss:{loss:.4f}"


def metrics_line(framework: str, run_id: str, record: Mapping[str, Any]) -> str:
    """One line of a run's metrics JSONL: its framework ("jaxgpt", "torch_ref") and run id, then
    the record's fields (kind "train" or "val", step, the loss, train_time_ms, step_avg_ms,
    window_blocks, and #15's window_tokens: each trainer's lineage.logged_window): the schema
    scripts/plot_runs.py reads of both trainers' runs."""
    return json.dumps({"framework": framework, "run_id": run_id, **record})


def add_scalars(writer: Any, record: Mapping[str, Any]) -> None:
    """A metrics record's numbers as TensorBoard scalars (`writer`: a tensorboardX SummaryWriter),
    tagged `<kind>/<field>` at the record's step."""
    for name, value in record.items():
        if name not in ("kind", "step"):
            writer.add_scalar(f"{record['kind']}/{name}", value, record["step"])


class NonFiniteError(ValueError):
    """A NaN or infinite loss (or state): the run stops before saving anything after it."""


def nonfinite_loss(kind: str, step: int, total: int, loss: float, checkpoints: str) -> NonFiniteError:
    """The error of a NaN or infinite `kind` ("train" or "val") loss, naming the step as its log
    line shows it and the value; `checkpoints` says where the newest complete checkpoint is
    (each trainer's run.checkpoint.where_to_resume)."""
    return NonFiniteError(f"{kind} loss is {loss} at step {step}/{total}; the run stopped without saving any later "
                          f"state. {checkpoints} Lower the learning rates or resume from an earlier checkpoint "
                          "(--allow-nonfinite-loss trains on regardless)")


class TrainClock:
    """Wall time of training only, in ms: paused around validation and saves, reset once.
    `sync` (torch_ref on CUDA: the device synchronised) is called before the clock is reset,
    paused or restarted; `elapsed_ms` reads it without, as the record's train line does (an
    approximate time)."""

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self._sync = sync
        self.reset()

    def _synced(self) -> None:
        if self._sync is not None:
            self._sync()

    def reset(self) -> None:
        self._synced()
        self._accumulated_ms, self._start = 0.0, time.perf_counter()

    def pause(self) -> float:
        self._synced()
        self._accumulated_ms += 1000.0 * (time.perf_counter() - self._start)
        return self._accumulated_ms

    def resume(self) -> None:
        self._synced()
        self._start = time.perf_counter()

    def elapsed_ms(self) -> float:
        return self._accumulated_ms + 1000.0 * (time.perf_counter() - self._start)
