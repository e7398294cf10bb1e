"""jaxgpt.run.interrupt: the stop is an error with exit code 128 + the signal and one line saying
where the state is; the stop flag travels with the steps (the signals' handling itself:
tests/runkit/test_interrupt.py; a real run stopped by SIGINT while its save is in flight:
tests/test_failures.py)."""

from __future__ import annotations

import os
import signal

from jaxgpt.run.interrupt import StopRequest, interrupted


def test_the_stop_message_names_where_the_state_is():
    saved = interrupted(signal.SIGINT, 3, "runs/checkpoints/a")
    assert saved.exit_code == 130
    assert str(saved) == ("interrupted by SIGINT at step 3; the state after step 3 is in runs/checkpoints/a "
                          "(continue with --resume runs/checkpoints/a)")
    unsaved = interrupted(signal.SIGTERM, 5, None)
    assert unsaved.exit_code == 143 and "no checkpoint was written (checkpointing is off" in str(unsaved)


def test_the_flag_travels_with_the_steps_and_the_first_agreed_one_stays(capsys):
    with StopRequest() as stop:
        assert stop.flag() == 0 and stop.agreed is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.flag() == signal.SIGTERM
        stop.agree(0)
        assert stop.agreed is None
        stop.agree(signal.SIGTERM)
        stop.agree(signal.SIGINT)
        assert stop.agreed == signal.SIGTERM
    assert "SIGTERM: stopping after this step" in capsys.readouterr().err
