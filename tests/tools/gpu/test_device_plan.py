"""jaxgpt_tools.gpu.device_plan: the control flow of the one-lease GPU plan (caps, the deadline, a
failing, a hanging and a skipped step, a publish after every step, at most 8 flat files), then
the whole plan through scripts/device_plan.py with its CPU stand-ins. No timing is asserted
beyond the plan's own deadline, which is what it promises."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from jaxgpt_tools.gpu import device_plan
from jaxgpt_tools.gpu.device_plan import Launch, PlanOptions, Skip, Step


def python_step(name: str, code: str, cap_s: float, log: str | None = None) -> Step:
    return Step(name, cap_s, lambda work: Launch([sys.executable, "-c", code]), log=log)


def skipped_step(work: Path) -> Launch:
    raise Skip("the input is not here")


def published(out: Path) -> list[str]:
    assert all(path.is_file() for path in out.iterdir()), "only files, no folders, come back"
    return sorted(path.name for path in out.iterdir())


def test_the_plan_records_each_steps_fate_within_its_deadline_and_publishes_after_every_step(tmp_path):
    lines = "".join(f"print('step:{s}/14 train_time:{100 * s}ms', flush=True);" for s in range(1, 15))
    steps = [
        Step("runs", 10, lambda work: Launch([sys.executable, "-c", lines]), log="jaxgpt.log",
             collect=lambda work, log: device_plan.run_times(log.read_text(), 14)),
        python_step("fails", "import sys; print('bad input'); sys.exit(3)", 10, log="torch_ref.log"),
        python_step("hangs", "import time; print('started', flush=True); time.sleep(60)", 1.5, log="record.log"),
        Step("absent", 10, skipped_step),
        python_step("outlives_the_deadline", "import time; time.sleep(60)", 30),
        python_step("too_late", "print('never')", 10),
    ]
    options = PlanOptions(out=tmp_path / "out", work=tmp_path / "work", deadline_s=6.0, margin_s=0.5)
    after_each = []
    start = time.monotonic()
    summary = device_plan.run_plan(steps, options, on_publish=lambda name, result: after_each.append(
        (name, published(options.out), json.loads((options.out / device_plan.SUMMARY_JSON).read_text()))))
    elapsed = time.monotonic() - start
    # The deadline holds: the margin, plus the kill's grace, is all it may overrun by.
    assert elapsed < options.deadline_s + 5
    fate = {name: step["status"] for name, step in summary["steps"].items()}
    assert fate == {"runs": "ok", "fails": "failed", "hangs": "timed_out", "absent": "skipped",
                    "outlives_the_deadline": "timed_out", "too_late": "skipped"}
    steps_ = summary["steps"]
    assert steps_["fails"]["returncode"] == 3 and "bad input" in steps_["fails"]["reason"]
    assert "its cap" in steps_["hangs"]["reason"] and "the deadline" in steps_["outlives_the_deadline"]["reason"]
    assert steps_["absent"]["reason"] == "the input is not here" and "no time left" in steps_["too_late"]["reason"]
    # Steps 12..9 of a 14-step run: none timed (the range is after the clock reset, before the trace).
    assert device_plan.step_range(14) == (12, 9) and steps_["runs"]["step_ms_median"] is None
    # A publish after every step: the summary on disk names every step run so far, and the logs
    # of the steps that ran are there under their flat names (the hung step's partial log too).
    assert [name for name, _, _ in after_each] == list(fate)
    for index, (name, files, on_disk) in enumerate(after_each):
        assert list(on_disk["steps"]) == list(fate)[: index + 1]
        assert len(files) <= device_plan.MAX_FILES and set(files) <= set(device_plan.PUBLISHED)
    assert "started" in (options.out / "record.log").read_text()
    assert "killed after" in (options.out / "record.log").read_text()
    assert "bad input" in (options.out / "torch_ref.log").read_text()


def test_run_times_take_the_median_over_the_step_range_only():
    # 30 steps: steps 12..25 timed at 100 ms; the slow first step, the steps around the clock reset
    # and the traced steps 27:28 (1,000 ms) stay out.
    cumulative, lines = 0, []
    for step in range(1, 31):
        cumulative = 0 if step == 11 else cumulative
        cumulative += 30_000 if step == 1 else 1000 if step in (26, 27, 28, 29, 30) else 100
        lines.append(f"step:{step}/30 train_time:{cumulative}ms step_avg:1.0ms")
    lines.append("peak memory allocated: 31033 MiB reserved: 32000 MiB")
    times = device_plan.run_times("\n".join(lines), 30)
    assert device_plan.step_range(30) == (12, 25) and device_plan.trace_window(30) == (27, 28)
    assert times["step_ms_median"] == 100 and times["steps_timed"] == 14
    assert times["first_step_ms"] == 30_000 and times["peak_mib"] == 31033


def test_headline_ratios_under_gpu_checks_names():
    steps = {"jaxgpt": {"step_ms_median": 180.0}, "torch_ref": {"step_ms_median": 160.0},
             "record": {"status": "failed"}}
    head = device_plan.headline(steps)
    assert (head["jax_step_ms"], head["torch_step_ms"], head["record_step_ms"]) == (180.0, 160.0, None)
    assert head["ratio_jax_over_torch"] == 1.125 and head["ratio_jax_over_record"] is None


@pytest.mark.slow
def test_the_whole_plan_with_cpu_stand_ins_ends_inside_its_deadline(tmp_path, stand_in, capsys):
    from scripts import device_plan as command

    record_script = tmp_path / "train_gpt.py"
    record_script.write_text(stand_in)
    out, deadline = tmp_path / "out", 400
    start = time.monotonic()
    code = command.main(["--cpu", "--out", str(out), "--work", str(tmp_path / "work"), "--deadline", str(deadline),
                         "--record-script", str(record_script)])
    assert time.monotonic() - start < deadline
    summary = json.loads((out / device_plan.SUMMARY_JSON).read_text())
    assert code == 0, summary
    assert published(out) == sorted(device_plan.PUBLISHED)
    assert list(summary["steps"]) == ["preflight", "jaxgpt", "torch_ref", "record", "attention", "mosaic"]
    assert all(step["status"] == "ok" for step in summary["steps"].values())
    for trainer in ("jaxgpt", "torch_ref"):
        step = summary["steps"][trainer]
        assert step["steps_timed"] == 2 and step["step_ms_median"] > 0 and step["kernel_ms_per_step_by_class"]
        assert step["command"].startswith("python3 -m ") and "$WORK" in step["command"]
    # The record's step: its script patched (18 steps), the stand-in's log format read, peak memory included.
    record = summary["steps"]["record"]
    assert "num_iterations = 18" in record["patches"] and record["step_ms_median"] == 10 and record["peak_mib"] == 123
    assert summary["record_step_ms"] == 10 and summary["ratio_jax_over_record"] > 0
    kernels = (out / "kernels.txt").read_text()
    # The published text names no machine's folders (the lease's files are committed as they come).
    logs = {name: (out / name).read_text() for name in ("jaxgpt.log", "torch_ref.log", "kernels.txt")}
    assert "$WORK/jaxgpt/logs/jaxgpt.txt" in logs["jaxgpt.log"]
    assert not [name for name, text in logs.items() if str(tmp_path) in text]
    assert "## jaxgpt: steps 15:16 traced" in kernels and "## torch_ref: steps 15:16 traced" in kernels
    attention = json.loads((out / "attention.json").read_text())
    assert set(attention["timings"]["blocked"]) == {"1", "4", "14"} and "skipped" in attention["timings"]["pallas"]
    assert [row["window_blocks"] for row in attention["rows"]] == [1, 4, 14]
    assert "Hopper" in summary["steps"]["mosaic"]["results"]["skipped"]
    assert summary["steps"]["preflight"]["results"]["inputs"]["encoding"] in ("gpt2", "bytes")
    assert "CPU stand-ins" in (out / device_plan.SUMMARY_MD).read_text()
    assert "Median step ms over steps 12..13" in capsys.readouterr().out


def test_caps_from_the_command_line_replace_one_step_and_refuse_nonsense():
    caps = dict(device_plan.DEFAULT_CAPS)
    assert device_plan.parse_caps(["torch_ref=300", "record=275.5"], caps) == {"torch_ref": 300.0, "record": 275.5}
    for bad, said in [("torchref=3", "unknown step 'torchref'"), ("record=soon", "want STEP=SECONDS"),
                      ("record", "want STEP=SECONDS"), ("jaxgpt=0", "positive")]:
        with pytest.raises(ValueError, match=said):
            device_plan.parse_caps([bad], caps)
