"""runkit.interrupt: SIGINT / SIGTERM only ask the loop to stop between steps (`StopRequest`, both
trainers'); a second SIGINT abandons the step; the handlers are put back; the test hook sends its
signal at the top of its step; the stop is an error with exit code 128 + the signal. Each
trainer's use: tests/run/test_interrupt.py, tests/torch_ref/run/test_interrupt.py,
tests/test_failures.py."""

from __future__ import annotations

import os
import signal

import pytest

from runkit.interrupt import Interrupted, StopRequest


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


def test_the_test_hook_signals_at_the_top_of_its_step(monkeypatch, capsys):
    monkeypatch.setenv("RUNKIT_TEST_SIGNAL", "2:SIGTERM")
    with StopRequest("RUNKIT_TEST_SIGNAL", announce=False) as stop:
        stop.starting(1)
        assert stop.signum is None
        stop.starting(2)
        assert stop.signum == signal.SIGTERM
    assert capsys.readouterr().err == ""  # announce=False: torch_ref's ranks other than 0


def test_the_stop_exits_with_128_plus_the_signal():
    assert Interrupted(signal.SIGINT, "stopped").exit_code == 130
    assert Interrupted(signal.SIGTERM, "stopped").exit_code == 143 and str(Interrupted(15, "x")) == "x"
