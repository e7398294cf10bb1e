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


def test_a_full_disk_during_a_log_line_stops_the_run_with_whole_lines(small_run, fails, monkeypatch, small_disk,
                                                                      one_thread):
    """A real full disk (a tmpfs, conftest.small_disk) filled by the second update: the next log
    line that needs a new page of the text log fails. The run stops with exit 1 and one line
    naming the file, the full disk and where the run's checkpoints stand; the log ends with a
    whole line (the kernel's partial write cut back)."""
    from torch_ref import loop  # noqa: PLC0415
    from torch_ref.run.cli import PROG  # noqa: PLC0415

    disk = small_disk(4 * 2**20)
    out = disk.folder / "out"
    real, calls = loop.forward_backward, []

    def forward_backward(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            disk.fill(0)
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "forward_backward", forward_backward)
    err = fails(small_run.args(out, "--steps", "300", "--cycle-data", "--run-id", "w"))
    assert err.strip().splitlines()[-1] == (f"{PROG}: error: writing the log {out / 'logs' / 'w.txt'} failed: no space left on device; it "
                           "ends at its last complete line. This run writes no step checkpoints."), err
    assert len(err.strip().splitlines()) == 2 and err.startswith("note: this run writes no checkpoint")
    text = (out / "logs" / "w.txt").read_text()
    assert text.endswith("\n") and "step:2/300" in text and "step:300/300" not in text
