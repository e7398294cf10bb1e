"""Progress lines of the tools, one format: `[tag HH:MM:SS] message` on stderr (stdout stays for
what a command prints as its result)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def progress(tag: str, message: str) -> None:
    print(f"[{tag} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def logger(tag: str) -> Callable[[str], None]:
    """A one-argument `progress` for `tag` (what a library function takes as its `log`)."""
    return lambda message: progress(tag, message)
