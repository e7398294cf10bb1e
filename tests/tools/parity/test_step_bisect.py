"""jaxgpt_tools.parity.step_bisect (scripts/step_bisect.py): the differences it prints. Its run trains both
frameworks for 20 steps (minutes), so only its measures are tested here."""

from __future__ import annotations

import numpy as np
import pytest

from jaxgpt_tools.parity import step_bisect


def test_relative_difference_is_frobenius_and_absolute_against_zero():
    assert step_bisect._rel([3.0, 4.0], [0.0, 5.0]) == pytest.approx(np.sqrt(9 + 1) / 5)
    assert step_bisect._rel([3.0, 4.0], [0.0, 0.0]) == 5.0  # no scale to divide by: the absolute norm


def test_worst_names_the_largest_difference():
    assert step_bisect._worst({"a": 1e-7, "blocks.0.lambdas": 3e-3, "b": 2e-5}) == "3.0e-03 (blocks.0.lambdas)"
