"""The one convention of every command in scripts/ (and of the trainers' CLIs, which state it
themselves): exit status 0 when it did what was asked, 1 for a runtime error, 2 for a usage
error (argparse's own, or `usage_error`), 128 + the signal number when a signal ended it (130 on
Ctrl-C). An error is one line on stderr, `PROG: error: MESSAGE` as argparse writes usage errors;
the traceback only with JAXGPT_DEBUG=1 in the environment."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

# What a command turns into its one-line error: bad or missing files, bad values, failed children.
RUNTIME_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError, RuntimeError)


def one_line(error: BaseException) -> str:
    """The error's message on one line (a multi-line message joined with ' | ')."""
    text = str(error).strip() or type(error).__name__
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def fail(prog: str, error: BaseException | str) -> int:
    """Print `PROG: error: MESSAGE` on stderr; returns 1, the runtime-error status."""
    message = error if isinstance(error, str) else one_line(error)
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return 1


def run(prog: str, body: Callable[[], object]) -> int:
    """The command's work, `body()`, under the convention: its status when it returns an int
    (anything else, a result it printed, is 0), 1 with one line for a runtime error, 130 on Ctrl-C."""
    try:
        status = body()
        return status if type(status) is int else 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr, flush=True)
        return 130
    except RUNTIME_ERRORS as error:
        if os.environ.get("JAXGPT_DEBUG"):
            raise
        return fail(prog, error)


def usage_error(parser: argparse.ArgumentParser, error: BaseException | str) -> None:
    """A flag value the library refused: argparse's usage error (exit 2)."""
    parser.error(error if isinstance(error, str) else one_line(error))
