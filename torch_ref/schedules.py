"""The record's schedules in PyTorch (RECORD.md 4, 5 and 7): the same functions, names and
arithmetic as `jaxgpt.schedules` (Python floats, i.e. float64, as the record's host code)."""

from __future__ import annotations

import math

from torch_ref.config import BLOCK_SIZE


def lr_multiplier(step: int, total_steps: int, cooldown_frac: float = 0.4, final_lr_frac: float = 0.1,
                  whole_steps: bool = False) -> float:
    """LR factor for the update made at 0-based `step`: 1.0, then linear down to `final_lr_frac`.

    f = w + (1 - w) * final_lr_frac, w = min((1 - step / total_steps) / cooldown_frac, 1).
    Record (1393 steps): 1.0 through step 835, 0.99968 at 836, 0.10162 at 1392, 0.1 at 1393.
    whole_steps (#8-#15's warmdown_iters): K = round(cooldown_frac * total_steps) steps,
    w = min((total_steps - step) / K, 1).
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if not 0.0 <= cooldown_frac <= 1.0:
        raise ValueError(f"cooldown_frac must be in [0, 1], got {cooldown_frac}")
    remaining = 1 - step / total_steps
    if not 0.0 <= remaining <= 1.0:
        raise ValueError(f"step {step} is outside [0, total_steps={total_steps}]")
    if cooldown_frac == 0.0:  # no cooldown at all
        return 1.0
    if whole_steps:
        cooldown_steps = round(cooldown_frac * total_steps)
        if cooldown_steps == 0:
            return 1.0
        w = min((total_steps - step) / cooldown_steps, 1.0)
    else:
        w = min(remaining / cooldown_frac, 1.0)
    return w * 1.0 + (1 - w) * final_lr_frac


def muon_momentum(step: int, start: float = 0.85, end: float = 0.95, warmup_steps: int = 300) -> float:
    """Muon momentum at 0-based `step`: (1 - frac) * start + frac * end, frac = min(step / warmup, 1)."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    frac = min(step / warmup_steps, 1) if warmup_steps else 1
    return (1 - frac) * start + frac * end


def window_blocks(step: int, total_steps: int, max_tokens: int = 1728, block_size: int = BLOCK_SIZE) -> tuple[int, int]:
    """Attention windows (W_long, W_short) in blocks at `step`.

    window = smallest multiple of `block_size` >= max_tokens * step / total_steps (a Python
    float), at least one block; W_long = window // block_size, W_short = W_long // 2.
    Record: (1, 0) at step 0, (14, 7) at step 1393.
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    tokens = max_tokens * step / total_steps
    # Division by a power of two is exact, so this ceil is the record's "next multiple" rule.
    long_blocks = max(1, math.ceil(tokens / block_size))
    return long_blocks, long_blocks // 2


def window_value(step: int, total_steps: int, max_tokens: int = 1728, schedule: str = "blocks_ceil",
                 block_size: int = BLOCK_SIZE) -> int:
    """The window handed to the model at `step` by the lineage's window `schedule`: "blocks_ceil"
    (Sub3Min) W_long blocks; "blocks_floor" (#18) int(((1 - x) * 128 + x * (128 + M)) // 128),
    x = step / total; "tokens" (#15) 64 * int((64 + M * step / total) // 64) tokens; "none" 0."""
    if schedule == "blocks_ceil":
        return window_blocks(step, total_steps, max_tokens, block_size)[0]
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if schedule == "blocks_floor":
        progress = step / total_steps
        return int(((1 - progress) * block_size + progress * (block_size + max_tokens)) // block_size)
    if schedule == "tokens":
        return 64 * int((64 + max_tokens * step / total_steps) // 64)
    if schedule == "none":
        return 0
    raise ValueError(f"unknown window schedule {schedule!r}")
