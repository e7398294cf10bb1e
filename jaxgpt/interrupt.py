"""Interruptions of a training run: SIGINT / SIGTERM stop it between steps, never inside a save.

`StopRequest` turns the two signals into a flag the loop reads between steps; the loop then
saves the state it has (when checkpointing is on) and raises `Interrupted`, which
`jaxgpt.train.main` turns into exit code 128 + the signal (130 for SIGINT, 143 for SIGTERM),
as torch_ref.train does. docs/RELIABILITY.md describes what is left on disk.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

# Test hook (tests/test_failures.py): deliver SIGINT to this process right after the save of the
# given step was started, so the signal arrives while the asynchronous write is in flight.
TEST_INTERRUPT_AFTER_SAVE = "JAXGPT_TEST_INTERRUPT_AFTER_SAVE"


class Interrupted(Exception):
    """The run stopped on a signal; `exit_code` is 128 + the signal number (130 for SIGINT)."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


def interrupted(signum: int, step: int, saved_in: str | None) -> Interrupted:
    """The error of a run stopped at `step`; `saved_in` is the checkpoint directory (as shown to
    the user) holding step `step`, or None when nothing was saved."""
    where = (f"the state after step {step} is in {saved_in} (continue with --resume {saved_in})" if saved_in is not None
             else "no checkpoint was written (checkpointing is off: --checkpoint-every K or --save-checkpoint)")
    return Interrupted(signum, f"interrupted by {signal.Signals(signum).name} at step {step}; {where}")


class StopRequest:
    """While active (a `with` block on the main thread), SIGINT and SIGTERM only record that a
    stop was asked for; the loop checks `signum` between steps, saves and exits cleanly. A
    second SIGINT falls back to Python's KeyboardInterrupt (the save in flight is still waited for)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}
        self._interrupt_after_save = int(os.environ.get(TEST_INTERRUPT_AFTER_SAVE, -1))

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print(f"\n{signal.Signals(signum).name}: stopping after this step (Ctrl-C again to abandon it)",
              file=sys.stderr, flush=True)

    def saved(self, step: int) -> None:
        """Called once the save of `step` has started: the test hook's moment to send SIGINT."""
        if step == self._interrupt_after_save:
            os.kill(os.getpid(), signal.SIGINT)

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
