"""torch_ref.run.runlog: the record's log lines and timing columns, and the TensorBoard events
beside the metrics JSONL. What a run writes (the header, every step's line and metrics) is
checked on a real run in test_train.py."""

from __future__ import annotations

import json

import numpy as np

from jaxgpt.testing import read_tensorboard_scalars  # a test helper only: torch_ref imports no jaxgpt
from torch_ref.run import runlog


def test_log_line_helpers_follow_the_record():
    assert runlog.val_line(0, 1393, 10.82580, 0.0) == "step:0/1393 val_loss:10.8258 train_time:0ms step_avg:nanms"
    # RECORD.md 9: the final val line of the logged run.
    assert runlog.val_line(1393, 1393, 3.2785, 179527.0) == (
        "step:1393/1393 val_loss:3.2785 train_time:179527ms step_avg:129.81ms"
    )
    # The last train line: step 1393 at 179,392 ms, step_avg 129.71 ms (update made at step 1392).
    assert runlog.train_line(1392, 1393, 179392.0) == "step:1393/1393 train_time:179392ms step_avg:129.71ms"
    assert runlog.train_line(11, 1393, 1234.0).endswith("step_avg:nanms")


def test_tensorboard_events_hold_the_metrics_numbers(tmp_path, capsys):
    log = runlog.RunLog(tmp_path / "logs", "tb", enabled=True, tensorboard_dir=str(tmp_path / "tb"))
    log.metrics(kind="val", step=0, val_loss=10.8258, train_time_ms=0.0, step_avg_ms=float("nan"), window_blocks=1)
    for step in range(1, 4):
        log.metrics(kind="train", step=step, train_loss=10.0 - step, train_time_ms=100.0 * step,
                    step_avg_ms=float("nan"), window_blocks=1)
    log.close()
    records = [json.loads(line) for line in (tmp_path / "logs" / "tb.jsonl").read_text().splitlines()]
    expected = {(f"{r['kind']}/{name}", r["step"]): value for r in records for name, value in r.items()
                if name not in ("kind", "step", "framework", "run_id")}
    scalars = read_tensorboard_scalars(tmp_path / "tb" / "tb")
    assert set(scalars) == set(expected) and len(expected) == 4 * 4
    for key, value in expected.items():  # TensorBoard keeps float32; NaN step averages stay NaN
        np.testing.assert_equal(np.float32(scalars[key]), np.float32(value), err_msg=str(key))


def test_unwritable_tensorboard_folder_is_refused(small_run, tmp_path, fails):
    (tmp_path / "a_file").write_text("x")
    err = fails(small_run.args(tmp_path / "out", "--tensorboard", str(tmp_path / "a_file")))
    assert "--tensorboard" in err and "not writable" in err
