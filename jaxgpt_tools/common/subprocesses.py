"""Child processes of the tools: output streamed to a log file, a time limit that ends the
child's whole process group (a trainer's compiler workers included), and the log kept either way."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from jaxgpt_tools.common.artifacts import REPO_ROOT


@dataclass(frozen=True)
class Launch:
    """A child process: argv, working folder, environment (None: this process's)."""

    command: list[str]
    cwd: Path = REPO_ROOT
    env: dict[str, str] | None = None


def run_streamed(launch: Launch, log: Path, timeout_s: float) -> tuple[str, int | None]:
    """Run the child with stdout and stderr streamed into `log` (what it printed survives a kill);
    returns ("ok" | "failed" | "timed_out", return code). At the timeout the child's process group
    gets SIGTERM, then SIGKILL 5 s later, and a last line in the log says so."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        child = subprocess.Popen(launch.command, cwd=launch.cwd, env=launch.env, stdout=sink,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = child.wait(timeout=max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            kill_group(child)
            sink.write(f"\n[killed after {timeout_s:.0f} s: the time limit of this run]\n")
            return "timed_out", None
    return ("ok" if code == 0 else "failed"), code


def kill_group(child: subprocess.Popen) -> None:
    """SIGTERM to the child's process group, SIGKILL if it is still there 5 s later."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=5.0)
            return
        except subprocess.TimeoutExpired:
            continue


def log_tail(log: Path, lines: int = 3) -> str:
    """The last `lines` non-empty lines of a log, joined by ' | ' (for a one-line reason)."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])
