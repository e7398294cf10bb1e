"""runkit.checkpoint: when a save is due and the config a resumed run must keep, for both
trainers (their checkpoints: tests/run/test_checkpoint.py, tests/torch_ref/run/test_checkpoint.py;
a changed config refused on --resume: tests/test_config_lineage.py, the checkpoint fuzz tests)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from runkit import checkpoint


@dataclass(frozen=True)
class Train:
    steps: int
    checkpoint_every: int


@pytest.mark.parametrize("train, save_final, due", [
    (Train(10, 4), False, [4, 8, 10]),
    (Train(10, 0), False, []),
    (Train(10, 0), True, [10]),
    (Train(8, 4), False, [4, 8]),
])
def test_a_save_is_due_every_k_updates_and_after_the_last(train, save_final, due):
    assert [step for step in range(11) if checkpoint.is_due(step, 0, train, save_final)] == due


def test_never_for_the_state_a_run_started_from():
    assert not checkpoint.is_due(4, 4, Train(10, 4), True)
    assert [step for step in range(4, 11) if checkpoint.is_due(step, 4, Train(10, 4), False)] == [8, 10]


def test_a_config_flattens_to_dotted_fields():
    nested = {"model": {"dim": 64, "lineage": {"skips": True}}, "train": {"layers": [1, 2]}}
    assert checkpoint.flatten(nested) == {"model.dim": 64, "model.lineage.skips": True, "train.layers": [1, 2]}
    assert checkpoint.flatten(nested, lists_as_tuples=True)["train.layers"] == (1, 2)


def test_differences_skip_the_output_fields_and_name_absent_ones():
    saved = {"model.dim": 64, "train.out_dir": "a", "train.devices": 1, "train.old": 3}
    now = {"model.dim": 128, "train.out_dir": "b", "train.devices": 2, "train.new": [1]}
    assert checkpoint.config_differences(saved, now) == ["model.dim: 64 -> 128", "train.new: '<absent>' -> [1]",
                                                         "train.old: 3 -> '<absent>'"]
    assert checkpoint.config_differences(saved, saved) == []


def test_a_difference_is_refused_with_the_list_and_none_passes():
    checkpoint.refuse_config_change([], "ckpt/4")
    with pytest.raises(ValueError) as refused:
        checkpoint.refuse_config_change(["model.dim: 64 -> 128", "optim.lr: 1 -> 2"], "ckpt/4")
    assert str(refused.value) == ("cannot resume from ckpt/4: it was saved by a run with a different config; differing "
                                  "fields (saved -> now):\n  model.dim: 64 -> 128\n  optim.lr: 1 -> 2")
