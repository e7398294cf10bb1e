"""The record's optimizers and schedules in PyTorch (RECORD.md sections 4-7).

Same schedule functions, names and arithmetic as `jaxgpt.optim` (Python floats, i.e. float64,
as the record's host code), plus the record's two optimizers: one Adam with three groups
(head 0.008, embeddings 0.6, scalars 0.04; betas (0.8, 0.95), eps 1e-10) and Muon (lr 0.05)
over the hidden matrices, each with a LambdaLR applying `lr_multiplier`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from torch_ref.config import BLOCK_SIZE, OptimConfig
from torch_ref.muon import Muon

_NS_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}

# ---------------------------------------------------------------------------------------------
# Schedules


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
    """The window handed to the model at `step` by a TrainConfig.window_schedule: "blocks_ceil"
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


# ---------------------------------------------------------------------------------------------
# Optimizers


def adam_param_groups(model: nn.Module, optim_config: OptimConfig) -> list[dict]:
    """The record's three Adam groups, in its order: head, embeddings, scalars.

    head: [lm_head.weight]; embed: [embed.weight, value_embeds.embed.*.weight];
    scalars: every parameter with ndim < 2, in model order. Each group carries a `name`.
    """
    head = [model.lm_head.weight]
    embed = [model.embed.weight, *model.value_embeds.parameters()]
    scalars = [p for p in model.parameters() if p.ndim < 2]
    return [
        dict(params=head, lr=optim_config.head_lr, name="head"),
        dict(params=embed, lr=optim_config.embed_lr, name="embed"),
        dict(params=scalars, lr=optim_config.scalar_lr, name="scalars"),
    ]


def hidden_matrix_params(model: nn.Module) -> list[nn.Parameter]:
    """Muon's parameters: every parameter under `blocks` with ndim >= 2, in model order."""
    return [p for p in model.blocks.parameters() if p.ndim >= 2]


def build_optimizers(
    model: nn.Module, optim_config: OptimConfig, rank: int = 0, world_size: int = 1
) -> tuple[torch.optim.Adam, Muon]:
    """(adam, muon) over `model` as the record builds them; every parameter is in exactly one.

    Adam is fused on every device: the fused kernel (CUDA as the record, and the CPU one) does
    its math in fp32 and only stores bf16 for the embedding tables, while the default foreach
    path would round every intermediate of the bf16 update to bf16 (measured: 1/3 of the
    elements off by several bf16 ulps after 3 steps).
    """
    groups = adam_param_groups(model, optim_config)
    muon_params = hidden_matrix_params(model)
    covered = {id(p) for g in groups for p in g["params"]} | {id(p) for p in muon_params}
    stray = [name for name, p in model.named_parameters() if id(p) not in covered]
    if stray:
        raise ValueError(f"parameters in no optimizer group: {stray}")
    adam = torch.optim.Adam(
        groups,
        betas=(optim_config.adam_b1, optim_config.adam_b2),
        eps=optim_config.adam_eps,
        weight_decay=0.0,
        fused=True,
    )
    muon = Muon(
        muon_params,
        lr=optim_config.muon_lr,
        momentum=optim_config.muon_momentum_end,
        nesterov=True,
        ns_steps=optim_config.ns_steps,
        rank=rank,
        world_size=world_size,
        ns_dtype=_NS_DTYPES[optim_config.ns_dtype],
        momentum_form=optim_config.muon_momentum_form,
        ns_iteration=optim_config.ns_iteration,
    )
    return adam, muon


def build_lr_schedulers(
    optimizers: tuple[torch.optim.Optimizer, ...], total_steps: int, optim_config: OptimConfig
) -> list[torch.optim.lr_scheduler.LambdaLR]:
    """One LambdaLR per optimizer: group lr = initial lr * lr_multiplier(scheduler step count)."""

    def factor(step: int) -> float:
        # LambdaLR evaluates once more after the last update (step == total_steps); that is valid.
        return lr_multiplier(step, total_steps, optim_config.cooldown_frac, optim_config.final_lr_frac,
                             optim_config.cooldown_whole_steps)

    return [torch.optim.lr_scheduler.LambdaLR(opt, factor) for opt in optimizers]


def set_muon_momentum(muon: Muon, step: int, optim_config: OptimConfig) -> float:
    """Set every Muon group's momentum for the update at `step` (the record's warmup); returns it."""
    momentum = muon_momentum(
        step, optim_config.muon_momentum_start, optim_config.muon_momentum_end, optim_config.muon_momentum_warmup_steps
    )
    for group in muon.param_groups:
        group["momentum"] = momentum
    return momentum


def optimizer_step(model: nn.Module, optimizers: tuple[torch.optim.Optimizer, ...],
                   schedulers: list[torch.optim.lr_scheduler.LambdaLR], step: int, optim_config: OptimConfig) -> None:
    """The record's update `step` after the gradients are in place (and averaged across ranks):
    Muon's momentum for this step, every optimizer then its LR scheduler, gradients set to None.
    `optimizers` is build_optimizers' (adam, muon) pair; `schedulers` build_lr_schedulers' list."""
    set_muon_momentum(optimizers[1], step, optim_config)
    for opt, sched in zip(optimizers, schedulers):
        opt.step()
        sched.step()
    model.zero_grad(set_to_none=True)
