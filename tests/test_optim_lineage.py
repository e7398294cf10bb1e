"""jaxgpt.schedules: the lineage's schedules hold the numbers LINEAGE.md reads off each record's code."""

from __future__ import annotations

import pytest

from jaxgpt import presets, schedules


def _lr(name: str, step: int) -> float:
    preset = presets.get_preset(name)
    o = preset.optim
    return schedules.lr_multiplier(step, preset.train.steps, o.cooldown_frac, o.final_lr_frac, o.lineage.cooldown_whole_steps)


@pytest.mark.parametrize("name, flat_until, cooldown", [
    ("untie-embed", 3270, 1308), ("shortcuts", 2286, 914), ("unet-value-embeds", 880, 600)])
def test_whole_steps_cooldown_is_the_records_warmdown(name, flat_until, cooldown):
    """f = 1 before steps - K, then (steps - s) / K, reaching 1/K at the last update (LINEAGE.md 3.6, 4.3, 5.8)."""
    steps = presets.get_preset(name).train.steps
    assert _lr(name, flat_until - 1) == 1.0 and _lr(name, flat_until) == 1.0
    assert _lr(name, flat_until + 1) == (steps - flat_until - 1) / cooldown
    assert _lr(name, steps - 1) == 1 / cooldown


def test_softcap_cooldown_decays_to_zero():
    """#18: flat through step 834, 0.998201 at 835, 0.0017986 at 1389 (LINEAGE.md 6.6)."""
    assert _lr("softcap", 834) == 1.0
    assert _lr("softcap", 835) == pytest.approx(0.998201, abs=1e-6)
    assert _lr("softcap", 1389) == pytest.approx(0.0017986, abs=1e-7)


def test_token_window_schedule_of_unet_value_embeds():
    """#15's (sw, ceil(sw / 128)) first steps (LINEAGE.md 5.5): 64 tokens at 0 up to 1792 at 1480."""
    first_steps = {0: 64, 55: 128, 110: 192, 329: 448, 878: 1088, 1426: 1728, 1480: 1792}
    for step, tokens in first_steps.items():
        assert schedules.window_value(step, 1480, 1728, "tokens") == tokens
        if step:
            assert schedules.window_value(step - 1, 1480, 1728, "tokens") == tokens - 64


def test_floor_block_window_schedule_of_softcap():
    """#18's W = floor(1 + 13.5 s / 1390) first steps (LINEAGE.md 6.3): 1 at 0 ... 14 from 1339."""
    first_steps = [0, 103, 206, 309, 412, 515, 618, 721, 824, 927, 1030, 1133, 1236, 1339]
    for blocks, step in enumerate(first_steps, start=1):
        assert schedules.window_value(step, 1390, 1728, "blocks_floor") == blocks
        if step:
            assert schedules.window_value(step - 1, 1390, 1728, "blocks_floor") == blocks - 1
    assert schedules.window_value(1390, 1390, 1728, "blocks_floor") == 14


def test_record_window_value_is_window_blocks():
    for step in range(0, 1394, 7):
        assert schedules.window_value(step, 1393) == schedules.window_blocks(step, 1393)[0]
