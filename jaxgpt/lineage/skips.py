"""The lineage's U-net skips (LINEAGE.md 4.3): the record's (#11 on), where encoder layer i stores
its output and decoder layer j adds encoder output L/2 - 1 - j weighted by `skip_weights[j]`;
before #11 no layer stores or adds, and there is no `skip_weights`."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
from flax import nnx

from jaxgpt.config import ModelConfig


class SkipStep(NamedTuple):
    """A layer's part in the U-net: `store` its output for a later layer; `add_weight`: the index
    of the skip weight with which it adds the latest stored output to its input (None: adds none)."""

    store: bool
    add_weight: int | None


class Skips(NamedTuple):
    """One SkipStep per layer, and `weights`: how many skip weights the model holds (0: none)."""

    steps: tuple[SkipStep, ...]
    weights: int

    def init_params(self, gpt: Any, dtype: Any) -> None:
        """The record's `skip_weights` (L/2,), ones, on the model (nothing without skips)."""
        if self.weights:
            gpt.skip_weights = nnx.Param(jnp.ones((self.weights,), dtype))


def skip_plan(config: ModelConfig) -> tuple[SkipStep, ...]:
    """Each layer's SkipStep: the record's U-net, or (without unet_skips) none stores or adds."""
    encoder = config.num_encoder_layers
    if not config.lineage.unet_skips:
        return tuple(SkipStep(False, None) for _ in range(config.num_layers))
    return tuple(SkipStep(layer < encoder, layer - encoder if layer >= encoder else None)
                 for layer in range(config.num_layers))


def skips(config: ModelConfig) -> Skips:
    return Skips(skip_plan(config), config.num_encoder_layers if config.lineage.unet_skips else 0)
