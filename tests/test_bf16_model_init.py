"""#15's whole-model bf16 (the "bf16_model" policy): its linear weights start bf16-rounded and live in
fp32 afterwards (LINEAGE.md 5.1; the model's `.bfloat16()` before the linears return to fp32). A
forward comparison loads the same weights into both frameworks and cannot see this; the init can."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from flax import nnx

from jaxgpt.config import ModelConfig
from jaxgpt.layers import Linear


def bf16_rounded(values: np.ndarray) -> np.ndarray:
    return values.astype(ml_dtypes.bfloat16).astype(np.float32)


def test_bf16_model_linear_weights_start_bf16_rounded_in_fp32():
    weight = np.asarray(Linear(64, 96, zero_init=False, rngs=nnx.Rngs(0), config=ModelConfig(dtype_policy="bf16_model")).weight[...])
    assert weight.dtype == np.float32
    np.testing.assert_array_equal(weight, bf16_rounded(weight))


def test_the_other_policies_keep_the_fp32_draw():
    """The same draw unrounded under "record" and "fp32": almost no U(-b, b) fp32 sample is a bf16 number."""
    for policy in ("record", "fp32"):
        weight = np.asarray(Linear(64, 96, zero_init=False, rngs=nnx.Rngs(0), config=ModelConfig(dtype_policy=policy)).weight[...])
        assert np.mean(weight != bf16_rounded(weight)) > 0.9
    rounded = np.asarray(Linear(64, 96, zero_init=False, rngs=nnx.Rngs(0),
                                config=ModelConfig(dtype_policy="bf16_model")).weight[...])
    np.testing.assert_array_equal(rounded, bf16_rounded(weight))  # the same draw, rounded once
