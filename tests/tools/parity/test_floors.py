"""jaxgpt_tools.parity.floors: the one-ulp perturbation of an initial state and a floor's spread."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from jaxgpt_tools.parity import floors


def test_ulp_perturbed_moves_each_fp32_element_by_at_most_one_ulp():
    state = {"w": torch.randn(64, 32), "inv_freq": torch.rand(8).bfloat16(), "b": torch.randn(5).double(),
             "c_proj": torch.zeros(4, 4)}
    moved = floors.ulp_perturbed(state, 0)
    assert not moved["c_proj"].any()  # exact zeros stay zero: no denormal in a zero projection
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


def test_stored_trajectory_floors_are_read_without_the_gap_and_rendered(tmp_path):
    from jaxgpt_tools.parity import trajectory_floors

    path = tmp_path / "floors.json"
    samples = {"gap": [9e-7, 9e-5], trajectory_floors.DEVICES_SAMPLE: [1e-7, 2e-6],
               **{f"jaxgpt ulp seed {seed}": [3e-7, (seed + 1) * 1e-5] for seed in range(5)}}
    path.write_text(json.dumps({"machine": ["a CPU", "versions"], "rows": {"softcap": samples}}))
    loss, matrices, stored = trajectory_floors.spreads("softcap", path)
    assert len(matrices.samples) == 6 and 9e-5 not in matrices.samples  # the gap is no sample
    assert loss.low == 2.4e-7 and matrices.low == 2e-6  # the loss at fp32's resolution of a loss near 5
    assert stored["gap"] == [9e-7, 9e-5]
    with pytest.raises(FileNotFoundError, match=r"scripts/trajectory_floors\.py"):
        trajectory_floors.spreads("untie-embed", path)
    lines = trajectory_floors.describe(path)
    assert lines[0] == "## Noise floors" and sum(line.startswith("| softcap |") for line in lines) == 1
    assert trajectory_floors.describe(tmp_path / "absent.json") == []
