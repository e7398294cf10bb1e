"""Interruptions of a training run: SIGINT / SIGTERM stop it between steps, never inside a save.

`StopRequest` (runkit's, as torch_ref's) turns the two signals into a flag; every process of the
run must stop at the same step (a process that stops alone leaves the others waiting in the next
collective), and a scheduler that preempts a job signals its processes at slightly different
moments. So the flag travels with the training step: each process feeds its own flag (0 or the
signal number) to the step, which takes the maximum over all devices beside its gradient
all-reduce, and the loop reads the result together with the step's loss, one step late as it
reads the loss. `agree` records the first signal so read; every process has then read the same
steps' results, so they all stop at the top of the same step, save the state they have (when
checkpointing is on) and raise `Interrupted`, which `jaxgpt.train.main` turns into exit code
128 + the signal (130 for SIGINT, 143 for SIGTERM), as torch_ref.train does. No host
synchronisation is added: a signal stops the run one to two steps after it arrives.
docs/RELIABILITY.md describes what is left on disk.
"""

from __future__ import annotations

import os
import signal

import runkit.interrupt
from runkit.interrupt import Interrupted

# Test hook (tests/test_failures.py): deliver SIGINT to this process right after the save of the
# given step was started, so the signal arrives while the asynchronous write is in flight.
TEST_INTERRUPT_AFTER_SAVE = "JAXGPT_TEST_INTERRUPT_AFTER_SAVE"
# Test hook (tests/test_train_multihost.py): "STEP:SIGNAL" (e.g. "2:SIGTERM", "3:SIGKILL")
# delivers SIGNAL to this process at the top of STEP, so that the processes of one run receive a
# signal at different steps, or one of them dies at a known step.
TEST_SIGNAL_AT_STEP = "JAXGPT_TEST_SIGNAL_AT_STEP"


def interrupted(signum: int, step: int, saved_in: str | None) -> Interrupted:
    """The error of a run stopped at `step`; `saved_in` is the checkpoint directory (as shown to
    the user) holding step `step`, or None when nothing was saved."""
    where = (f"the state after step {step} is in {saved_in} (continue with --resume {saved_in})" if saved_in is not None
             else "no checkpoint was written (checkpointing is off: --checkpoint-every K or --save-checkpoint)")
    return Interrupted(signum, f"interrupted by {signal.Signals(signum).name} at step {step}; {where}")


class StopRequest(runkit.interrupt.StopRequest):
    """runkit's StopRequest (SIGINT and SIGTERM only record `signum`) whose flag travels with the
    steps: the loop feeds `flag()` to each step, records the step's agreed flag with `agree`,
    and stops on `agreed` between steps, saves and exits cleanly. A second SIGINT falls back to
    Python's KeyboardInterrupt (the save in flight is still waited for)."""

    def __init__(self) -> None:
        super().__init__(TEST_SIGNAL_AT_STEP)
        self.agreed: int | None = None  # the signal every process stops on, once a step carried it
        self._interrupt_after_save = int(os.environ.get(TEST_INTERRUPT_AFTER_SAVE, -1))

    def flag(self) -> int:
        """This process's contribution to the next step's agreement: 0, or the signal number."""
        return self.signum or 0

    def agree(self, flag: int) -> None:
        """Record a step's agreed flag (the maximum over every process's `flag`)."""
        if flag and self.agreed is None:
            self.agreed = flag

    def saved(self, step: int) -> None:
        """Called once the save of `step` has started: the test hook's moment to send SIGINT."""
        if step == self._interrupt_after_save:
            os.kill(os.getpid(), signal.SIGINT)
