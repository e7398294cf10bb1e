"""What both trainers check before their first step that involves no framework: every folder a
run writes to exists and takes a file (each trainer's run.preflight lists its own places)."""

from __future__ import annotations

import uuid
from pathlib import Path


def check_writable(directory: Path, what: str) -> None:
    """Create `directory` if needed and prove a file can be written there; ValueError otherwise
    (checked before the first step, so no trained state is lost to a bad path at the end)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-test-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise ValueError(f"{what} {directory} is not writable: {error.strerror or error}") from None
