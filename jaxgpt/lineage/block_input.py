"""The lineage's block input (LINEAGE.md 4.1): the record's x <- l0 x + l1 x0 before each block
with its `lambdas` (2,) (#9 on), or x as it is (#8). `init_params(block, dtype)` creates the
variant's parameters under the record's name; `mix(block, x, x0) -> x`, each (B, T, D)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from jaxgpt.config import ModelConfig
from jaxgpt.layers import scale_by_scalar


def record_lambdas(block: Any, dtype: Any) -> None:
    block.lambdas = nnx.Param(jnp.array([1.0, 0.0], dtype))


def no_lambdas(block: Any, dtype: Any) -> None:
    """Before #9: no block scalars."""


def mix_block_input(block: Any, x: jax.Array, x0: jax.Array) -> jax.Array:
    """The record's x <- l0 x + l1 x0 before each block (#9 on; the scalars' gradients summed
    in fp32, as torch's: jaxgpt.layers.scale_by_scalar)."""
    lam = block.lambdas[...]
    return scale_by_scalar(lam[0], x) + scale_by_scalar(lam[1], x0)


def block_input_as_is(block: Any, x: jax.Array, x0: jax.Array) -> jax.Array:
    """Before #9: the block takes x as it is."""
    return x


class BlockInput(NamedTuple):
    init_params: Callable[[Any, Any], None]
    mix: Callable[[Any, jax.Array, jax.Array], jax.Array]


BLOCK_INPUTS = {True: BlockInput(record_lambdas, mix_block_input),  # by ModelConfig.lineage.block_lambdas
                False: BlockInput(no_lambdas, block_input_as_is)}


def block_input(config: ModelConfig) -> BlockInput:
    return BLOCK_INPUTS[config.lineage.block_lambdas]
