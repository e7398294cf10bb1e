"""jaxgpt_tools.parity.sensitivity (scripts/parity_sensitivity.py): the run it studies. The study itself
trains three 30-step runs (minutes); its set-up is tested here."""

from __future__ import annotations

import glob

from jaxgpt_tools.parity import sensitivity as parity_sensitivity


def test_the_study_runs_the_tiny_preset_in_fp32_on_two_devices(tmp_path):
    preset = parity_sensitivity.sensitivity_preset(tmp_path, steps=7)
    train = preset.train
    assert preset.model.dtype_policy == "fp32" and preset.optim.ns_dtype == "bf16"  # the record's NS
    assert (train.steps, train.val_every, train.devices) == (7, 5, 2)
    assert train.out_dir == str(tmp_path / "out")
    # The sample shards, found from any working directory.
    assert glob.glob(train.train_files) and glob.glob(train.val_files)
