"""The record's schedules (RECORD.md 4, 5 and 7): the learning-rate multiplier, the Muon momentum
warmup and the attention window, with the lineage's variants.

Each schedule is a function of the 0-based step computed on the host in float64, as the record's
host code computes it; the optax forms used inside the compiled step index host tables of those
values, rounded to fp32 once (what torch's LambdaLR and the record's momentum update receive).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import optax

from jaxgpt.config import BLOCK_SIZE, TOKEN_WINDOW_STEP

Number = int | float | np.integer | np.floating


def lr_multiplier(step: Number, total_steps: int, cooldown_frac: float = 0.4, final_lr_frac: float = 0.1,
                  whole_steps: bool = False) -> float:
    """Learning-rate factor at 0-based `step`: 1.0, then linear down to `final_lr_frac`.

    f = w + (1 - w) * final_lr_frac with w = min((1 - step / total_steps) / cooldown_frac, 1),
    in float64 on the host as the record. For the record (1393 steps) f is 1.0 through step 835
    and 0.10162 at step 1392. whole_steps (#8-#15's warmdown_iters form): the cooldown lasts
    K = round(cooldown_frac * total_steps) steps and w = min((total_steps - step) / K, 1).
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if not 0.0 <= cooldown_frac <= 1.0:
        raise ValueError(f"cooldown_frac must be in [0, 1], got {cooldown_frac}")
    remaining = 1 - step / total_steps
    if not 0.0 <= remaining <= 1.0:
        raise ValueError(f"step {step} is outside [0, total_steps={total_steps}]")
    if cooldown_frac == 0.0:
        return 1.0
    if whole_steps:
        cooldown_steps = round(cooldown_frac * total_steps)
        if cooldown_steps == 0:
            return 1.0
        w = min((total_steps - step) / cooldown_steps, 1.0)
    else:
        w = min(remaining / cooldown_frac, 1.0)
    return float(w * 1.0 + (1 - w) * final_lr_frac)  # a Python float for numpy steps too


def lr_schedule(
    base_lr: float, total_steps: int, cooldown_frac: float = 0.4, final_lr_frac: float = 0.1,
    whole_steps: bool = False,
) -> optax.Schedule:
    """optax schedule: count (int32, 0-based) -> base_lr * lr_multiplier(count), fp32.

    The values are computed on the host in float64 for every step 0..total_steps and rounded
    to fp32 once, exactly the lr torch's LambdaLR hands its kernels; counts past the end use
    the last value.
    """
    table = np.array(
        [base_lr * lr_multiplier(step, total_steps, cooldown_frac, final_lr_frac, whole_steps)
         for step in range(total_steps + 1)],
        np.float32,
    )
    return _table_schedule(table)


def _table_schedule(table: np.ndarray) -> optax.Schedule:
    """count -> table[min(count, len - 1)]: host-computed values indexed by a traced step."""
    values = jnp.asarray(table)
    return lambda count: values[jnp.minimum(jnp.asarray(count, jnp.int32), len(table) - 1)]


def muon_momentum(step: Number, start: float = 0.85, end: float = 0.95, warmup_steps: int = 300) -> float:
    """Muon momentum at 0-based `step`, in float64 on the host as the record:
    (1 - frac) * start + frac * end, frac = min(step / warmup, 1)."""
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    frac = min(step / warmup_steps, 1) if warmup_steps else 1
    return float((1 - frac) * start + frac * end)  # a Python float for numpy steps too


def muon_momentum_schedule(
    start: float = 0.85, end: float = 0.95, warmup_steps: int = 300, *, complement: bool = False
) -> optax.Schedule:
    """optax schedule form of `muon_momentum` (count int32, 0-based), from a host float64 table
    rounded to fp32 once, as torch receives it. complement=True gives 1 - m (formed in float64
    before rounding), the weight of the record's momentum-buffer lerp."""
    values = [muon_momentum(step, start, end, warmup_steps) for step in range(warmup_steps + 1)]
    return _table_schedule(np.array([1 - m if complement else m for m in values], np.float32))


def window_blocks(step: int, total_steps: int, max_tokens: int = 1728, block_size: int = BLOCK_SIZE) -> tuple[int, int]:
    """Attention windows (long, short) in blocks at `step`, host side in float64 as the record.

    window = smallest multiple of `block_size` >= max_tokens * step / total_steps, at least one
    block; long = window // block_size, short = long // 2. (0, 1393) -> (1, 0); (1393, 1393) -> (14, 7).
    The train loop passes the result into the compiled step as a value.
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    tokens = max_tokens * step / total_steps  # Python float (float64)
    long_blocks = max(1, math.ceil(tokens / block_size))
    return long_blocks, long_blocks // 2


def window_value(step: int, total_steps: int, max_tokens: int = 1728, schedule: str = "blocks_ceil",
                 block_size: int = BLOCK_SIZE) -> int:
    """The window a step passes to the model (its W_long, or #15's token window), host float64.

    "blocks_ceil": Sub3Min's `window_blocks(...)[0]`; "blocks_floor": #18's
    floor(((1 - x) * bs + x * (bs + max_tokens)) / bs) blocks with x = step / total_steps (1 -> 14
    for 1728); "tokens": #15's 64 floor((64 + max_tokens * step / total_steps) / 64) tokens
    (64 -> 1792); "none": 0 (#8/#9's plain causal attention takes no window).
    """
    if schedule == "blocks_ceil":
        return window_blocks(step, total_steps, max_tokens, block_size)[0]
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if schedule == "blocks_floor":
        x = step / total_steps
        return int(((1 - x) * block_size + x * (block_size + max_tokens)) // block_size)
    if schedule == "tokens":
        return TOKEN_WINDOW_STEP * int((TOKEN_WINDOW_STEP + max_tokens * step / total_steps) // TOKEN_WINDOW_STEP)
    if schedule == "none":
        return 0
    raise ValueError(f"unknown window schedule {schedule!r}")
