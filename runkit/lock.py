"""A run owns its folders: one exclusive lock per place it writes, held for the run's life.

Two runs writing into the same place (a requeued job while the first still runs, the same
command in a second terminal, a jaxgpt run and a torch_ref run on one folder) would interleave
their log records and race their checkpoint saves. So a run takes, before it writes anything
there, an exclusive `fcntl.flock` on one lock file per place (`RunLock`):

- a folder it writes (a checkpoint folder, `--resume DIR`): `DIR/.lock`;
- a name it writes under in a shared folder (`<log dir>/<run id>.*`, an `--export-torch`
  file, `<tensorboard>/<run id>`): the file `<name>.lock` beside it (`lock_path`).

The lock file holds who took it (`Holder`: pid, host, start time, command). A second run is
refused at once with `FolderInUseError`, one line naming the holder and what to do. The kernel
drops a flock when its process dies (SIGKILL, a crash; on a machine reset the file system
forgets it), and a clean release deletes the file, so a lock file found unlocked with a holder
in it was left by a run that died: it is taken over, with a line saying so (`RunLock.notes`,
printed by `announce`). Where the file system has no flock (ENOLCK, EOPNOTSUPP), the file itself
is the lock: taken over only when its holder's pid is not alive on this host.

Which places a run writes is both trainers' (runkit.places.run_places); which of its processes
owns them is each trainer's (jaxgpt.run.lock.take_for_processes, torch_ref.run.lock.take_for_run).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # not a POSIX system: the file itself is the lock
    fcntl = None  # type: ignore[assignment]

FOLDER_LOCK = ".lock"  # inside a folder a run owns
LOCK_SUFFIX = ".lock"  # beside a name a run writes under
NO_FLOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})
READ_TRIES = 5  # a holder being written by the run that just took the lock: read again this often
READ_PAUSE_S = 0.02


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: written into the lock file as JSON."""

    pid: int
    host: str
    started: str  # local time, "2026-11-27 01:52:08"
    command: str

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host}, started {self.started} ({self.command})"


@dataclass(frozen=True)
class Place:
    """One place a run writes: its lock file, and the remedy a refused run is told."""

    lock_file: Path
    what: str  # "the logs of run 'r'", "the checkpoint folder DIR"
    remedy: str  # "pass another --run-id", ...


class FolderInUseError(OSError):
    """Another live run holds the lock of a place this run would write (exit 1, one line)."""


def this_holder() -> Holder:
    """This process, its command as typed (`python -m jaxgpt.train ...`, `python -m torch_ref.train ...`;
    at most 200 characters)."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    command = " ".join([Path(argv[0]).name, *argv[1:]]) if argv else "?"
    return Holder(os.getpid(), platform.node(), time.strftime("%Y-%m-%d %H:%M:%S"), command[:200])


def folder_place(folder: Path, what: str, remedy: str) -> Place:
    """The lock of a whole folder: `folder/.lock` (the folder is created)."""
    folder.mkdir(parents=True, exist_ok=True)
    return Place(folder.resolve() / FOLDER_LOCK, what, remedy)


def lock_path(target: Path) -> Path:
    """The lock of the files a run writes under `target`'s name: `<target>.lock` beside it."""
    parent = target.parent.resolve()
    return parent / (target.name + LOCK_SUFFIX)


def name_place(target: Path, what: str, remedy: str) -> Place:
    target.parent.mkdir(parents=True, exist_ok=True)
    return Place(lock_path(target), what, remedy)


ANOTHER_RUN_ID = "pass another --run-id"  # the remedy of a place named by the run id
RESUME_LATER = "resume from it once that run has ended"  # the remedy of a --resume folder in use


def logs_place(log_dir: Path, run_id: str) -> Place:
    """The lock of a run's log files, `<log_dir>/<run id>.*` (jaxgpt's profiles go under the same
    run id: this lock covers them)."""
    return name_place(log_dir / run_id, f"the logs of run {run_id!r} in {log_dir}", ANOTHER_RUN_ID)


def tensorboard_place(tensorboard: str, run_id: str) -> Place:
    """The lock of a run's TensorBoard folder, `<tensorboard>/<run id>`."""
    return name_place(Path(tensorboard) / run_id, f"the TensorBoard folder of run {run_id!r} in {tensorboard}",
                      ANOTHER_RUN_ID)


def read_holder(path: Path) -> Holder | None:
    """The holder written in a lock file; None when it is empty or not a holder (being written,
    or not ours), after a few short tries."""
    for attempt in range(READ_TRIES):
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            fields = json.loads(path.read_text(encoding="utf-8"))
            return Holder(int(fields["pid"]), str(fields["host"]), str(fields["started"]), str(fields["command"]))
        if attempt < READ_TRIES - 1:
            time.sleep(READ_PAUSE_S)
    return None


def wait_for_holder(lock_file: Path, process: subprocess.Popen, timeout_s: float = 300) -> Holder:
    """The holder of `lock_file` once the run `process` has written itself there, for a caller
    that starts a run and must know it holds its folders (the refusal benchmark, both trainers'
    lock tests). RuntimeError if the process ends first or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        holder = read_holder(lock_file) if lock_file.exists() else None
        if holder is not None and holder.pid == process.pid:
            return holder
        if process.poll() is not None:
            raise RuntimeError(f"the process ended ({process.returncode}) before it held {lock_file}")
        time.sleep(0.05)
    raise RuntimeError(f"{lock_file} was not taken within {timeout_s} s")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # another user's process, or a pid no process can have
    return True


def in_use(place: Place, holder: Holder | None) -> FolderInUseError:
    who = holder.describe() if holder is not None else (
        "a run that has not written its name into the lock file yet (if no run is using it, delete the file)")
    return FolderInUseError(f"{place.what} is in use by another run: {who}; lock {place.lock_file}. "
                            f"Wait for that run to end or stop it, or {place.remedy}")


def stale_note(place: Place, holder: Holder | None) -> str:
    who = holder.describe() if holder is not None else "a run that left no holder"
    return (f"note: taking over the lock {place.lock_file} of {place.what}: it was left by {who}, "
            "which is no longer running (killed, or its machine restarted)")


def _write_holder(fd: int, holder: Holder) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(asdict(holder)).encode(), 0)
    os.fsync(fd)


def _same_file(fd: int, path: Path) -> bool:
    """The locked descriptor is still the file at `path` (a releasing run deletes it while
    holding the lock; a run that opened it just before then must open the new one)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _flock(place: Place, holder: Holder) -> tuple[int, str | None] | None:
    """(descriptor holding the flock, a stale note or None); None when flock is unsupported here."""
    while True:
        fd = os.open(place.lock_file, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise in_use(place, read_holder(place.lock_file)) from None
        except OSError as error:
            os.close(fd)
            if error.errno in NO_FLOCK:
                return None
            raise
        if not _same_file(fd, place.lock_file):
            os.close(fd)
            continue
        left = os.fstat(fd).st_size > 0  # a clean release deletes the file: a dead run's lock
        note = stale_note(place, read_holder(place.lock_file)) if left else None
        _write_holder(fd, holder)
        return fd, note


def _exclusive_file(place: Place, holder: Holder) -> tuple[int, str | None]:
    """Without flock: the file created exclusively is the lock; one left by a pid that is not
    alive on this host is taken over (a holder on another host cannot be checked: refused)."""
    note = None
    while True:
        try:
            fd = os.open(place.lock_file, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            previous = read_holder(place.lock_file)
            if previous is None or previous.host != holder.host or pid_alive(previous.pid):
                raise in_use(place, previous) from None
            note = stale_note(place, previous)
            with contextlib.suppress(FileNotFoundError):
                place.lock_file.unlink()
            continue
        _write_holder(fd, holder)
        return fd, note


class RunLock:
    """Exclusive locks on every place a run writes, taken in order, all or none: `acquire`
    raises FolderInUseError (the ones already taken released) when any is held by a live run.
    `release` (also on leaving a `with` block) deletes the lock files, then unlocks them; safe
    to call twice. `notes`: a line per stale lock taken over."""

    def __init__(self, places: Sequence[Place], holder: Holder | None = None) -> None:
        self.places = tuple(places)
        self.holder = holder or this_holder()
        self.notes: list[str] = []
        self._held: list[tuple[Place, int]] = []

    def acquire(self) -> RunLock:
        try:
            for place in self.places:
                taken = _flock(place, self.holder) if fcntl is not None else None
                fd, note = taken if taken is not None else _exclusive_file(place, self.holder)
                self._held.append((place, fd))
                if note is not None:
                    self.notes.append(note)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        while self._held:
            place, fd = self._held.pop()
            with contextlib.suppress(OSError):
                place.lock_file.unlink()
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class NoLock:
    """What a process that does not own its run's folders holds (process or rank p > 0): nothing."""

    notes: tuple[str, ...] = ()

    def release(self) -> None:
        pass

    def __enter__(self) -> NoLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


def announce(lock: RunLock) -> RunLock:
    """`lock`, once its stale-lock notes are printed on stderr (the owner of a run's folders)."""
    for note in lock.notes:
        print(note, file=sys.stderr, flush=True)
    return lock
