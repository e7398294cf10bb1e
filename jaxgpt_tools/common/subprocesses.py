"""Child processes of the tools: output streamed to a log file, a time limit, and nothing left
behind. A child runs in a process group of its own inside its parent's session: its whole group
(a trainer's compiler workers included) is ended after it, whether it finished, failed or ran out
of time, and it dies with its parent (Linux's parent-death signal), so a killed tool leaves no
step holding the GPU. A process that escapes its group (a new session of its own) is still found
by the marker variable its environment carries (`marked_processes`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jaxgpt_tools.common.artifacts import REPO_ROOT


@dataclass(frozen=True)
class Launch:
    """A child process: argv, working folder, environment (None: this process's)."""

    command: list[str]
    cwd: Path = REPO_ROOT
    env: dict[str, str] | None = None


def run_streamed(launch: Launch, log: Path, timeout_s: float, *, on_tick: Callable[[float], None] | None = None,
                 tick_s: float = 10.0, grace_s: float = 5.0) -> tuple[str, int | None]:
    """Run the child with stdout and stderr streamed into `log` (what it printed survives a kill);
    returns ("ok" | "failed" | "timed_out", return code). `on_tick(elapsed_s)` is called every
    `tick_s` while it runs. Afterwards, however it ended (an exception here included), its process
    group gets SIGTERM, then SIGKILL `grace_s` later; the log's last line says what was ended."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open("w") as sink:
        child = subprocess.Popen(_dying_with_this_process(launch.command), cwd=launch.cwd, env=launch.env,
                                 stdout=sink, stderr=subprocess.STDOUT, process_group=0)
        status, code = "timed_out", None
        try:
            while (left := timeout_s - (time.monotonic() - start)) > 0:
                try:
                    code = child.wait(timeout=min(tick_s, left))
                except subprocess.TimeoutExpired:
                    if on_tick is not None:
                        on_tick(time.monotonic() - start)
                    continue
                status = "ok" if code == 0 else "failed"
                break
        finally:
            ended = end_group(child.pid, grace_s)
            child.wait()
            if status == "timed_out":
                sink.write(f"\n[killed after {timeout_s:.0f} s: the time limit of this run]\n")
            elif ended:
                sink.write(f"\n[{ended} process(es) of this run's group outlived it and were ended]\n")
    return status, code


# Run first in the child, then exec'd into its command (a preexec_fn would run Python between fork
# and exec, which can deadlock in a parent with threads, as any process that imported JAX has):
# SIGKILL when the parent dies (kept across exec), and no start at all if it died already.
_DIE_WITH_PARENT = ("import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGKILL); "
                    "os.getppid() == int(sys.argv[1]) or sys.exit(137); os.execvp(sys.argv[2], sys.argv[2:])")


def _dying_with_this_process(command: list[str]) -> list[str]:
    """`command` behind a launcher that sets Linux's parent-death signal (elsewhere: unchanged)."""
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`, read from /proc (Linux); elsewhere
    [pgid] while the group exists."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for stat in proc.glob("[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields and fields[2] == str(pgid) and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def _stat_fields(stat: Path) -> list[str]:
    """/proc/PID/stat after the command name: state, ppid, pgrp, ... ([] when it vanished)."""
    try:
        text = stat.read_text()
    except OSError:
        return []
    return text[text.rfind(")") + 2:].split()


def end_group(pgid: int, grace_s: float = 5.0) -> int:
    """SIGTERM to process group `pgid`, SIGKILL to what is left `grace_s` later (a process that
    ignores SIGTERM included); returns how many live processes it had."""
    alive = len(group_members(pgid))
    if not alive:
        return 0
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return 0
    until = time.monotonic() + grace_s
    while time.monotonic() < until and group_members(pgid):
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return alive


def marked_processes(variable: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process but this one whose environment holds `variable`
    (Linux, /proc; [] elsewhere or where it may not be read)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        pid = int(environ.parent.name)
        try:
            held = (variable + "=").encode() in environ.read_bytes()
            cmdline = (environ.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = _stat_fields(environ.parent / "stat")
        if held and pid != os.getpid() and fields and fields[0] != "Z":
            found.append((pid, cmdline))
    return found


def end_marked(variable: str) -> list[str]:
    """SIGKILL every live process marked with `variable` (`marked_processes`); returns them as
    "PID COMMAND" lines."""
    ended = []
    for pid, cmdline in marked_processes(variable):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        ended.append(f"{pid} {cmdline[:200]}")
    return ended


def log_tail(log: Path, lines: int = 3) -> str:
    """The last `lines` non-empty lines of a log, joined by ' | ' (for a one-line reason)."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])
