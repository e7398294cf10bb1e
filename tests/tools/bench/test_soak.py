"""jaxgpt_tools.bench.soak (scripts/soak.py): the figures a long run reports, from samples and a
metrics file written here (the long run itself is not part of the tests)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxgpt_tools.bench import soak


def write_metrics(path, step_ms: dict[int, float]) -> None:
    """A metrics JSONL whose train lines advance the clock by step_ms[s] at step s (a clock
    reset between steps 10 and 11, as the trainer's), with a val line every 5 steps."""
    clock, lines = 0.0, []
    for step in sorted(step_ms):
        clock = 0.0 if step == 11 else clock + step_ms[step]
        lines.append({"kind": "train", "step": step, "train_loss": 1.0, "train_time_ms": clock})
        if step % 5 == 0:
            lines.append({"kind": "val", "step": step, "val_loss": 1.0, "train_time_ms": clock})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_growth_is_the_fitted_slope_per_100_steps_with_its_noise():
    steps = np.arange(100, 1001, 50, dtype=np.float64)
    flat = soak.growth_per_100_steps(steps, np.full(steps.shape, 512.0))
    assert flat["per_100_steps"] == pytest.approx(0.0, abs=1e-9) and flat["noise_std"] == pytest.approx(0.0, abs=1e-9)
    wobble = np.where(np.arange(steps.size) % 2, 1.0, -1.0)
    leaking = soak.growth_per_100_steps(steps, 512.0 + 0.3 * steps + wobble)  # 30 MiB per 100 steps
    assert leaking["per_100_steps"] == pytest.approx(30.0, abs=0.5)
    assert leaking["noise_std"] == pytest.approx(1.0, abs=0.1)
    assert leaking["first"] == leaking["min"] == 512.0 + 0.3 * 100 - 1.0  # the first sample is the smallest


def test_step_times_are_medians_per_span_and_skip_the_clock_reset(tmp_path):
    metrics = tmp_path / "m.jsonl"
    write_metrics(metrics, {step: 100.0 if step <= 30 else 200.0 for step in range(1, 61)})
    spans = soak.step_times(metrics, parts=2)
    assert [span["median_ms"] for span in spans] == [100.0, 200.0]
    assert spans[0]["from_step"] == 2 and spans[-1]["to_step"] == 60
    assert soak.last_step(metrics) == 60


def test_summary_leaves_out_the_warmup(tmp_path):
    metrics = tmp_path / "m.jsonl"
    write_metrics(metrics, {step: 100.0 for step in range(1, 41)})
    samples = [soak.Sample(seconds=float(s), step=s, host_rss_mib=900.0 if s < 10 else 500.0 + s, device_mib=None)
               for s in range(0, 41, 2)]
    summary = soak.summarize(samples, metrics, warmup=10)
    assert summary["samples_after_warmup"] == 16 and "device_mib" not in summary
    assert summary["host_rss_mib"]["per_100_steps"] == pytest.approx(100.0)  # 1 MiB per step, warm-up excluded
