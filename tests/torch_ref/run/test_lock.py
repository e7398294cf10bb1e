"""torch_ref's trainer on runkit.lock and runkit.names, through `python -m torch_ref.train`
(jaxgpt's: tests/run/test_lock.py, tests/run/test_names.py; the lock and the names themselves:
tests/runkit/). A run stopped with SIGSTOP once it holds its folders; meanwhile the same command
and a resume of its folder are refused with one line; it then ends unharmed, with a JSONL of its
own records only and every path it wrote inside --out-dir. A run killed with SIGKILL leaves a
lock the next run takes over with a note."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runkit import lock
from runkit.lock import wait_for_holder
from torch_ref import train as train_lib
from torch_ref.run.cli import PROG

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.usefixtures("one_thread")


def start(args: list[str], cwd: Path, **streams) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "torch_ref.train", *args], cwd=cwd, env=env, text=True, **streams)


def refused(argv: list[str]) -> str:
    """main(argv) returns 1 with one line and no traceback; returns that line."""
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert train_lib.main(argv) == 1, err.getvalue()
    assert len(err.getvalue().splitlines()) == 1 and "Traceback" not in err.getvalue(), err.getvalue()
    return err.getvalue().strip()


def test_a_second_run_and_a_resume_are_refused_and_the_first_is_unharmed(small_run, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out"
    before = set(tmp_path.rglob("*"))
    args = small_run.args(out, "--checkpoint-every", "2", "--run-id", "same", "--val-every", "2")
    first = start(args, work, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    holder = wait_for_holder(out / "checkpoints" / "same" / lock.FOLDER_LOCK, first)  # the last of its locks
    first.send_signal(signal.SIGSTOP)
    try:
        second = refused(args)
        resume = refused(small_run.args(out, "--resume", str(out / "checkpoints" / "same")))
    finally:
        first.send_signal(signal.SIGCONT)
    _, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    assert second.startswith(f"{PROG}: error: the logs of run 'same' in {out / 'logs'} is in use by another "
                             f"run: pid {holder.pid} on host {holder.host}, started {holder.started} ({holder.command})")
    assert holder.command.split()[1:3] == ["-m", "torch_ref.train"] and second.endswith("or pass another --run-id")
    assert f"the checkpoint folder {out / 'checkpoints' / 'same'} is in use by another run: pid {holder.pid} " in resume
    records = [json.loads(line) for line in (out / "logs" / "same.jsonl").read_text().splitlines()]
    assert sorted((r["kind"], r["step"]) for r in records) == [("train", 1), ("train", 2), ("train", 3), ("train", 4),
                                                                ("val", 0), ("val", 2), ("val", 4)]
    assert {r["run_id"] for r in records} == {"same"}
    assert sorted(p.name for p in (out / "checkpoints" / "same").iterdir()) == ["2.pt", "4.pt"]  # lock file gone
    written = set(tmp_path.rglob("*")) - before
    assert written and all(path == out or out in path.parents for path in written), sorted(written)


def test_a_killed_run_leaves_a_lock_that_the_next_run_takes_over(small_run, tmp_path, capsys):
    args = small_run.args(tmp_path / "out", "--run-id", "k", "--checkpoint-every", "2")
    killed = start(args, tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_holder(tmp_path / "out" / "checkpoints" / "k" / lock.FOLDER_LOCK, killed)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert train_lib.main([*args, "--steps", "1000"]) == 1  # takes both locks over, then stops at a check
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("note: taking over the lock")]
    assert len(notes) == 2 and all(f"pid {killed.pid} " in note for note in notes), err
    assert "1000 steps need 1000" in err
    assert not list(tmp_path.rglob("*.lock")) and not list(tmp_path.rglob(lock.FOLDER_LOCK))


@pytest.mark.parametrize("text", ["../../escape", ".hidden", "a/b", "tab\there", ".."])
def test_a_run_id_that_is_not_a_plain_name_is_a_usage_error(small_run, tmp_path, capsys, text):
    with pytest.raises(SystemExit) as exited:
        train_lib.main(small_run.args(tmp_path / "out", "--run-id", text))
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --run-id: --run-id " in err and "is not a plain name" in err
    assert not (tmp_path / "out").exists()



# The refusal before torch is imported ----------------------------------------------------------


HEAVY = {"torch", "numpy", "triton"}
# Another run holding the logs of run "same" under the folder given, until its stdin closes.
HOLDER = ("import sys; from pathlib import Path; from runkit import lock; "
          "held = lock.RunLock([lock.logs_place(Path(sys.argv[1]) / 'logs', 'same')]).acquire(); "
          "sys.stdin.read(); held.release()")


def imports_of(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """`python -X importtime ARGV`: (the finished process, the top-level names of every module
    it imported, read from the interpreter's own import log on stderr)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    names = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()
             if line.startswith("import time:")}
    return done, names


@pytest.mark.parametrize("device", [[], ["--device", "cpu"]], ids=["default_device", "cpu"])
def test_a_second_run_is_refused_and_help_answered_before_torch_is_imported(small_run, tmp_path, device):
    """The command (torch_ref.train) takes the run's locks before it imports torch (the default
    device is chosen after): a run on folders another run holds is refused with the holder's
    line having imported no torch, and --help likewise. The imports are asserted, not the time
    (scripts/refusal_time.py measures it: docs/BENCHMARKS.md)."""
    out = tmp_path / "out"
    third = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=tmp_path, stdin=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        holder = wait_for_holder(out / "logs" / ("same" + lock.LOCK_SUFFIX), third, timeout_s=60)
        args = [arg for arg in small_run.args(out, "--run-id", "same") if arg not in ("--device", "cpu")]
        refused_run, imported = imports_of(["-m", "torch_ref.train", *args, *device], tmp_path)
    finally:
        third.communicate(timeout=30)
    errors = [line for line in refused_run.stderr.splitlines() if not line.startswith("import time:")]
    assert refused_run.returncode == 1 and len(errors) == 1, refused_run.stderr[-3000:]
    assert errors[0].startswith(f"{PROG}: error: the logs of run 'same' in {out / 'logs'} is in use by another run: "
                                f"pid {holder.pid} ")
    assert "torch_ref" in imported and not imported & HEAVY, sorted(imported & HEAVY)
    helped, imported = imports_of(["-m", "torch_ref.train", "--help"], tmp_path)
    assert helped.returncode == 0 and "usage:" in helped.stdout and not imported & HEAVY


def test_the_loop_is_reached_through_the_command_module_as_before():
    from torch_ref import loop  # noqa: PLC0415

    assert train_lib.train is loop.train and train_lib.forward_backward is loop.forward_backward
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = train_lib.no_such_name
