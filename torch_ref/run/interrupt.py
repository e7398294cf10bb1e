"""SIGINT / SIGTERM stop a torch_ref run between steps, never inside a step or a save.

The same convention as jaxgpt's trainer, one StopRequest for both (runkit.interrupt): the first
signal only records that a stop was asked for; the ranks agree at the top of each step on the
signal to stop on (`agree`, with the earliest non-finite loss), the loop saves the last
completed step when checkpointing is on, says where in one line (`interrupted`) and exits with
128 + the signal number (130 for SIGINT, 143 for SIGTERM). A second SIGINT falls back to
Python's KeyboardInterrupt, for a user who does not want to wait for the step.
"""

from __future__ import annotations

import math
import os
import signal
from typing import Any

import torch
import torch.distributed as dist

import runkit.interrupt
from runkit.interrupt import Interrupted


def interrupted(signum: int, step: int, saved_in: str | os.PathLike | None, resume: str | None) -> Interrupted:
    """The error of a run stopped at `step`, in one line: where the state after `step` is
    (`saved_in`: the checkpoint folder, None when nothing was written) and how to continue from
    it; `resume` is the run's --resume (still holding `step` when no step was completed since
    the start)."""
    head = f"interrupted by {signal.Signals(signum).name} at step {step}; "
    if saved_in is not None:
        return Interrupted(signum, head + f"the state after step {step} is in {saved_in} (continue with --resume {saved_in})")
    if resume is not None:
        return Interrupted(signum, head + f"no step was completed since the start; {resume} still holds step {step}")
    return Interrupted(signum, head + "no checkpoint was written (checkpointing is off: --checkpoint-every K or "
                       "--save-checkpoint)")


# Test hook (tests/torch_ref/test_train_multiprocess.py): "STEP:SIGNAL" (e.g. "1:SIGTERM",
# "2:SIGKILL") delivers SIGNAL to this process at the top of STEP, so that the ranks of one run
# receive a signal at different steps, or one of them dies at a known step.
TEST_SIGNAL_AT_STEP = "TORCH_REF_TEST_SIGNAL_AT_STEP"


class StopRequest(runkit.interrupt.StopRequest):
    """runkit's StopRequest with torch_ref's test hook (TEST_SIGNAL_AT_STEP); the ranks agree on
    its `signum` at the top of each step (`agree`)."""

    def __init__(self, announce: bool = True) -> None:
        super().__init__(TEST_SIGNAL_AT_STEP, announce)


_FAR_STEP = 2**40  # a step code FAR - step: the all-reduce's maximum is then the earliest step
_NONFINITE_VALUES = (float("inf"), float("-inf"), float("nan"))  # code = index + 1; the maximum prefers NaN


def agree(stop: StopRequest, nonfinite: tuple[int, float] | None,
          group: Any | None) -> tuple[int | None, tuple[int, float] | None]:
    """What every rank decides at the top of a step: the signal to stop on (None: go on) and
    the earliest non-finite train loss any rank has read, as (step, value) (None: none).

    With several ranks a signal may reach them on either side of a step's top, and a rank may
    read its loss of a step sooner than another; stopping on one rank alone would leave the
    others waiting in the next all-reduce. So the ranks take the maxima of what each saw, over
    a CPU (gloo) `group`: one 24-byte all-reduce per step that never waits on the accelerator.
    None: a single process."""
    if group is None:
        return stop.signum, nonfinite
    step_code, value_code = 0, 0
    if nonfinite is not None:
        value = nonfinite[1]
        step_code, value_code = _FAR_STEP - nonfinite[0], 3 if math.isnan(value) else 1 if value > 0 else 2
    flags = torch.tensor([stop.signum or 0, step_code, value_code], dtype=torch.int64)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=group)
    signum, step_code, value_code = flags.tolist()
    return signum or None, (_FAR_STEP - step_code, _NONFINITE_VALUES[value_code - 1]) if step_code else None
