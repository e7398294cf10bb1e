"""jaxgpt_tools.parity.floors: the one-ulp perturbation of an initial state and a floor's spread."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from jaxgpt_tools.parity import floors


def test_ulp_perturbed_moves_each_fp32_element_by_at_most_one_ulp():
    state = {"w": torch.randn(64, 32), "inv_freq": torch.rand(8).bfloat16(), "b": torch.randn(5).double()}
    moved = floors.ulp_perturbed(state, 0)
    w, w_moved = state["w"].numpy(), moved["w"].numpy()
    ulps = np.abs(w_moved.view(np.int32).astype(np.int64) - w.view(np.int32).astype(np.int64))
    assert ulps.max() == 1  # same signs here, so one ulp is one step of the bit pattern
    assert 0.5 < (ulps == 1).mean() < 0.8  # -1, 0, +1 drawn uniformly: two thirds move
    assert moved["inv_freq"] is state["inv_freq"] and moved["b"] is state["b"]
    assert not np.array_equal(floors.ulp_perturbed(state, 1)["w"].numpy(), w_moved)  # seeds differ
    assert np.array_equal(floors.ulp_perturbed(state, 0)["w"].numpy(), w_moved)  # and repeat


def test_spread_reports_min_median_and_upper_quantile_at_the_resolution():
    spread = floors.Spread((1e-8, 2e-6, 3e-6, 4e-6, 1e-5), resolution=1e-6)
    assert spread.low == 1e-6  # a sample below the measure's resolution counts as the resolution
    assert spread.median == 3e-6
    assert spread.upper == pytest.approx(4e-6 + 0.6 * 6e-6)  # q90 of 5: 60% of the way from the 4th to the 5th
    assert "of 5" in spread.describe()
