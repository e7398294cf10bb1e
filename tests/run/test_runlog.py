"""jaxgpt.run.runlog: the TensorBoard events beside the metrics JSONL (the record's lines, its
timing and the clock: tests/runkit/test_runlog.py)."""

from __future__ import annotations

import json

import numpy as np

from jaxgpt.run import runlog
from jaxgpt.testing import read_tensorboard_scalars


def test_tensorboard_events_hold_the_metrics_numbers(tmp_path):
    log = runlog.RunLog(str(tmp_path), "tb", total_steps=20, start_step=0, progress=False, enabled=True,
                        tensorboard_dir=str(tmp_path / "tb"))
    log.val(0, 10.8258, 0.0, {"window_blocks": 1})
    for step in range(13):
        log.train(step, 10.0 - 0.25 * step, 1000.0 + 37.5 * step, {"window_blocks": 1 + step // 4})
    log.val(13, 6.5, 1500.0, {"window_blocks": 4})
    log.close()
    records = [json.loads(line) for line in log.metrics_path.read_text().splitlines()]
    expected = {(f"{r['kind']}/{name}", r["step"]): value for r in records for name, value in r.items()
                if name not in ("kind", "step", "framework", "run_id")}
    scalars = read_tensorboard_scalars(tmp_path / "tb" / "tb")
    assert set(scalars) == set(expected) and len(expected) == 2 * 4 + 13 * 4
    for key, value in expected.items():  # TensorBoard keeps float32; NaN step averages stay NaN
        np.testing.assert_equal(np.float32(scalars[key]), np.float32(value), err_msg=str(key))
