"""jaxgpt.schedules: the record's LR multiplier, Muon momentum warmup and window schedule (RECORD.md
4, 5, 7), host float64 and their fp32 optax tables."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpt.schedules import lr_multiplier, lr_schedule, muon_momentum, muon_momentum_schedule, window_blocks


def test_lr_multiplier_record_values():
    assert lr_multiplier(0, 1393) == 1.0
    assert lr_multiplier(835, 1393) == 1.0  # flat through 835 (RECORD.md 7)
    assert lr_multiplier(836, 1393) == pytest.approx(0.99968, abs=1e-5)
    assert lr_multiplier(1392, 1393) == pytest.approx(0.10162, abs=1e-5)
    assert lr_multiplier(1393, 1393) == pytest.approx(0.1, abs=1e-15)
    with pytest.raises(ValueError, match="outside"):
        lr_multiplier(1394, 1393)


def test_lr_schedule_traced_equals_host_float64_rounded_once():
    steps = jnp.arange(0, 1400)  # past the end: the last value
    traced = np.asarray(jax.jit(lr_schedule(0.05, 1393))(steps))
    host = np.array([0.05 * lr_multiplier(min(int(s), 1393), 1393) for s in range(1400)], np.float32)
    np.testing.assert_array_equal(traced, host)  # a host table: torch's fp32 lr exactly


def test_momentum_schedules_are_torch_fp32_values():
    m = jax.jit(muon_momentum_schedule())(jnp.arange(400))
    one_minus_m = jax.jit(muon_momentum_schedule(complement=True))(jnp.arange(400))
    np.testing.assert_array_equal(m, np.float32([muon_momentum(min(s, 300)) for s in range(400)]))
    # 1 - m formed in float64 then rounded, as torch's `1 - momentum`; not 1 - fp32(m).
    np.testing.assert_array_equal(one_minus_m, np.float32([1 - muon_momentum(min(s, 300)) for s in range(400)]))
    assert float(one_minus_m[0]) != float(1 - m[0])


def test_muon_momentum_warmup():
    assert muon_momentum(0) == 0.85 and muon_momentum(300) == 0.95 and muon_momentum(1000) == 0.95
    assert muon_momentum(150) == pytest.approx(0.90, abs=1e-15)


def _record_next_multiple(v: float, n: int = 128) -> int:
    """The record's rule written as a search: the first multiple of n (from n up) that is >= v."""
    x = n
    while x < v:
        x += n
    return x


def test_window_blocks_every_record_step():
    for step in range(1394):
        size = _record_next_multiple(1728 * step / 1393)
        assert window_blocks(step, 1393) == (size // 128, size // 128 // 2), step
    # First steps of each window from RECORD.md 4.
    firsts = {0: 1, 104: 2, 207: 3, 310: 4, 413: 5, 516: 6, 620: 7, 723: 8, 826: 9, 929: 10, 1032: 11, 1136: 12, 1239: 13, 1342: 14}
    for step, long_blocks in firsts.items():
        assert window_blocks(step, 1393)[0] == long_blocks
        if step:
            assert window_blocks(step - 1, 1393)[0] == long_blocks - 1
    assert window_blocks(1393, 1393) == (14, 7)


# --- groups -----------------------------------------------------------------------------------


