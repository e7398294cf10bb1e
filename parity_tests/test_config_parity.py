"""Facts that jaxgpt and torch_ref each state on their own must agree.

torch_ref imports nothing from jaxgpt (test_independence.py), so the block size, EOT id,
vocabulary, preset values and schedules are written twice; these tests compare the two
statements exactly (they are integers, strings and Python floats: no tolerance).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import jaxgpt.config as jax_cfg
import torch_ref.config as torch_cfg
from jaxgpt import data as jax_data
from jaxgpt import presets as jax_presets
from jaxgpt import schedules as jax_schedules
from torch_ref import data as torch_data
from torch_ref import presets as torch_presets
from torch_ref import schedules as torch_schedules


def test_module_constants_agree():
    assert torch_cfg.BLOCK_SIZE == jax_cfg.BLOCK_SIZE == 128
    assert torch_cfg.EOT_ID == jax_cfg.EOT_ID == 50256
    assert torch_cfg.VOCAB_SIZE == jax_cfg.GPT2_VOCAB_SIZE == 50257
    assert torch_cfg.RECORD_FP8_GRAD_SCALE == jax_cfg.RECORD_FP8_GRAD_SCALE == 2.0**29
    assert torch_cfg.RECORD_DEVICE_TOKENS == jax_cfg.RECORD_DEVICE_TOKENS == 65536
    for tokens in (1024, 65536, 8 * 65536):
        assert torch_cfg.fp8_grad_scale_for(tokens) == jax_cfg.fp8_grad_scale_for(tokens)
    for value in (1, 127, 128, 50257, 50304):
        assert torch_cfg.next_multiple(value, 128) == jax_cfg.next_multiple(value, 128)


@pytest.mark.parametrize("name", sorted(torch_presets.PRESETS))
def test_every_torch_ref_preset_field_equals_jaxgpt(name):
    """Each field torch_ref states (a subset of jaxgpt's) has jaxgpt's value, in every preset."""
    assert sorted(torch_presets.PRESETS) == sorted(jax_presets.PRESETS)
    torch_preset, jax_preset = torch_presets.get_preset(name), jax_presets.get_preset(name)
    for part in ("model", "optim", "train"):
        for field in dataclasses.fields(getattr(torch_preset, part)):
            torch_value = getattr(getattr(torch_preset, part), field.name)
            jax_value = getattr(getattr(jax_preset, part), field.name)
            if dataclasses.is_dataclass(torch_value):  # ModelLineage: the same switches, each with jaxgpt's value
                torch_value, jax_value = dataclasses.asdict(torch_value), dataclasses.asdict(jax_value)
            assert torch_value == jax_value, f"{name}.{part}.{field.name}: torch_ref {torch_value!r}, jaxgpt {jax_value!r}"
    assert torch_preset.model.head_dim == jax_preset.model.head_dim
    assert torch_preset.model.padded_vocab_size == jax_preset.model.padded_vocab_size


def test_torch_ref_validates_like_jaxgpt():
    for bad in (dict(seq_len=100), dict(batch_tokens=1000, seq_len=128), dict(steps=-1), dict(val_every=-1),
                dict(window_max_tokens=-1)):
        with pytest.raises(ValueError):
            jax_cfg.TrainConfig(**bad)
        with pytest.raises(ValueError):
            torch_cfg.TrainConfig(**bad)
    # 0 is the record's val_loss_every 0 ("only at the end") in both
    assert jax_cfg.TrainConfig(val_every=0).val_every == torch_cfg.TrainConfig(val_every=0).val_every == 0


@pytest.mark.parametrize("total", [1, 7, 60, 1393])
def test_schedules_agree_on_every_step(total):
    """lr multiplier, Muon momentum and window blocks at every step of a run of `total` steps."""
    for step in range(total + 1):
        assert torch_schedules.lr_multiplier(step, total) == jax_schedules.lr_multiplier(step, total)
        assert torch_schedules.muon_momentum(step) == jax_schedules.muon_momentum(step)
        assert torch_schedules.window_blocks(step, total) == jax_schedules.window_blocks(step, total)


@pytest.mark.parametrize("lengths", [[3000, 1030, 2051, 2049, 4100], [1026, 2050, 5000]])
def test_shard_advance_rule_agrees(tmp_path, lengths):
    """torch_ref's generator and jaxgpt's batch_starts visit the same (shard, pos) sequence."""
    for k, length in enumerate(lengths):
        # token value = shard * 10000 + position, so a batch's first token names where it starts
        torch_data.write_shard(tmp_path / f"s_{k:06d}.bin", k * 10000 + np.arange(length) % 10000)
    pattern, batch = str(tmp_path / "s_*.bin"), 1024
    files = jax_data.list_shards(pattern)
    jax_starts = []
    try:
        for tokens, at in jax_data.batch_starts(files, pattern, batch):
            jax_starts.append((at.shard_index, at.pos))
    except jax_data.ShardsExhaustedError:
        pass
    torch_starts = []
    try:
        for inputs, _ in torch_data.distributed_data_generator(pattern, batch, 0, 1):
            first = int(inputs[0])
            torch_starts.append((first // 10000, first % 10000))
    except torch_data.ShardsExhaustedError:
        pass
    assert torch_starts == jax_starts
    assert len(jax_starts) == jax_data.batches_available(files, batch)


@pytest.mark.parametrize("name", sorted(jax_presets.LINEAGE_PRESETS))
def test_lineage_schedules_agree_on_every_step(name):
    """Each lineage preset's LR multiplier, Muon momentum and window at every step of its run."""
    assert sorted(torch_presets.LINEAGE_PRESETS) == sorted(jax_presets.LINEAGE_PRESETS)
    preset = jax_presets.get_preset(name)
    o, t = preset.optim, preset.train
    for step in range(t.steps + 1):
        lr = (step, t.steps, o.cooldown_frac, o.final_lr_frac, o.lineage.cooldown_whole_steps)
        assert torch_schedules.lr_multiplier(*lr) == jax_schedules.lr_multiplier(*lr)
        momentum = (step, o.muon_momentum_start, o.muon_momentum_end, o.muon_momentum_warmup_steps)
        assert torch_schedules.muon_momentum(*momentum) == jax_schedules.muon_momentum(*momentum)
        window = (step, t.steps, t.window_max_tokens, t.lineage.window_schedule)
        assert torch_schedules.window_value(*window) == jax_schedules.window_value(*window)


@pytest.mark.parametrize("name", sorted(jax_presets.PRESETS))
def test_torch_refs_windows_are_jaxgpts_kernels_windows(name):
    """torch_ref attends over its schedule's window as it is (no cap); jaxgpt refuses a schedule
    beyond its kernels' cap (config.check_preset): in every preset the largest window torch_ref's
    schedule passes is the one jaxgpt's config computes, and it fits jaxgpt's max_window_blocks."""
    torch_train, model = torch_presets.get_preset(name).train, jax_presets.get_preset(name).model
    schedule, steps = torch_train.lineage.window_schedule, torch_train.steps
    largest = max(torch_schedules.window_value(step, steps, torch_train.window_max_tokens, schedule)
                  for step in range(steps + 1))
    last = jax_cfg.last_window(torch_train.window_max_tokens, schedule, model.block_size)
    if schedule == "none":
        assert last is None and largest == 0
        return
    assert last is not None and last[0] <= model.max_window_blocks
    assert last == ((-(-largest // model.block_size), largest) if schedule == "tokens" else (largest, None))


@pytest.mark.parametrize("name", sorted(jax_presets.PRESETS))
def test_both_trainers_log_the_same_window_at_every_step(name):
    """The metrics' window fields (each trainer's lineage.logged_window) over the preset's schedule."""
    from jaxgpt import lineage as jax_lineage
    from torch_ref import lineage as torch_lineage

    preset, torch_model = jax_presets.get_preset(name), torch_presets.get_preset(name).model
    t = preset.train
    for step in range(t.steps + 1):
        window = jax_schedules.window_value(step, t.steps, t.window_max_tokens, t.lineage.window_schedule)
        assert jax_lineage.logged_window(preset.model, window) == torch_lineage.logged_window(torch_model, window)
