"""jaxgpt_tools.common.timing on a fake clock: which calls are timed and what is reported."""

from __future__ import annotations

import pytest

from jaxgpt_tools.common import timing


@pytest.fixture
def clock(monkeypatch):
    """A perf_counter that only moves when a call of `work` advances it."""
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    return now


def test_timed_returns_the_seconds_and_the_result(clock):
    def work():
        clock[0] += 0.25
        return "done"

    assert timing.timed(work) == (0.25, "done")


def test_time_calls_times_only_the_calls_after_the_first_and_the_warmup(clock):
    durations = iter([9.0, 5.0, 0.003, 0.001, 0.002])  # compile, warm-up, then three timed runs

    def work():
        clock[0] += next(durations)

    result = timing.time_calls(work, 3, warmup=1)
    assert result["first_s"] == 9.0
    assert result["runs_s"] == pytest.approx([0.003, 0.001, 0.002])
    assert result["median_ms"] == pytest.approx(2.0) and result["min_ms"] == pytest.approx(1.0)


def test_time_calls_times_at_least_once(clock):
    calls = []
    timing.time_calls(lambda: calls.append(1), 0)
    assert len(calls) == 2  # the first (compiling) call and one timed call
