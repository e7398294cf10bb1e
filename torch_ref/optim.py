"""The record's optimizers in PyTorch (RECORD.md sections 5-7).

The record's two optimizers: one Adam with three groups
(head 0.008, embeddings 0.6, scalars 0.04; betas (0.8, 0.95), eps 1e-10) and Muon (lr 0.05)
over the hidden matrices, each with a LambdaLR applying `lr_multiplier`.
"""

from __future__ import annotations

import torch
from torch import nn

from torch_ref import lineage
from torch_ref.config import OptimConfig
from torch_ref.model import GPT
from torch_ref.muon import Muon
from torch_ref.schedules import lr_multiplier, muon_momentum

_NS_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}

# ---------------------------------------------------------------------------------------------
# Optimizers


def adam_param_groups(model: GPT, optim_config: OptimConfig) -> list[dict]:
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


def hidden_matrix_params(model: GPT) -> list[nn.Parameter]:
    """Muon's parameters: every parameter under `blocks` with ndim >= 2, in model order."""
    return [p for p in model.blocks.parameters() if p.ndim >= 2]


def build_optimizers(
    model: GPT, optim_config: OptimConfig, rank: int = 0, world_size: int = 1
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
        **lineage.optim_variants(optim_config).muon_options(),
    )
    return adam, muon


def build_lr_schedulers(
    optimizers: tuple[torch.optim.Optimizer, ...], total_steps: int, optim_config: OptimConfig
) -> list[torch.optim.lr_scheduler.LambdaLR]:
    """One LambdaLR per optimizer: group lr = initial lr * lr_multiplier(scheduler step count)."""

    whole_step_cooldown = lineage.optim_variants(optim_config).whole_step_cooldown

    def factor(step: int) -> float:
        # LambdaLR evaluates once more after the last update (step == total_steps); that is valid.
        return lr_multiplier(step, total_steps, optim_config.cooldown_frac, optim_config.final_lr_frac,
                             whole_step_cooldown)

    return [torch.optim.lr_scheduler.LambdaLR(opt, factor) for opt in optimizers]


def set_muon_momentum(muon: Muon, step: int, optim_config: OptimConfig) -> float:
    """Set every Muon group's momentum for the update at `step` (the record's warmup); returns it."""
    momentum = muon_momentum(
        step, optim_config.muon_momentum_start, optim_config.muon_momentum_end, optim_config.muon_momentum_warmup_steps
    )
    for group in muon.param_groups:
        group["momentum"] = momentum
    return momentum


def optimizer_step(model: nn.Module, optimizers: tuple[torch.optim.Optimizer, Muon],
                   schedulers: list[torch.optim.lr_scheduler.LambdaLR], step: int, optim_config: OptimConfig) -> None:
    """The record's update `step` after the gradients are in place (and averaged across ranks):
    Muon's momentum for this step, every optimizer then its LR scheduler, gradients set to None.
    `optimizers` is build_optimizers' (adam, muon) pair; `schedulers` build_lr_schedulers' list."""
    set_muon_momentum(optimizers[1], step, optim_config)
    for opt, sched in zip(optimizers, schedulers, strict=True):
        opt.step()
        sched.step()
    model.zero_grad(set_to_none=True)
