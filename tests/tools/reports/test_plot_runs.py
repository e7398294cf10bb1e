"""jaxgpt_tools.reports.plot_runs and scripts/plot_runs.py: reads both trainers' metrics schema and draws the curves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxgpt_tools.reports.plot_runs import read_run
from scripts import plot_runs as command


def write_run(path: Path, framework: str, run_id: str, offset: float) -> Path:
    records = []
    for step in range(0, 31):
        if step % 10 == 0:
            records.append(dict(framework=framework, run_id=run_id, kind="val", step=step, val_loss=5 - step / 10 + offset,
                                train_time_ms=100.0 * step, step_avg_ms=float("nan"), window_blocks=1))
        if step:
            records.append(dict(framework=framework, run_id=run_id, kind="train", step=step, train_loss=5.5 - step / 10,
                                train_time_ms=100.0 * step, step_avg_ms=100.0, window_blocks=1))
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_reads_runs_and_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra (pip install -e '.[plot]') is not installed")
    a = write_run(tmp_path / "a.jsonl", "jaxgpt", "run-a", 0.0)
    b = write_run(tmp_path / "b.jsonl", "torch_ref", "run-b", 0.1)
    run = read_run(a)
    assert run.label == "jaxgpt run-a"
    assert [p[0] for p in run.val] == [0, 10, 20, 30] and len(run.train) == 30
    assert run.val[1] == (10, 4.0, 1.0)  # (step, loss, seconds)
    out = tmp_path / "curves.png"
    assert command.main([str(a), str(b), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_bad_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "val", "step": 0}\n')
    assert command.main([str(bad), "--out", str(tmp_path / "x.png")]) == 1
    assert "bad.jsonl:1: not a metrics record" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no metrics records"):
        read_run(tmp_path / "empty.jsonl")
    with pytest.raises(FileNotFoundError, match="no such metrics file"):
        read_run(tmp_path / "missing.jsonl")
