"""torch_ref.runlog: the record's log lines and timing columns. What a run writes (the header,
every step's line and metrics) is checked on a real run in test_train.py."""

from __future__ import annotations

from torch_ref import runlog


def test_log_line_helpers_follow_the_record():
    assert runlog.val_line(0, 1393, 10.82580, 0.0) == "step:0/1393 val_loss:10.8258 train_time:0ms step_avg:nanms"
    # RECORD.md 9: the final val line of the logged run.
    assert runlog.val_line(1393, 1393, 3.2785, 179527.0) == (
        "step:1393/1393 val_loss:3.2785 train_time:179527ms step_avg:129.81ms"
    )
    # The last train line: step 1393 at 179,392 ms, step_avg 129.71 ms (update made at step 1392).
    assert runlog.train_line(1392, 1393, 179392.0) == "step:1393/1393 train_time:179392ms step_avg:129.71ms"
    assert runlog.train_line(11, 1393, 1234.0).endswith("step_avg:nanms")
