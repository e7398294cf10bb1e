"""runkit.lock: a run owns its folders (docs/RELIABILITY.md, "Two runs, one folder").

The lock itself in this process and in child processes: a second lock refused naming its
holder, all or none, a folder's lock inside it, a holder killed with SIGKILL taken over with a
note, a file system without flock. Each trainer's use of it: tests/run/test_lock.py (jaxgpt),
tests/torch_ref/run/test_lock.py (torch_ref).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runkit import lock

REPO = Path(__file__).resolve().parents[2]


def place(folder: Path, name: str = "r") -> lock.Place:
    return lock.name_place(folder / name, f"the logs of run {name!r}", "pass another --run-id")


def hold_in_child(lock_file: Path) -> subprocess.Popen:
    """A child process that takes the lock of `lock_file`'s place and sleeps; returns once the
    lock holds its holder."""
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from runkit import lock
        lock.RunLock([lock.Place(Path({str(lock_file)!r}), "the place", "wait")]).acquire()
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)})
    lock.wait_for_holder(lock_file, child)
    return child


def test_a_second_lock_is_refused_naming_the_holder(tmp_path):
    first = lock.RunLock([place(tmp_path)]).acquire()
    with pytest.raises(lock.FolderInUseError) as refused:
        lock.RunLock([place(tmp_path)]).acquire()
    message = str(refused.value)
    assert "\n" not in message
    assert f"pid {os.getpid()} on host " in message and "started " in message and "pass another --run-id" in message
    assert str(tmp_path / "r.lock") in message
    first.release()
    assert not (tmp_path / "r.lock").exists()  # a clean release leaves no file
    lock.RunLock([place(tmp_path)]).acquire().release()  # free again


def test_all_or_none_and_released_on_an_exception(tmp_path):
    held = lock.RunLock([place(tmp_path, "b")]).acquire()
    both = lock.RunLock([place(tmp_path, "a"), place(tmp_path, "b")])
    with pytest.raises(lock.FolderInUseError):
        both.acquire()
    assert not (tmp_path / "a.lock").exists()  # the first one, taken, was given back
    held.release()
    with pytest.raises(RuntimeError), lock.RunLock([place(tmp_path, "a")]).acquire():
        raise RuntimeError("the run failed")
    lock.RunLock([place(tmp_path, "a")]).acquire().release()  # the failed run released it


def test_a_folder_lock_lives_inside_the_folder(tmp_path):
    folder = tmp_path / "checkpoints" / "r"
    taken = lock.RunLock([lock.folder_place(folder, "the checkpoint folder", "wait")]).acquire()
    assert (folder / lock.FOLDER_LOCK).is_file()
    with pytest.raises(lock.FolderInUseError, match="the checkpoint folder is in use"):
        lock.RunLock([lock.folder_place(tmp_path / "checkpoints" / "." / "r", "the checkpoint folder", "wait")]).acquire()
    taken.release()


def test_a_lock_left_by_a_process_killed_with_sigkill_is_taken_over_with_a_note(tmp_path):
    lock_file = tmp_path / "r.lock"
    child = hold_in_child(lock_file)
    with pytest.raises(lock.FolderInUseError, match=f"pid {child.pid} "):
        lock.RunLock([place(tmp_path)]).acquire()
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert lock.read_holder(lock_file).pid == child.pid  # the file stays; the kernel dropped the flock
    taken = lock.RunLock([place(tmp_path)]).acquire()
    assert len(taken.notes) == 1 and f"pid {child.pid} " in taken.notes[0] and "no longer running" in taken.notes[0]
    assert lock.read_holder(lock_file).pid == os.getpid()
    taken.release()


def test_without_flock_a_dead_pid_on_this_host_is_stale_and_a_live_one_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(lock, "fcntl", None)  # a file system without flock: the file is the lock
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = lock.Holder(child.pid, lock.this_holder().host, "then", "python -m jaxgpt.train")
    (tmp_path / "r.lock").write_text(json.dumps(dead.__dict__))
    taken = lock.RunLock([place(tmp_path)]).acquire()
    assert f"pid {child.pid} " in taken.notes[0]
    with pytest.raises(lock.FolderInUseError, match=f"pid {os.getpid()} "):  # this live process holds it now
        lock.RunLock([place(tmp_path)]).acquire()
    taken.release()
    elsewhere = lock.Holder(child.pid, "another-host", "then", "python -m jaxgpt.train")
    (tmp_path / "r.lock").write_text(json.dumps(elsewhere.__dict__))
    with pytest.raises(lock.FolderInUseError, match="on host another-host"):  # cannot be checked from here
        lock.RunLock([place(tmp_path)]).acquire()


@pytest.mark.parametrize("content", ["", "{}", "[1, 2]", '{"pid": "x"}', "\xff\xfe"])
def test_a_lock_file_without_a_readable_holder_says_what_to_do(tmp_path, monkeypatch, content):
    """(Without flock the file is the lock: one that names no holder is refused, never guessed.)"""
    monkeypatch.setattr(lock, "fcntl", None)
    (tmp_path / "r.lock").write_text(content, encoding="latin-1")
    with pytest.raises(lock.FolderInUseError, match="has not written its name into the lock file yet "
                                                    r"\(if no run is using it, delete the file\)"):
        lock.RunLock([place(tmp_path)]).acquire()


def test_the_places_a_run_id_names_and_their_remedy(tmp_path):
    logs = lock.logs_place(tmp_path / "logs", "r")
    assert logs == lock.Place(tmp_path.resolve() / "logs" / "r.lock", f"the logs of run 'r' in {tmp_path / 'logs'}",
                              "pass another --run-id")
    board = lock.tensorboard_place(str(tmp_path / "tb"), "r")
    assert board == lock.Place(tmp_path.resolve() / "tb" / "r.lock",
                               f"the TensorBoard folder of run 'r' in {tmp_path / 'tb'}", "pass another --run-id")
    assert (tmp_path / "logs").is_dir() and (tmp_path / "tb").is_dir()  # made, so that the lock file can be
