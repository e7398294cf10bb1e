"""runkit.cli: the flag types both trainers' command lines share (through each trainer's parser:
tests/run/test_cli.py, tests/run/test_profiling.py, tests/torch_ref/run/test_cli.py,
tests/torch_ref/run/test_profiling.py)."""

from __future__ import annotations

import argparse

import pytest

from runkit.cli import parse_bool, parse_profile_window


@pytest.mark.parametrize("text, value", [("1", True), ("true", True), ("Yes", True), ("ON", True), ("0", False),
                                         ("false", False), ("No", False), ("off", False)])
def test_a_switch_reads_the_usual_words(text, value):
    assert parse_bool(text) is value


@pytest.mark.parametrize("text", ["", "2", "y", "truthy", "none"])
def test_anything_else_is_a_usage_error(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected true or false"):
        parse_bool(text)


def test_the_profile_window_is_in_train_line_numbers():
    assert parse_profile_window("2:3") == (2, 3)
    assert parse_profile_window("5") == (5, 5)


@pytest.mark.parametrize("text, problem", [("3:2", "need 1 <= START <= STOP"), ("0:1", "need 1 <= START <= STOP"),
                                           ("a:b", "expected START:STOP"), ("2-3", "expected START:STOP"),
                                           ("x", "expected START:STOP")])
def test_a_bad_window_is_a_usage_error(text, problem):
    with pytest.raises(argparse.ArgumentTypeError, match=problem):
        parse_profile_window(text)
