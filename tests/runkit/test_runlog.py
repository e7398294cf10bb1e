"""runkit.runlog: the record's log lines, its step timing and the training clock, as both
trainers write them (what a run writes, line by line: tests/test_train.py,
tests/torch_ref/test_train.py)."""

from __future__ import annotations

import json
import math

import pytest

from runkit import runlog


def test_log_line_formats_are_the_records():
    assert runlog.val_line(0, 1393, 10.82580, 0.0) == "step:0/1393 val_loss:10.8258 train_time:0ms step_avg:nanms"
    # RECORD.md 9: the final val line of the logged run.
    assert runlog.val_line(1393, 1393, 3.2785, 179527.0) == (
        "step:1393/1393 val_loss:3.2785 train_time:179527ms step_avg:129.81ms"
    )
    assert runlog.val_line(125, 1393, 4.40431, 14281.4) == (
        "step:125/1393 val_loss:4.4043 train_time:14281ms step_avg:124.19ms"
    )
    # The last train line (the update made at step 1392), then this port's extra train loss field.
    line = runlog.train_line(1392, 1393, 179392.4, 3.31)
    assert line.startswith("step:1393/1393 train_time:179392ms step_avg:129.71ms")
    assert line.endswith(" train_loss:3.3100")
    assert runlog.train_line(11, 1393, 1234.0, 3.0).endswith("step_avg:nanms train_loss:3.0000")
    # A resumed run resets its clock 10 steps after its own start.
    assert runlog.train_line(512, 1393, 300.0, 3.0, clock_reset_step=510) == (
        "step:513/1393 train_time:300ms step_avg:100.00ms train_loss:3.0000"
    )


def test_timing_excludes_the_first_ten_steps():
    # The record: NaN through step 11, then step - 9 (its val line divides by this minus 1).
    assert math.isnan(runlog.timed_steps(11, clock_reset_step=10))
    assert runlog.timed_steps(12, clock_reset_step=10) == 3
    assert runlog.timed_steps(1392, clock_reset_step=10) == 1383
    # A resumed run re-times from its own start (its first 10 steps include compilation).
    assert runlog.timed_steps(512, clock_reset_step=510) == 3


@pytest.mark.parametrize("synced", [False, True])
def test_clock_excludes_paused_time(monkeypatch, synced):
    now, syncs = [100.0], []
    monkeypatch.setattr(runlog.time, "perf_counter", lambda: now[0])
    clock = runlog.TrainClock(sync=(lambda: syncs.append(now[0])) if synced else None)
    now[0] += 2.0
    assert clock.pause() == pytest.approx(2000.0)
    now[0] += 50.0  # validation: not counted
    clock.resume()
    now[0] += 1.0
    assert clock.elapsed_ms() == pytest.approx(3000.0)
    clock.reset()
    now[0] += 0.5
    assert clock.elapsed_ms() == pytest.approx(500.0)
    assert syncs == ([100.0, 102.0, 152.0, 153.0] if synced else [])  # reset, pause, resume, reset; never elapsed_ms


def test_without_a_loss_the_train_line_is_the_records_own():
    """torch_ref's lines (no train_loss field)."""
    assert runlog.val_line(0, 1393, 10.82580, 0.0) == "step:0/1393 val_loss:10.8258 train_time:0ms step_avg:nanms"
    # RECORD.md 9: the final val line of the logged run.
    assert runlog.val_line(1393, 1393, 3.2785, 179527.0) == (
        "step:1393/1393 val_loss:3.2785 train_time:179527ms step_avg:129.81ms"
    )
    # The last train line: step 1393 at 179,392 ms, step_avg 129.71 ms (update made at step 1392).
    assert runlog.train_line(1392, 1393, 179392.0) == "step:1393/1393 train_time:179392ms step_avg:129.71ms"
    assert runlog.train_line(11, 1393, 1234.0).endswith("step_avg:nanms")


def test_a_metrics_record_as_a_jsonl_line_and_as_tensorboard_scalars():
    record = {"kind": "val", "step": 125, "val_loss": 4.4043, "train_time_ms": 14281.4, "step_avg_ms": 124.19,
              "window_blocks": 3}
    assert json.loads(runlog.metrics_line("torch_ref", "r", record)) == {"framework": "torch_ref", "run_id": "r", **record}

    class Writer:
        def __init__(self):
            self.scalars = []

        def add_scalar(self, tag, value, step):
            self.scalars.append((tag, value, step))

    writer = Writer()
    runlog.add_scalars(writer, record)
    assert writer.scalars == [("val/val_loss", 4.4043, 125), ("val/train_time_ms", 14281.4, 125),
                              ("val/step_avg_ms", 124.19, 125), ("val/window_blocks", 3, 125)]
