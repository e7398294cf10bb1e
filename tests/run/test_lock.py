"""jaxgpt's trainer on runkit.lock: a run owns its folders (docs/RELIABILITY.md, "Two runs, one
folder"; the lock itself: tests/runkit/test_lock.py).

A second run on the folders of a running one is refused at once with one line naming the
holder (the first stopped with SIGSTOP while the second tries, so nothing depends on timing), a
resume of its checkpoint folder likewise, the first finishes unharmed with a JSONL of its own
records only and every path it wrote inside --out-dir; a real trainer killed with SIGKILL leaves
a lock the next run takes over; one owner among the processes of a run (jaxgpt.run.lock).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxgpt import data
from jaxgpt import train as train_lib
from jaxgpt.run import lock as run_lock
from jaxgpt.run.cli import PROG
from jaxgpt.testing import free_port, kill_children, log_tail, start_children, wait_children
from runkit import lock

REPO = Path(__file__).resolve().parents[2]


def place(folder: Path, name: str = "r") -> lock.Place:
    return lock.name_place(folder / name, f"the logs of run {name!r}", "pass another --run-id")


# The trainer -----------------------------------------------------------------------------------


VOCAB = 1024  # with 64-wide layers and 128-token batches: the run compiles in well under a minute


def shards(folder: Path) -> tuple[str, str]:
    """Train and val shards in `folder`, marked complete."""
    rng = np.random.default_rng(0)
    folder.mkdir()
    (folder / data.COMPLETE_MARKER).write_text("")
    data.write_shard(folder / "t_train_000001.bin", rng.integers(0, VOCAB, 20_000))
    data.write_shard(folder / "t_val_000000.bin", rng.integers(0, VOCAB, 5_000))
    return str(folder / "t_train_*.bin"), str(folder / "t_val_*.bin")


def run_args(shard_globs: tuple[str, str], out: Path, *extra: str) -> list[str]:
    return ["--preset", "smoke", "--train-files", shard_globs[0], "--val-files", shard_globs[1], "--vocab-size",
            str(VOCAB), "--eot-id", "0", "--model-dim", "64", "--num-heads", "1", "--seq-len", "128", "--batch-tokens",
            "128", "--val-tokens", "128", "--window-max-tokens", "128", "--steps", "4", "--val-every", "100", "--devices",
            "1", "--out-dir", str(out), "--no-progress", *extra]


def tree(root: Path) -> set[Path]:
    return {path for path in root.rglob("*")}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Run A (a subprocess: 4 steps, a checkpoint every 2) stopped with SIGSTOP once it holds
    its folders; while it is stopped, run B (the same command) and a resume of A's checkpoint
    folder, both in this process; then A continues and ends. Returns what each left."""
    root = tmp_path_factory.mktemp("two_runs")
    shard_globs = shards(root / "data")
    work = root / "work"
    work.mkdir()
    out = work / "out"
    before = tree(root)
    args = run_args(shard_globs, out, "--checkpoint-every", "2", "--run-id", "same", "--val-every", "2")
    first = subprocess.Popen([sys.executable, "-m", "jaxgpt.train", *args], cwd=work, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    holder = lock.wait_for_holder(out / "checkpoints" / "same" / lock.FOLDER_LOCK, first)  # the last of its locks
    first.send_signal(signal.SIGSTOP)  # holds its locks, writes nothing, while the others try
    try:
        refusals = {}
        resume = run_args(shard_globs, out, "--resume", str(out / "checkpoints" / "same"))
        for name, argv in (("second", args), ("resume", resume)):
            with contextlib.redirect_stderr(io.StringIO()) as err:
                code = train_lib.main(argv)
            refusals[name] = (code, err.getvalue())
    finally:
        first.send_signal(signal.SIGCONT)
    stdout, stderr = first.communicate(timeout=600)
    return dict(first=(first.returncode, stdout, stderr), holder=holder, refusals=refusals, out=out, root=root,
                before=before)


def refusal(two_runs, name: str) -> str:
    """The one line of a refused run (exit 1, no traceback)."""
    code, err = two_runs["refusals"][name]
    assert code == 1, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err.strip()


@pytest.mark.slow
def test_a_second_run_on_the_same_folders_is_refused_with_one_line(two_runs):
    holder = two_runs["holder"]
    assert holder.command.split()[1:3] == ["-m", "jaxgpt.train"]
    line = refusal(two_runs, "second")
    assert line.startswith(f"{PROG}: error: the logs of run 'same' in {two_runs['out'] / 'logs'} is in use by another run: "
                           f"pid {holder.pid} on host {holder.host}, started {holder.started} ({holder.command})")
    assert line.endswith("Wait for that run to end or stop it, or pass another --run-id")


@pytest.mark.slow
def test_a_resume_of_the_running_folder_is_refused(two_runs):
    line = refusal(two_runs, "resume")
    folder = two_runs["out"] / "checkpoints" / "same"
    assert f"error: the checkpoint folder {folder} is in use by another run: pid {two_runs['holder'].pid} " in line
    assert line.endswith("or resume from it once that run has ended")


@pytest.mark.slow
def test_the_first_run_is_unharmed_and_its_jsonl_is_its_own(two_runs):
    code, _, stderr = two_runs["first"]
    assert code == 0, stderr
    out = two_runs["out"]
    records = [json.loads(line) for line in (out / "logs" / "same.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["step"]) for r in records] == [("val", 0), ("train", 1), ("train", 2), ("val", 2),
                                                          ("train", 3), ("train", 4), ("val", 4)]
    assert {r["run_id"] for r in records} == {"same"} and {r["framework"] for r in records} == {"jaxgpt"}
    assert (out / "logs" / "same.txt").read_text().count("config: ") == 1  # one run's header
    assert sorted(p.name for p in (out / "checkpoints" / "same").iterdir()) == ["2", "4"]  # lock file gone


@pytest.mark.slow
def test_every_path_the_runs_wrote_is_inside_out_dir(two_runs):
    out = two_runs["out"]
    written = tree(two_runs["root"]) - two_runs["before"]
    assert written and all(path == out or out in path.parents for path in written), sorted(written)
    assert not [path for path in written if path.name.endswith(".lock")]  # released on exit


def test_a_killed_trainer_leaves_a_lock_that_the_next_run_takes_over(tmp_path, capsys):
    shard_globs = shards(tmp_path / "data")
    out = tmp_path / "out"
    args = run_args(shard_globs, out, "--run-id", "k", "--checkpoint-every", "2")
    killed = subprocess.Popen([sys.executable, "-m", "jaxgpt.train", *args], cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    lock.wait_for_holder(out / "checkpoints" / "k" / lock.FOLDER_LOCK, killed)  # the last of its two locks
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    # The next run takes both locks over, then stops at its first check (--steps beyond the data).
    assert train_lib.main([*args, "--steps", "1000000"]) == 1
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("note: taking over the lock")]
    assert len(notes) == 2 and all(f"pid {killed.pid} " in note for note in notes), err
    assert "error: training data exhausted" in err
    assert not (out / "logs" / "k.lock").exists() and not (out / "checkpoints" / "k" / ".lock").exists()


class FakeKeyValueStore:
    """jax.distributed's key-value client, as the processes of one run share it."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def key_value_set(self, key: str, value: str) -> None:
        self.values[key] = value

    def blocking_key_value_get(self, key: str, timeout_ms: int) -> str:
        if key not in self.values:
            raise TimeoutError(f"no {key} within {timeout_ms} ms")
        return self.values[key]


@pytest.mark.parametrize("free", [True, False])
def test_one_owner_among_the_processes_of_a_run(tmp_path, monkeypatch, free):
    """Process 0 takes the locks and says so; process 1 takes none and follows its answer."""
    from jaxgpt import compat  # noqa: PLC0415

    store = FakeKeyValueStore()
    monkeypatch.setattr(compat, "distributed_client", lambda: store)

    def take(process_index):
        # Each process numbers its runs from 0; here one process plays both, so restart the count.
        monkeypatch.setattr(run_lock, "_RUNS", itertools.count())
        return run_lock.take_for_processes([place(tmp_path)], process_index=process_index, process_count=2)

    held = None if free else lock.RunLock([place(tmp_path)]).acquire()  # another run holds the folder
    if free:
        owner = take(0)
        assert isinstance(owner, lock.RunLock) and (tmp_path / "r.lock").exists()
        assert isinstance(take(1), lock.NoLock)
        owner.release()
        return
    with pytest.raises(lock.FolderInUseError):
        take(0)
    with pytest.raises(lock.FolderInUseError, match="process 0 could not take the run's locks: the logs of run 'r' is"):
        take(1)
    held.release()


def test_a_process_that_never_hears_from_process_0_stops(tmp_path, monkeypatch):
    from jaxgpt import compat  # noqa: PLC0415

    monkeypatch.setattr(compat, "distributed_client", lambda: FakeKeyValueStore())
    with pytest.raises(lock.FolderInUseError, match="process 0 did not say within 60 s"):
        run_lock.take_for_processes([place(tmp_path)], process_index=1, process_count=2)


# Two real processes of one run, a third run holding the folder ---------------------------------


# The third run: takes the places a run "same" under OUT writes (its logs, its checkpoint folder),
# as a trainer does, and holds them until its stdin closes.
HOLDER = ("import sys; from runkit import lock, places; "
          "held = lock.RunLock(places.run_places(sys.argv[1], 'same', resume=None, saves=True)).acquire(); "
          "sys.stdin.read(); held.release()")


def loopback_environment() -> dict[str, str]:
    """A child of a 2-process CPU job over loopback: one device each (tests/test_train_multihost.py's
    setting, without its second device), gloo collectives."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=1",
           "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo", "PYTHONPATH": str(REPO)}
    for name in ("JAX_COORDINATOR_ADDRESS", "JAXGPT_DISTRIBUTED"):
        env.pop(name, None)
    return env


def snapshot(root: Path) -> dict[Path, bytes | None]:
    """Every path under `root` with its bytes (None: a folder)."""
    return {path: None if path.is_dir() else path.read_bytes() for path in root.rglob("*")}


@pytest.mark.parametrize("process_1_late_s", [0.0, 4.0], ids=["together", "process_1_slow_to_start"])
def test_both_processes_of_a_run_are_refused_by_a_third_runs_lock(tmp_path, process_1_late_s):
    """Process 0 of a 2-process run (loopback coordinator) meets the folder held by a third run
    and is refused; process 1 learns it through jax.distributed's key-value store: both exit 1
    with one line naming the holder, and nothing under the folders changes. With process 1
    started seconds late, process 0 waits for it (jax.distributed joins every process first)
    and both are refused the same way."""
    shard_globs = shards(tmp_path / "data")
    work, out = tmp_path / "work", tmp_path / "work" / "out"
    work.mkdir()
    children: list[subprocess.Popen] = []
    third = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=work, stdin=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        holder = lock.wait_for_holder(out / "checkpoints" / "same" / lock.FOLDER_LOCK, third, timeout_s=60)
        before = snapshot(tmp_path)
        coordinator = f"127.0.0.1:{free_port()}"
        commands = [[sys.executable, "-m", "jaxgpt.train", *run_args(shard_globs, out, "--run-id", "same"),
                     "--checkpoint-every", "2", "--devices", "2", "--coordinator", coordinator,
                     "--num-processes", "2", "--process-id", str(process_id)] for process_id in (0, 1)]
        logs = [tmp_path / f"process{process_id}.log" for process_id in (0, 1)]
        children = start_children(commands[:1], [loopback_environment()], logs[:1], work)
        with contextlib.suppress(subprocess.TimeoutExpired):
            children[0].wait(timeout=process_1_late_s)  # a refused process 0 would end within this
        process_0_waited = children[0].poll() is None
        children += start_children(commands[1:], [loopback_environment()], logs[1:], work)
        codes = wait_children(children, logs, timeout_s=120)
        after = snapshot(tmp_path)
    finally:
        kill_children(children)
        third.communicate(timeout=30)
    outputs = [log_tail(log) for log in logs]
    assert process_0_waited, outputs[0]  # jax.distributed joins every process before process 0 takes a lock
    in_use = (f"the logs of run 'same' in {out / 'logs'} is in use by another run: pid {holder.pid} on host "
              f"{holder.host}, started {holder.started} ({holder.command})")
    for process_id, (code, output) in enumerate(zip(codes, outputs, strict=True)):
        errors = [line for line in output.splitlines() if line.startswith(f"{PROG}: error: ")]
        assert code == 1 and len(errors) == 1 and "Traceback" not in output, f"process {process_id}:\n{output}"
        told = "" if process_id == 0 else "process 0 could not take the run's locks: "
        assert errors[0].startswith(f"{PROG}: error: {told}{in_use}"), output
        assert errors[0].endswith("Wait for that run to end or stop it, or pass another --run-id"), output
    assert {path: after[path] for path in before} == before and set(after) - set(before) == set(logs)


# The refusal before the heavy imports ----------------------------------------------------------


FRAMEWORKS = {"jax", "jaxlib", "flax", "optax", "orbax", "tensorstore", "numpy", "torch"}


def imports_of(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """`python -X importtime ARGV`: (the finished process, the top-level names of every module
    it imported, read from the interpreter's own import log on stderr)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    names = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()
             if line.startswith("import time:")}
    return done, names


def test_a_second_run_is_refused_and_help_answered_before_jax_is_imported(tmp_path):
    """The command (jaxgpt.train) takes a one-process run's locks before it imports jax, flax
    or orbax: a run on folders another run holds is refused with the holder's line having
    imported none of them, and --help likewise. The imports are asserted, not the time
    (scripts/refusal_time.py measures it: docs/BENCHMARKS.md)."""
    shard_globs = shards(tmp_path / "data")
    out = tmp_path / "out"
    third = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=tmp_path, stdin=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        holder = lock.wait_for_holder(out / "checkpoints" / "same" / lock.FOLDER_LOCK, third, timeout_s=60)
        refused, imported = imports_of(["-m", "jaxgpt.train", *run_args(shard_globs, out, "--run-id", "same")],
                                       tmp_path)
    finally:
        third.communicate(timeout=30)
    errors = [line for line in refused.stderr.splitlines() if not line.startswith("import time:")]
    assert refused.returncode == 1 and len(errors) == 1, refused.stderr[-3000:]
    assert errors[0].startswith(f"{PROG}: error: the logs of run 'same' in {out / 'logs'} is in use by another run: "
                                f"pid {holder.pid} ")
    assert "jaxgpt" in imported and not imported & FRAMEWORKS, sorted(imported & FRAMEWORKS)
    helped, imported = imports_of(["-m", "jaxgpt.train", "--help"], tmp_path)
    assert helped.returncode == 0 and "usage:" in helped.stdout and not imported & FRAMEWORKS


def test_the_loop_and_the_step_are_reached_through_the_command_module_as_before():
    """Callers written before the split (`train_lib.train`, `train_lib.build_model`) get the
    loop's and the step's own objects; an unknown name is still an AttributeError."""
    from jaxgpt import loop, step  # noqa: PLC0415

    assert train_lib.train is loop.train and train_lib.RunResult is loop.RunResult
    assert train_lib.build_model is step.build_model and train_lib.AXIS == step.AXIS
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = train_lib.no_such_name
