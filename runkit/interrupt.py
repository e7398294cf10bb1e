"""SIGINT / SIGTERM stop a run between steps, never inside a step or a save, in both trainers.

While a `StopRequest` is active (a `with` block on the main thread) the first signal only
records that a stop was asked for (`signum`); the loop stops between steps, saves what it has
when checkpointing is on and raises `Interrupted`, whose exit code is 128 + the signal (130 for
SIGINT, 143 for SIGTERM). A second SIGINT falls back to Python's KeyboardInterrupt, for a user
who does not want to wait for the step. How the processes of one run agree on the step they stop
at, and the line that says where the state is, are each trainer's (its run.interrupt).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, Self


class Interrupted(Exception):
    """The run stopped on a signal; `exit_code` is 128 + the signal number (130 for SIGINT)."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


class StopRequest:
    """While active (a `with` block on the main thread), SIGINT and SIGTERM only set `signum`,
    with a line on stderr when `announce`. Test hook: the environment variable named
    `test_signal_env` (None: no hook), "STEP:SIGNAL" (e.g. "2:SIGTERM", "3:SIGKILL"), delivers
    SIGNAL to this process at the top of STEP (`starting`), so that the processes of one run
    receive a signal at different steps, or one of them dies at a known step."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, test_signal_env: str | None = None, announce: bool = True) -> None:
        self.signum: int | None = None  # the signal this process received
        self._announce = announce
        self._previous: dict[int, Any] = {}
        hook = os.environ.get(test_signal_env, "-1:SIGTERM") if test_signal_env is not None else "-1:SIGTERM"
        at_step, _, name = hook.partition(":")
        self._signal_at_step = (int(at_step), signal.Signals[name])

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if self._announce:
            print(f"\n{signal.Signals(signum).name}: stopping after this step (Ctrl-C again to abandon it)",
                  file=sys.stderr, flush=True)

    def starting(self, step: int) -> None:
        """Called at the top of every step: the test hook's moment to send its signal."""
        if step == self._signal_at_step[0]:
            os.kill(os.getpid(), self._signal_at_step[1])

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
