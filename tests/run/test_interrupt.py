"""jaxgpt.run.interrupt: SIGINT / SIGTERM only ask the loop to stop between steps; the stop is an error with
exit code 128 + the signal and one line saying where the state is; the handlers are put back.
(A real run stopped by SIGINT while its save is in flight: tests/test_failures.py.)"""

from __future__ import annotations

import os
import signal

import pytest

from jaxgpt.run.interrupt import StopRequest, interrupted


def test_the_stop_message_names_where_the_state_is():
    saved = interrupted(signal.SIGINT, 3, "runs/checkpoints/a")
    assert saved.exit_code == 130
    assert str(saved) == ("interrupted by SIGINT at step 3; the state after step 3 is in runs/checkpoints/a "
                          "(continue with --resume runs/checkpoints/a)")
    unsaved = interrupted(signal.SIGTERM, 5, None)
    assert unsaved.exit_code == 143 and "no checkpoint was written (checkpointing is off" in str(unsaved)


def test_a_signal_is_recorded_not_raised_and_the_handlers_are_put_back(capsys):
    before = {signum: signal.getsignal(signum) for signum in StopRequest.SIGNALS}
    with StopRequest() as stop:
        assert stop.signum is None
        os.kill(os.getpid(), signal.SIGTERM)  # delivered to this (main) thread before kill returns
        assert stop.signum == signal.SIGTERM
    assert {signum: signal.getsignal(signum) for signum in StopRequest.SIGNALS} == before
    assert "SIGTERM: stopping after this step" in capsys.readouterr().err


def test_a_second_sigint_abandons_the_step():
    with StopRequest() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.signum == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
