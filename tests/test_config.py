"""jaxgpt.config: validation that names the field, the Literal choices, presets, the FP8 scale rule."""

from __future__ import annotations

from typing import get_args

import pytest

from jaxgpt import config as cfg
from jaxgpt import config_json, presets


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="seq_len"):
        cfg.replace(presets.tiny_preset().train, seq_len=100)


def test_val_every_0_is_the_records_only_at_the_end_and_a_negative_one_is_refused():
    assert cfg.replace(presets.tiny_preset().train, val_every=0).val_every == 0  # the record's val_loss_every 0
    with pytest.raises(ValueError, match=r"`val_every`: must be >= 0 \(0: validate after the last step only\), got -1"):
        cfg.replace(presets.tiny_preset().train, val_every=-1)


def test_bad_remat_value_raises():
    with pytest.raises(ValueError, match="remat"):
        cfg.replace(cfg.ModelConfig(), remat="layers")


@pytest.mark.parametrize("section, name, literal", [
    ("model", "dtype_policy", cfg.DTypePolicy), ("model", "attention_backend", cfg.AttentionBackend),
    ("model", "remat", cfg.RematPolicy), ("optim", "ns_dtype", cfg.NSDType),
])
def test_literal_fields_accept_exactly_their_choices(section, name, literal):
    base = getattr(cfg.Preset(), section)
    for choice in get_args(literal):
        assert getattr(cfg.replace(base, **{name: choice}), name) == choice
    with pytest.raises(ValueError, match=f"`{name}`: must be one of"):
        cfg.replace(base, **{name: "fp16"})


def test_fp8_grad_scale_for_keeps_the_records_quantised_gradients():
    assert cfg.fp8_grad_scale_for(65536) == cfg.RECORD_FP8_GRAD_SCALE == 2.0**29  # the record's rank mean
    assert cfg.fp8_grad_scale_for(256) == 2.0**21  # 256x fewer tokens: 256x larger gradients
    assert cfg.fp8_grad_scale_for(2048, record_scale=2.0**20) == 2.0**15


def test_presets_hold_the_records_numbers_and_tiny_is_cpu_sized():
    record = presets.get_preset("record")
    assert (record.train.steps, record.train.batch_tokens, record.train.seq_len) == (1393, 524_288, 65_536)
    assert record.train.val_tokens == 10_485_760 and record.model.padded_vocab_size == 50_304
    assert record.model.attention_backend == "auto"  # the Pallas kernel on a GPU, blocked on a CPU
    tiny = presets.get_preset("tiny")
    assert (tiny.train.steps, tiny.train.batch_tokens, tiny.train.val_tokens) == (60, 2048, 16_384)
    assert tiny.model.num_layers == record.model.num_layers  # every per-layer pattern kept
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        presets.get_preset("huge")


def test_smoke_is_the_tiny_run_with_each_per_layer_pattern_once():
    tiny, smoke = presets.get_preset("tiny"), presets.get_preset("smoke")
    assert (smoke.optim, smoke.train) == (tiny.optim, tiny.train)
    assert smoke.model.max_window_blocks == tiny.model.max_window_blocks == 8  # the 1024-token window tiny ends at
    model = smoke.model
    assert (model.num_layers, model.model_dim, model.num_heads) == (4, 64, 1)
    # A value table shared by the first and last layer, long windows at both ends, one layer
    # without attention, and the 2 + 2 U-net (num_layers even), as the record's 12 layers have.
    assert model.value_embed_slots == (0, None, None, 0) and model.long_window_layers == (0, 3)
    assert model.attention_free_layers == (2,) and model.lineage == tiny.model.lineage
    assert (model.vocab_size, model.eot_id, model.dtype_policy) == (tiny.model.vocab_size, tiny.model.eot_id, "record")


def test_preset_json_roundtrip():
    for name in ("record", "tiny", "smoke"):
        preset = presets.get_preset(name)
        assert config_json.preset_from_json(config_json.config_to_json(preset)) == preset
    assert isinstance(config_json.preset_from_json(config_json.config_to_json(cfg.Preset())).model.value_embed_slots, tuple)


def test_a_window_schedule_beyond_the_kernels_cap_is_refused_naming_both_fields():
    """The kernels attend over at most max_window_blocks blocks: a schedule ending beyond it (which
    blocked / pallas would cap while dense and torch_ref would not) is refused in one line."""
    smoke = presets.get_preset("smoke")
    refused = "invalid config field `window_max_tokens`: 1024 (8 blocks at the last step) exceeds `max_window_blocks` 4: " \
              "raise max_window_blocks to 8 or lower window_max_tokens to 512"
    with pytest.raises(ValueError) as error:
        cfg.Preset(model=cfg.replace(smoke.model, max_window_blocks=4), optim=smoke.optim, train=smoke.train)
    assert str(error.value) == refused
    with pytest.raises(ValueError, match=r"`window_max_tokens`: 1025 \(9 blocks at the last step\) exceeds `max_window_blocks` 8: "
                                         r"raise max_window_blocks to 9 or lower window_max_tokens to 1024$"):
        cfg.Preset(model=smoke.model, optim=smoke.optim, train=cfg.replace(smoke.train, window_max_tokens=1025))
    # #15's token window in its own unit: sw = 1792 tokens at the end, attended within 14 blocks.
    unet = presets.get_preset("unet-value-embeds")
    with pytest.raises(ValueError, match=r"`window_max_tokens`: 1728 \(a 1792-token window, 14 blocks at the last step\) "
                                         r"exceeds `max_window_blocks` 13: raise max_window_blocks to 14 or lower "
                                         r"window_max_tokens to 1663$"):
        cfg.Preset(model=cfg.replace(unet.model, max_window_blocks=13), optim=unet.optim, train=unet.train)
    # #8/#9's plain causal attention has no window: nothing to fit.
    untie = presets.get_preset("untie-embed")
    cfg.Preset(model=cfg.replace(untie.model, max_window_blocks=1), optim=untie.optim, train=untie.train)
    with pytest.raises(ValueError, match=r"`window_max_tokens`: must be >= 0, got -1"):
        cfg.replace(smoke.train, window_max_tokens=-1)


@pytest.mark.parametrize("schedule", ["blocks_ceil", "blocks_floor", "tokens"])
def test_last_window_is_the_largest_the_schedule_passes(schedule):
    """config.last_window (the refusal's arithmetic) is the schedule's own largest value over a run."""
    from jaxgpt import schedules

    for max_tokens in (0, 1, 63, 64, 127, 128, 129, 511, 512, 1000, 1024, 1663, 1664, 1727, 1728, 1729, 1792):
        for steps in (1, 7, 60, 1393):
            values = [schedules.window_value(step, steps, max_tokens, schedule) for step in range(steps + 1)]
            largest = max(values)
            assert largest == values[-1]
            blocks, tokens = cfg.last_window(max_tokens, schedule)
            assert (blocks, tokens) == ((-(-largest // 128), largest) if schedule == "tokens" else (largest, None))
    assert cfg.last_window(1728, "none") is None


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_every_presets_window_schedule_fits_its_cap(name):
    preset = presets.get_preset(name)
    last = cfg.last_window(preset.train.window_max_tokens, preset.train.lineage.window_schedule, preset.model.block_size)
    assert last is None or last[0] <= preset.model.max_window_blocks
