"""How far a running (or killed) step of the device plan got, from what it left on disk: the phase
its log lines show (the record's log format, RECORD.md section 9, which both trainers print) and
the compile caches' counts (Triton kernels built, Inductor kernels tuned, JAX programs). Cheap
enough to read every ~10 s; a killed compile then still says where it stood."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from jaxgpt_tools.gpu import compile_caches

# A training step's line and a validation line (gpu_check parses the same lines for times).
STEP_LINE = re.compile(r"^step:(\d+)/(\d+) train_time:")
VAL_LINE = re.compile(r"^step:(\d+)/(\d+) val_loss:")


def phase(log_text: str) -> str:
    """One phrase: where a run whose output so far is `log_text` stands."""
    trained, validated, total = 0, [], None
    for line in log_text.splitlines():
        if match := STEP_LINE.match(line):
            trained, total = int(match[1]), int(match[2])
        elif match := VAL_LINE.match(line):
            validated.append(int(match[1]))
            total = int(match[2])
    if total is not None and total in validated:
        return "done: final validation logged"
    if trained == 0:
        if not log_text.strip():
            return "starting: no output yet (imports)"
        if 0 in validated:
            return "step 1: compiling and running (after the step-0 validation)"
        return "step 1: setting up, compiling and running (no step logged yet)"
    if trained == total:
        return f"final validation: all {total} steps trained"
    # The first steps compile (a trainer's first, Inductor's recompiles on steps 1-2).
    return f"step {trained + 1} of {total}: {'compiling and ' if trained < 2 else ''}running ({trained} logged)"


def last_line(log_text: str, width: int = 160) -> str:
    lines = [line.strip() for line in log_text.strip().splitlines() if line.strip()]
    return lines[-1][:width] if lines else ""


def read(log: Path, elapsed_s: float, caches: Path | None) -> dict[str, Any]:
    """{"elapsed_s", "phase", "last_line"} and, with a cache root, its counts."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    progress: dict[str, Any] = {"elapsed_s": round(elapsed_s, 1), "phase": phase(text), "last_line": last_line(text)}
    if caches is not None:
        progress["caches"] = compile_caches.counts(caches)
    return progress
