"""One line per failure: what third-party libraries print when they fail inside our code.

orbax, tensorstore and asyncio report a failure themselves before (or instead of) raising it to
us: orbax logs each failed save or restore through absl at ERROR level with its traceback (a
concurrent save printed 40 lines before the run's own one-line error), the coroutines of a
failed restore are garbage-collected with "Exception ignored in ..." tracebacks (Python's
unraisable hook), and their event loop's late callbacks raise "Event loop is closed" the same
way. Our code catches the error that reaches it and says it in one line (checkpoint.
CorruptCheckpointError, CheckpointSaveError, convert's torch.load errors, data's shard errors),
so `third_party_errors(debug=False)`, held by the commands for their whole run:

- drops the ERROR records of those libraries' loggers (the error itself reaches our code) and
  keeps the first line of their warnings, without a traceback;
- drops unraisable exceptions (collected at the end), and afterwards those raised in the
  libraries' code (their threads outlive the failure: a late "Event loop is closed");
- prints a failed thread's exception as one `warning:` line, and drops the RuntimeWarning of a
  coroutine never awaited (a failed restore's).

With `--debug` nothing changes: every traceback is shown.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

LIBRARY_LOGGERS = ("absl", "orbax", "tensorstore")
MAX_LINE = 300


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:MAX_LINE]


class OneLine(logging.Filter):
    """Drops ERROR records (the error reaches our code) and shortens the rest to one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return False
        record.msg, record.args = first_line(record.getMessage()), ()
        record.exc_info = record.exc_text = record.stack_info = None
        return True


def thread_failed(args: threading.ExceptHookArgs) -> None:
    name = args.thread.name if args.thread is not None else "?"
    print(f"warning: background thread {name} failed ({args.exc_type.__name__}: {first_line(str(args.exc_value))})",
          file=sys.stderr)


LIBRARY_PATHS = ("/orbax/", "/tensorstore/", "/asyncio/")


def from_library(unraisable: Any) -> bool:
    """An unraisable exception raised in orbax, tensorstore or asyncio code (a failed restore's
    coroutine collected, a late callback on a closed event loop)."""
    frames = traceback.extract_tb(unraisable.exc_traceback) if unraisable.exc_traceback is not None else []
    return any(marker in frame.filename for frame in frames for marker in LIBRARY_PATHS)


class LateLibraryFilter:
    """The unraisable hook after the block: the libraries' late reports (their threads outlive
    the failure) are dropped, anything else goes to the hook that was there before."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        if not from_library(unraisable):
            self.previous(unraisable)


@contextlib.contextmanager
def third_party_errors(debug: bool) -> Iterator[None]:
    """Inside: the libraries' own failure reports are one line or none (module docstring);
    unchanged with `debug`."""
    if debug:
        yield
        return
    one_line = OneLine()
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    saved_unraisable, saved_thread_hook = sys.unraisablehook, threading.excepthook
    for logger in loggers:
        logger.addFilter(one_line)
    sys.unraisablehook, threading.excepthook = (lambda unraisable: None), thread_failed
    failed = True
    try:
        with warnings.catch_warnings():  # a failed restore's coroutines, collected unawaited
            warnings.filterwarnings("ignore", message=r"coroutine '.*' was never awaited", category=RuntimeWarning)
            yield
        failed = False
    finally:
        if failed:  # a failed restore's coroutines are reported when collected: here, not at exit
            gc.collect()  # (only then: a whole-heap collection costs a second in a large process)
        late = saved_unraisable if isinstance(saved_unraisable, LateLibraryFilter) else LateLibraryFilter(saved_unraisable)
        sys.unraisablehook, threading.excepthook = late, saved_thread_hook
        for logger in loggers:
            logger.removeFilter(one_line)
