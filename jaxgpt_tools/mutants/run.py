"""A mutant run: its targeted tests, then (if it survived them) the suite, in a private copy."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from jaxgpt_tools.mutants.apply import apply_mutant, fresh_copy
from jaxgpt_tools.mutants.mutant import Mutant

Status = Literal["killed", "survived", "timeout", "equivalent", "error"]

# The fallback after the targeted tests: the parity suite and tests/, the harness's own tests left out.
SUITE = ("parity_tests", "tests")
SUITE_IGNORES = ("tests/tools/mutants",)
FAILED_LINE = re.compile(r"^(FAILED|ERROR) (\S+)")


@dataclass(frozen=True)
class Limits:
    """Seconds for the targeted phase and for the suite phase; a phase past its limit counts as surviving."""

    targeted_s: float = 300.0
    suite_s: float = 900.0
    suite_marker: str = "not gpu and not slow"  # the fallback's selection (the targeted phase runs every marker but gpu)
    run_suite: bool = True


@dataclass(frozen=True)
class Outcome:
    """One mutant's result: status, the test that killed it (or why none did), the phase, seconds."""

    id: str
    mode: str
    status: Status
    killed_by: str
    phase: str
    seconds: float
    tree: str = ""  # the commit whose files were mutated


    def as_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class PhaseResult:
    """A pytest run: its exit code (None: timed out), the first failing node id, the output's tail."""

    returncode: int | None
    first_failure: str
    tail: str


def pytest_command(targets: tuple[str, ...], marker: str, ignores: tuple[str, ...] = ()) -> list[str]:
    """pytest in this interpreter, stopping at the first failure, no cache written into the copy."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rfE", "-m", marker]
    command += [f"--ignore={path}" for path in ignores]
    return command + list(targets)


def first_failure(output: str) -> str:
    """The node id on pytest's first FAILED/ERROR summary line, or the last line of output."""
    for line in output.splitlines():
        match = FAILED_LINE.match(line)
        if match:
            return match.group(2)
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def child_env(root: Path, upstream_logs: Path | None) -> dict[str, str]:
    """The environment of a run in the copy `root`: its packages first on the path, the logs' folder."""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    if upstream_logs is not None and "JAXGPT_UPSTREAM_LOGS" not in env:
        env["JAXGPT_UPSTREAM_LOGS"] = str(upstream_logs)
    return env


def run_phase(command: list[str], root: Path, env: dict[str, str], timeout_s: float) -> PhaseResult:
    """Run `command` in `root`; on timeout the whole process group is ended (workers included)."""
    with subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True) as process:
        try:
            output, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            return PhaseResult(None, "timeout", output[-2000:])
    return PhaseResult(process.returncode, first_failure(output) if process.returncode else "", output[-2000:])


def verdict(mutant: Mutant, result: PhaseResult, phase: str, seconds: float) -> Outcome | None:
    """The outcome a phase settles (killed, timeout, harness error), or None to go on."""
    if result.returncode is None:
        return Outcome(mutant.id, mutant.mode, "timeout", f"{phase} past its limit", phase, seconds)
    if result.returncode in (4, 5):  # usage error or nothing collected: the catalogue's targets are stale
        return Outcome(mutant.id, mutant.mode, "error", f"pytest exit {result.returncode}: {result.first_failure}",
                       phase, seconds)
    if result.returncode != 0:
        return Outcome(mutant.id, mutant.mode, "killed", result.first_failure, phase, seconds)
    return None


def run_mutant(mutant: Mutant, base: Path, work: Path, limits: Limits, upstream_logs: Path | None = None) -> Outcome:
    """Apply `mutant` to a fresh copy of `base` at `work`, run its targets, then the suite if it survived."""
    started = time.monotonic()
    root = fresh_copy(base, work)
    apply_mutant(root, mutant)
    env = child_env(root, upstream_logs)
    phases = [("targeted", pytest_command(mutant.targets, "not gpu"), limits.targeted_s)]
    if limits.run_suite:
        phases.append(("suite", pytest_command(SUITE, limits.suite_marker, SUITE_IGNORES), limits.suite_s))
    try:
        for phase, command, timeout_s in phases:
            result = run_phase(command, root, env, timeout_s)
            outcome = verdict(mutant, result, phase, round(time.monotonic() - started, 1))
            if outcome is not None:
                return outcome
    finally:
        shutil.rmtree(work, ignore_errors=True)  # its links are removed, never followed
    status: Status = "equivalent" if mutant.equivalent else "survived"
    return Outcome(mutant.id, mutant.mode, status, "", phases[-1][0], round(time.monotonic() - started, 1))

