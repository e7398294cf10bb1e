"""torch_ref.schedules: the window table of RECORD.md section 4, the LR multiplier and momentum of section 7."""

from __future__ import annotations

import pytest

from torch_ref.schedules import lr_multiplier, muon_momentum, window_blocks

RECORD_STEPS = 1393

# RECORD.md section 4: (first step, window tokens, W_long, W_short).
WINDOW_TABLE = [
    (0, 128, 1, 0),
    (104, 256, 2, 1),
    (207, 384, 3, 1),
    (310, 512, 4, 2),
    (413, 640, 5, 2),
    (516, 768, 6, 3),
    (620, 896, 7, 3),
    (723, 1024, 8, 4),
    (826, 1152, 9, 4),
    (929, 1280, 10, 5),
    (1032, 1408, 11, 5),
    (1136, 1536, 12, 6),
    (1239, 1664, 13, 6),
    (1342, 1792, 14, 7),
]


@pytest.mark.parametrize("first_step, tokens, long_blocks, short_blocks", WINDOW_TABLE)
def test_window_table_row(first_step, tokens, long_blocks, short_blocks):
    assert long_blocks * 128 == tokens
    assert window_blocks(first_step, RECORD_STEPS) == (long_blocks, short_blocks)
    if first_step > 0:  # the row really starts here: the step before is still the previous row
        assert window_blocks(first_step - 1, RECORD_STEPS)[0] == long_blocks - 1


def test_window_schedule_covers_every_step_with_the_table():
    last_row = [row for row in WINDOW_TABLE if row[0] <= RECORD_STEPS][-1]
    assert window_blocks(RECORD_STEPS, RECORD_STEPS) == (last_row[2], last_row[3])
    for step in range(RECORD_STEPS + 1):
        row = max((r for r in WINDOW_TABLE if r[0] <= step), key=lambda r: r[0])
        assert window_blocks(step, RECORD_STEPS) == (row[2], row[3]), step


def test_window_follows_total_steps_and_max_tokens():
    # Tiny preset style: 200 steps up to 1024 tokens: the last step reaches 8 blocks.
    assert window_blocks(200, 200, max_tokens=1024) == (8, 4)
    assert window_blocks(0, 200, max_tokens=1024) == (1, 0)
    assert window_blocks(26, 200, max_tokens=1024) == (2, 1)  # 133.12 tokens -> 2 blocks
    with pytest.raises(ValueError, match="total_steps"):
        window_blocks(0, 0)


def test_lr_multiplier_record_values():
    for step in (0, 1, 500, 835):
        assert lr_multiplier(step, RECORD_STEPS) == 1.0
    # Values quoted (rounded to 5 decimals) in RECORD.md section 7.
    assert lr_multiplier(836, RECORD_STEPS) == pytest.approx(0.99968, abs=5e-6)
    assert lr_multiplier(1392, RECORD_STEPS) == pytest.approx(0.10162, abs=5e-6)
    assert lr_multiplier(1393, RECORD_STEPS) == pytest.approx(0.1, abs=1e-15)  # float64 round-off only
    # The decay is linear in the step: equal drops between consecutive steps of the cooldown.
    drops = [lr_multiplier(s, RECORD_STEPS) - lr_multiplier(s + 1, RECORD_STEPS) for s in range(836, 1392)]
    assert max(drops) - min(drops) < 1e-12  # float64 round-off only
    assert drops[0] == pytest.approx(0.9 / (0.4 * RECORD_STEPS), rel=1e-9)


def test_lr_multiplier_rejects_steps_outside_the_run():
    with pytest.raises(ValueError, match="outside"):
        lr_multiplier(1394, RECORD_STEPS)
    with pytest.raises(ValueError, match="outside"):
        lr_multiplier(-1, RECORD_STEPS)
    assert lr_multiplier(5, 10, cooldown_frac=0.0) == 1.0


def test_muon_momentum_values():
    assert muon_momentum(0) == 0.85
    assert muon_momentum(150) == pytest.approx(0.90, abs=1e-15)  # float64 round-off only
    assert muon_momentum(299) == pytest.approx(0.85 + 0.1 * 299 / 300, abs=1e-15)
    assert muon_momentum(300) == 0.95
    assert muon_momentum(1392) == 0.95
    with pytest.raises(ValueError, match="step"):
        muon_momentum(-1)


# ---------------------------------------------------------------------------------------------
# Optimizers on a small record-shaped model (12 layers, all per-layer patterns kept)
