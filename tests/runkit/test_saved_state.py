"""runkit.saved_state: the field checks both trainers' saved states go through (jaxgpt's orbax
meta item: tests/run/test_checkpoint_fuzz.py; torch_ref's `.pt` payload:
tests/torch_ref/run/test_checkpoint.py, tests/torch_ref/run/test_checkpoint_fuzz.py)."""

from __future__ import annotations

import pytest

from runkit import saved_state


@pytest.mark.parametrize("value, least", [(0, 0), (7, 0), (1, 1)])
def test_a_whole_number_at_least_the_least_is_a_count(value, least):
    assert saved_state.count_problem(value, "step", least) is None


@pytest.mark.parametrize("value, shown", [(True, "True"), (-1, "-1"), (2.0, "2.0"), ("3", "'3'"), (None, "None"),
                                          ([3], "a list"), ({"n": 3}, "a dict")])
def test_anything_else_is_named_as_an_error_line_shows_it(value, shown):
    assert saved_state.count_problem(value, "step") == f"step is {shown}, not a whole number >= 0"


def test_a_long_value_is_cut_and_the_least_is_named():
    assert saved_state.shown("x" * 500) == repr("x" * 500)[:80]
    assert saved_state.count_problem(0, "config.train.keep_checkpoints", 1) == (
        "config.train.keep_checkpoints is 0, not a whole number >= 1")
    assert set(saved_state.CADENCE) <= {"checkpoint_every", "keep_checkpoints"} and saved_state.SECTIONS == (
        "model", "optim", "train")
