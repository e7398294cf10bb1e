"""jaxgpt_tools.parity.record_code_optimizer's parts that need no record log: jaxgpt's optimizer
state placed at a step (schedules moved, Adam's bias correction not), and the update gaps.
(The records' own optimizers against both frameworks: parity_tests/test_record_code_optimizer.py.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxgpt.config import OptimConfig
from jaxgpt.muon import MuonState
from jaxgpt.optim import record_optimizer
from jaxgpt_tools.parity import record_code_optimizer as rows


def _counts(state, kind) -> list[int]:
    nodes = jax.tree.leaves(state, is_leaf=lambda node: isinstance(node, kind))
    return [int(node.count) for node in nodes if isinstance(node, kind)]


def test_at_step_moves_the_schedules_and_leaves_adams_bias_correction_at_its_first_update():
    params = {"blocks.0.w": jnp.ones((4, 4)), "embed.weight": jnp.ones((8, 4)), "lm_head.weight": jnp.ones((8, 4)),
              "blocks.0.lambdas": jnp.ones((2,))}
    state = rows.at_step(record_optimizer(OptimConfig(), 400).init(params), 290)
    assert _counts(state, MuonState) == [290]
    assert _counts(state, optax.ScaleByScheduleState) == [290] * 4  # Muon's LR and the three Adams'
    assert _counts(state, optax.ScaleByAdamState) == [0] * 3


def test_update_gaps_measure_each_update_by_kind_with_the_median_of_the_muon_matrices():
    initial = {"blocks.0.w": np.zeros((2, 2), np.float32), "blocks.1.w": np.zeros((2, 2), np.float32),
               "embed.weight": np.ones((3, 2), np.float32), "blocks.0.lambdas": np.ones(2, np.float32)}
    reference = {key: value + 1 for key, value in initial.items()}
    updated = dict(reference, **{"blocks.1.w": initial["blocks.1.w"] + 1.5})
    gaps = rows.update_gaps(updated, reference, initial)
    assert gaps.relative[rows.MUON] == (0.5, "blocks.1.w") and gaps.relative[rows.TABLES][0] == 0
    assert gaps.muon_median == 0.25 and gaps.max_abs == 0.5 and gaps.same_names
    assert not gaps.passed("bfloat16") and rows.kind("blocks.0.lambdas", 1) == rows.SCALARS
