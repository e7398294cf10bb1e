"""The lineage's U-net skips (LINEAGE.md 4.3; mirrors jaxgpt.lineage.skips): the record's (#11
on), where encoder layer i stores its output and decoder layer j adds encoder output L/2 - 1 - j
weighted by `skip_weights[j]`; before #11 no layer stores or adds, and there is no `skip_weights`.
The model's layer count is GPT's argument, so each variant takes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn

from torch_ref.config import ModelConfig


class SkipStep(NamedTuple):
    """A layer's part in the U-net: `store` its output for a later layer; `add_weight`: the index
    of the skip weight with which it adds the latest stored output to its input (None: adds none)."""

    store: bool
    add_weight: int | None


def unet_plan(num_layers: int) -> tuple[SkipStep, ...]:
    """The record's U-net over `num_layers` layers (an even count: encoder and decoder pair up)."""
    if num_layers % 2:
        raise ValueError(f"the U-net pairs encoder and decoder layers; got odd num_layers {num_layers}")
    encoder = num_layers // 2
    return tuple(SkipStep(layer < encoder, layer - encoder if layer >= encoder else None) for layer in range(num_layers))


def no_skips(num_layers: int) -> tuple[SkipStep, ...]:
    return tuple(SkipStep(False, None) for _ in range(num_layers))


def unet_weights(gpt: Any, num_layers: int) -> None:
    """The record's `skip_weights`, one per decoder layer, ones."""
    gpt.skip_weights = nn.Parameter(torch.ones(num_layers - num_layers // 2))


def no_weights(gpt: Any, num_layers: int) -> None:
    """Before #11: no skip weights."""


class Skips(NamedTuple):
    plan: Callable[[int], tuple[SkipStep, ...]]  # num_layers -> one SkipStep per layer
    init_params: Callable[[Any, int], None]  # (the GPT, num_layers): its skip weights, if any


SKIPS = {True: Skips(unet_plan, unet_weights), False: Skips(no_skips, no_weights)}  # by ModelConfig.lineage.unet_skips


def skips(config: ModelConfig) -> Skips:
    return SKIPS[config.lineage.unet_skips]
