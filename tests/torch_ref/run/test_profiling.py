"""torch_ref's `--profile START:STOP`: the flag's checks and the Chrome trace a short run writes."""

from __future__ import annotations

import json

import pytest

from torch_ref import train as train_lib
from torch_ref.run.cli import parse_args


def test_window_is_parsed_in_train_line_numbers():
    assert parse_args(["--device", "cpu", "--profile", "2:3"])[1].profile == (2, 3)
    assert parse_args(["--device", "cpu", "--profile", "4"])[1].profile == (4, 4)


@pytest.mark.parametrize("text", ["3:2", "0:2", "x"])
def test_bad_window_is_a_usage_error(text, capsys):
    with pytest.raises(SystemExit) as stopped:
        train_lib.main(["--device", "cpu", "--profile", text])
    assert stopped.value.code == 2
    assert "--profile" in capsys.readouterr().err


def test_window_beyond_the_run_is_refused(small_run, tmp_path, fails):
    err = fails(small_run.args(tmp_path, "--profile", "3:5"))
    assert "--profile 3:5 names steps this run does not take (it logs step:1 .. step:4)" in err


@pytest.mark.slow
def test_trace_holds_the_chosen_steps(small_run, tmp_path, capsys, one_thread):
    assert train_lib.main(small_run.args(tmp_path, "--profile", "2:3", "--run-id", "traced")) == 0
    trace = tmp_path / "profile" / "traced" / "trace_rank0.json"
    assert f"profile of steps 2..3: {trace}" in capsys.readouterr().out
    events = json.loads(trace.read_text())["traceEvents"]
    marks = sorted(e["name"] for e in events if e.get("name", "").startswith("train_step_") and e.get("ph") == "X")
    assert marks == ["train_step_2", "train_step_3"]
    assert any(e.get("name") in ("aten::mm", "aten::addmm") for e in events)
