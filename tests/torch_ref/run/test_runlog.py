"""torch_ref.run.runlog: the TensorBoard events beside the metrics JSONL (the record's lines and
timing: tests/runkit/test_runlog.py). What a run writes (the header, every step's line and
metrics) is checked on a real run in test_train.py."""

from __future__ import annotations

import json

import numpy as np

from jaxgpt.testing import read_tensorboard_scalars  # a test helper only: torch_ref imports no jaxgpt
from torch_ref.run import runlog


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
