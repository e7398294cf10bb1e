"""jaxgpt_tools.gpu.device_plan: the control flow of the one-lease GPU plan with fake steps (caps,
the deadline, a failing, a hanging and a skipped step, a publish after every step and while a step
runs, at most 8 flat files; processes an earlier step left, a busy GPU, the plan itself stopped;
a publish that fails; the compile caches packed and restored), then the whole plan through
scripts/device_plan.py with its CPU stand-ins, its refusals and its one-second check. No timing is
asserted beyond the plan's own deadline, which is what it promises."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from jaxgpt_tools.common.subprocesses import Launch, marked_processes
from jaxgpt_tools.gpu import device_plan, plan_steps
from jaxgpt_tools.gpu.plan_steps import PlanOptions, Skip, Step


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
             collect=lambda work, log: plan_steps.run_times(log.read_text(), 14)),
        python_step("fails", "import sys; print('bad input'); sys.exit(3)", 10, log="torch_ref.log"),
        python_step("hangs", "import time; print('started', flush=True); time.sleep(60)", 1.5, log="record.log"),
        Step("absent", 10, skipped_step),
        python_step("outlives_the_deadline", "import time; time.sleep(60)", 30),
        python_step("too_late", "print('never')", 10),
    ]
    options = PlanOptions(out=tmp_path / "out", work=tmp_path / "work", deadline_s=6.0, margin_s=0.5,
                          marker=f"JAXGPT_TEST_PLAN_{os.getpid()}")
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
    assert plan_steps.step_range(14) == (12, 9) and steps_["runs"]["step_ms_median"] is None
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
    times = plan_steps.run_times("\n".join(lines), 30)
    assert plan_steps.step_range(30) == (12, 25) and plan_steps.trace_window(30) == (27, 28)
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
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the plan's handler put back (main runs in-process here)
    summary = json.loads((out / device_plan.SUMMARY_JSON).read_text())
    assert code == 0, summary
    assert published(out) == sorted(device_plan.PUBLISHED)
    assert list(summary["steps"]) == ["preflight", "jaxgpt", "record", "torch_ref", "record_readings", "attention",
                                      "mosaic", "step_agreement"]
    assert all(step["status"] == "ok" for step in summary["steps"].values())
    for trainer in ("jaxgpt", "torch_ref"):
        step = summary["steps"][trainer]
        assert step["steps_timed"] == 2 and step["step_ms_median"] > 0 and step["kernel_ms_per_step_by_class"]
        assert step["command"].startswith("python3 -m ") and "$WORK" in step["command"]
    # The record's step: its script patched (18 steps), the stand-in's log format read, peak memory included.
    record = summary["steps"]["record"]
    assert {"num_iterations = 18", "val_loss_every = 0"} <= set(record["patches"])
    assert record["step_ms_median"] == 10 and record["peak_mib"] == 123
    assert summary["record_step_ms"] == 10 and summary["ratio_jax_over_record"] > 0
    kernels = (out / "kernels.txt").read_text()
    # The published text names no machine's folders (the lease's files are committed as they come).
    logs = {name: (out / name).read_text() for name in ("jaxgpt.log", "torch_ref.log", "kernels.txt")}
    assert "$WORK/jaxgpt/logs/jaxgpt.txt" in logs["jaxgpt.log"]
    assert not [name for name, text in logs.items() if str(tmp_path) in text]
    assert "## jaxgpt: steps 15:16 traced" in kernels and "## torch_ref: steps 15:16 traced" in kernels
    # The step with the Mosaic kernels, stood in for by blocked against dense (smoke, T 256): bf16 gaps.
    agreement = summary["steps"]["step_agreement"]["results"]
    assert (agreement["backend"], agreement["reference"]) == ("blocked", "dense") and agreement["within_bounds"]
    assert 0 < agreement["worst_matrix_rel"] < 3e-2 and agreement["loss_rel"] < 1e-2
    attention = summary["steps"]["attention"]["results"]
    assert set(attention["timings"]["blocked"]) == {"1", "4", "14"} and "skipped" in attention["timings"]["pallas"]
    assert [row["window_blocks"] for row in attention["rows"]] == [1, 4, 14]
    assert "Hopper" in summary["steps"]["mosaic"]["results"]["skipped"]
    # The readings of the records' compiled code: eager only on the CPU (#15's tables as eager builds them),
    # the compiled parts and the stand-in script's absent Newton-Schulz skipped with the reason.
    readings = summary["steps"]["record_readings"]["results"]
    assert readings["rotary_15"]["eager_vs_eager_reading"]["cos"]["entries_differing"] == 0
    assert "skipped" in readings["rotary_15"]["compiled"] and "skipped" in readings["newton_schulz_20"]
    assert summary["steps"]["preflight"]["results"]["inputs"]["encoding"] in ("gpt2", "bytes")
    with tarfile.open(out / device_plan.ARCHIVE) as archive:
        assert "CPU stand-ins" in archive.extractfile(device_plan.SUMMARY_MD).read().decode()
        assert "attention.json" in archive.getnames()
    # The trainers compiled into the plan's cache root: JAX's programs came back in the caches' archive.
    assert summary["caches"]["state"] == "cold" and summary["caches"]["packed"]["bytes"] > 0
    assert summary["steps"]["jaxgpt"]["compiled"]["jax_programs"] > 0
    assert summary["steps"]["jaxgpt"]["progress"]["phase"].startswith("done")
    assert "Median step ms over steps 12..13" in capsys.readouterr().out


def test_caps_from_the_command_line_replace_one_step_and_refuse_nonsense():
    caps = dict(plan_steps.DEFAULT_CAPS)
    assert plan_steps.parse_caps(["torch_ref=300", "record=275.5"], caps) == {"torch_ref": 300.0, "record": 275.5}
    for bad, said in [("torchref=3", "unknown step 'torchref'"), ("record=soon", "want STEP=SECONDS"),
                      ("record", "want STEP=SECONDS"), ("jaxgpt=0", "positive")]:
        with pytest.raises(ValueError, match=said):
            plan_steps.parse_caps([bad], caps)


def plan_options(tmp_path: Path, **changes) -> PlanOptions:
    # A marker of its own: a plan ends every marked process before each step, a neighbour's too.
    return PlanOptions(out=tmp_path / "out", work=tmp_path / "work", deadline_s=60.0, margin_s=1.0,
                       marker=f"JAXGPT_TEST_PLAN_{os.getpid()}", **changes)


def test_a_process_an_earlier_step_left_is_ended_before_the_next_and_the_gpu_memory_read(tmp_path, monkeypatch):
    # Step one leaves a process in a session of its own (out of its group's reach); step two
    # finds it by the marker every step's environment carries. The GPU reads busy once, then free.
    pid_file = tmp_path / "escaped.pid"
    leave = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], "
             f"start_new_session=True); open({str(pid_file)!r}, 'w').write('x')")
    steps = [python_step("leaves_one", leave, 10), python_step("next", "print('clean')", 10)]
    readings = iter([0, 5000, 12])
    monkeypatch.setattr(device_plan.time, "sleep", lambda seconds: None)  # the wait for a busy GPU
    summary = device_plan.run_plan(steps, plan_options(tmp_path), gpu_memory=lambda: next(readings))
    first, second = summary["steps"]["leaves_one"], summary["steps"]["next"]
    assert first["status"] == "ok" and first["before"] == {"gpu_memory_used_mib": 0, "leftovers_ended": []}
    assert len(second["before"]["leftovers_ended"]) == 1 and "time.sleep(120)" in second["before"]["leftovers_ended"][0]
    assert second["before"]["gpu_memory_used_mib"] == 12 and "gpu_busy" not in second["before"]
    assert marked_processes(f"JAXGPT_TEST_PLAN_{os.getpid()}") == []


def test_a_gpu_still_busy_after_the_wait_is_said_and_the_step_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(device_plan.time, "sleep", lambda seconds: None)
    summary = device_plan.run_plan([python_step("runs", "print('ok')", 10)], plan_options(tmp_path),
                                   gpu_memory=lambda: 70_000)
    step = summary["steps"]["runs"]
    assert step["status"] == "ok" and "70000 MiB in use" in step["before"]["gpu_busy"]


def test_a_running_step_publishes_its_phase_and_a_killed_one_says_how_far_it_got(tmp_path, monkeypatch):
    lines = "".join(f"print('step:{s}/10 train_time:{100 * s}ms', flush=True);" for s in range(1, 4))
    code = f"import time; {lines} time.sleep(60)"
    while_running = []
    publish = device_plan.publish

    def spy(summary, options, step_logs=None, archives=True):
        publish(summary, options, step_logs, archives)
        if not archives:  # the cheap publish of a running step: the summary on disk says so
            while_running.append(json.loads((options.out / device_plan.SUMMARY_JSON).read_text())["steps"]["slow"])

    monkeypatch.setattr(device_plan, "publish", spy)
    summary = device_plan.run_plan([python_step("slow", code, 2.0, log="record.log")], plan_options(tmp_path, tick_s=0.3))
    assert while_running and all(step["status"] == "running" for step in while_running)
    assert while_running[-1]["progress"]["phase"] == "step 4 of 10: running (3 logged)"
    step = summary["steps"]["slow"]
    assert step["status"] == "timed_out" and step["progress"]["phase"] == "step 4 of 10: running (3 logged)"
    assert step["progress"]["last_line"].startswith("[killed after 2 s")


def test_stopping_the_plan_ends_its_running_step_and_publishes_why(tmp_path):
    # The plan in a process of its own, SIGTERM as the device tool or a user sends it.
    pid_file, options = tmp_path / "step.pid", plan_options(tmp_path)
    step_code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    plan_code = "\n".join([
        "import signal, sys",
        "from pathlib import Path",
        "from jaxgpt_tools.common.subprocesses import Launch",
        "from jaxgpt_tools.gpu import device_plan, plan_steps",
        "from scripts.device_plan import _interrupt",
        "signal.signal(signal.SIGTERM, _interrupt)",
        f"step = plan_steps.Step('hangs', 60, lambda work: Launch([sys.executable, '-c', {step_code!r}]))",
        f"options = plan_steps.PlanOptions(out=Path({str(options.out)!r}), work=Path({str(options.work)!r}), "
        f"deadline_s=100, margin_s=1, marker={options.marker!r})",
        "try:",
        "    device_plan.run_plan([step], options)",
        "except KeyboardInterrupt:",
        "    sys.exit(143)",
    ])
    plan = subprocess.Popen([sys.executable, "-c", plan_code], cwd=device_plan.REPO_ROOT,
                            env=dict(os.environ, PYTHONPATH=str(device_plan.REPO_ROOT)))
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    step_pid = int(pid_file.read_text())
    plan.send_signal(signal.SIGTERM)
    assert plan.wait(timeout=30) == 143
    assert not Path(f"/proc/{step_pid}").exists() or " Z " in Path(f"/proc/{step_pid}/stat").read_text()
    summary = json.loads((options.out / device_plan.SUMMARY_JSON).read_text())
    assert summary["steps"]["hangs"]["status"] == "interrupted" and "SIGTERM" in summary["steps"]["hangs"]["reason"]


def test_a_publish_that_fails_loses_one_file_not_the_plan_and_a_stale_partial_goes(tmp_path):
    options = plan_options(tmp_path)
    options.out.mkdir(parents=True)
    (options.out / "jaxgpt.log").mkdir()  # a folder where the log should go: its write fails
    (options.out / ".summary.json.partial").write_text("{")  # what a publish killed mid-write leaves
    steps = [python_step("jaxgpt", "print('one')", 10, log="jaxgpt.log"), python_step("record", "print('two')", 10,
                                                                                       log="record.log")]
    summary = device_plan.run_plan(steps, options)
    assert [step["status"] for step in summary["steps"].values()] == ["ok", "ok"]
    assert "jaxgpt.log" in summary["publish_errors"] and "two" in (options.out / "record.log").read_text()
    assert not (options.out / ".summary.json.partial").exists()
    assert json.loads((options.out / device_plan.SUMMARY_JSON).read_text())["steps"]["record"]["status"] == "ok"


def test_the_rest_archive_is_capped_and_says_what_it_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(device_plan, "ARCHIVE_CAP", 300_000)
    code = "import os; [open(f'part{i}.bin', 'wb').write(os.urandom(100_000)) for i in range(5)]"
    step = Step("writes", 10, lambda work: Launch([sys.executable, "-c", code], cwd=work))
    summary = device_plan.run_plan([step], plan_options(tmp_path))
    archive = (tmp_path / "out" / device_plan.ARCHIVE)
    assert archive.stat().st_size <= 300_000
    with tarfile.open(archive) as opened:
        kept = [name for name in opened.getnames() if name.startswith("part")]
    assert len(kept) == 2 and len(summary["left_out_of_archive"]) == 3


def test_compile_caches_come_back_in_one_archive_and_warm_the_next_plan(tmp_path):
    # A compiling step writes one "kernel" into the Triton cache its environment names, unless
    # it is already there: the second plan, given the first's archive, compiles nothing.
    code = ("import os, pathlib; kernel = pathlib.Path(os.environ['TRITON_CACHE_DIR']) / 'abc' / 'k.cubin'; "
            "print('hit' if kernel.exists() else 'compiled', flush=True); kernel.parent.mkdir(parents=True, exist_ok=True); "
            "kernel.write_bytes(b'sm_90a')")
    step = Step("record", 10, lambda work: Launch([sys.executable, "-c", code]), log="record.log", compiles=True)
    first = device_plan.run_plan([step], plan_options(tmp_path / "one"))
    archive = tmp_path / "one" / "out" / device_plan.CACHES
    assert first["caches"]["state"] == "cold" and first["steps"]["record"]["compiled"]["triton_kernels"] == 1
    assert first["caches"]["packed"]["bytes"] == archive.stat().st_size <= device_plan.CACHES_CAP
    second = device_plan.run_plan([step], plan_options(tmp_path / "two", caches_archive=archive))
    assert second["caches"]["state"] == "warm" and second["caches"]["counts_at_start"]["triton_kernels"] == 1
    assert second["steps"]["record"]["compiled"]["triton_kernels"] == 0
    assert "hit" in (tmp_path / "two" / "out" / "record.log").read_text()
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not an archive")
    third = device_plan.run_plan([step], plan_options(tmp_path / "three", caches_archive=broken))
    assert third["caches"]["state"] == "cold" and "broken.tar.gz" in third["caches"]["restore_error"]


def test_the_command_refuses_a_deadline_past_one_device_command_and_strict_caps_over_it(tmp_path, capsys):
    from scripts import device_plan as command

    for args, said in [(["--deadline", "700"], "past the 580 s one device command can hold"),
                       (["--strict-caps", "--cap", "torch_ref=500"], "caps sum to")]:
        with pytest.raises(SystemExit) as refused:
            command.main(["--cpu", "--out", str(tmp_path / "out"), *args])
        assert refused.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_one_second_check_before_a_lease(tmp_path, capsys, stand_in):
    from scripts import device_plan as command

    script = tmp_path / "train_gpt.py"
    script.write_text(stand_in)
    broken = tmp_path / "caches.tar.gz"
    broken.write_bytes(b"not an archive")
    assert command.main(["--check", "--only", "preflight,jaxgpt"]) == 0
    printed = capsys.readouterr().out
    assert "steps preflight, jaxgpt: caps 120 s for 545 s before the deadline" in printed and "shards: " in printed
    # The record's step selected with a script that is not the record's, a broken caches' archive,
    # the caps over the deadline: each a problem, the status 1.
    assert command.main(["--check", "--record-script", str(script), "--caches", str(broken),
                         "--cap", "torch_ref=500"]) == 1
    printed = capsys.readouterr().out
    assert "PROBLEM: the record script's SHA-256" in printed and "PROBLEM: " in printed.split("SHA-256")[1]
    assert "torch_ref: cap 500 s, runs only on the time" in printed or "torch_ref: cap 500 s shrunk" in printed


def test_the_mosaic_ab_step_runs_jaxgpt_with_the_mosaic_kernels_under_its_own_name(tmp_path):
    """The A/B step of the Mosaic kernels: jaxgpt's command with `--attention mosaic`, its own run id and out
    folder, its log archived (not one of the flat published names); last in the plan on a GPU,
    absent from the CPU stand-ins, skipped with its reason when asked for on a CPU."""
    options = PlanOptions(out=tmp_path / "out", work=tmp_path / "work")
    steps = plan_steps.record_steps(options)
    assert [s.name for s in steps][-2:] == ["step_agreement", "jaxgpt_mosaic"]
    step = steps[-1]
    command = step.launch(tmp_path / "work").command
    assert command[command.index("--attention") + 1] == "mosaic" and command[command.index("--run-id") + 1] == "jaxgpt_mosaic"
    assert command[command.index("--out-dir") + 1] == str(tmp_path / "work" / "jaxgpt_mosaic") and step.log is None
    cpu = plan_steps.cpu_stand_ins(options)
    assert "jaxgpt_mosaic" not in [s.name for s in plan_steps.record_steps(cpu)]
    with pytest.raises(Skip, match="needs a GPU"):
        plan_steps.trainer_step("jaxgpt", cpu, name="jaxgpt_mosaic", attention="mosaic").launch(tmp_path / "work")
