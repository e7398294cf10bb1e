"""The lineage's block input (LINEAGE.md 4.1; mirrors jaxgpt.lineage.block_input): the record's
x <- l0 x + l1 x0 before each block with its `lambdas` (2,) (#9 on), or x as it is (#8).
`init_params(block)` creates the variant's parameters under the record's name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from torch_ref.config import ModelConfig


def record_lambdas(block: Any) -> None:
    block.lambdas = nn.Parameter(torch.tensor([1.0, 0.0]))


def no_lambdas(block: Any) -> None:
    """Before #9: no block scalars."""


def mix_block_input(block: Any, x: Tensor, x0: Tensor) -> Tensor:
    """The record's x <- l0 x + l1 x0 before each block (#9 on)."""
    return block.lambdas[0] * x + block.lambdas[1] * x0


def block_input_as_is(block: Any, x: Tensor, x0: Tensor) -> Tensor:
    """Before #9: the block takes x as it is."""
    return x


class BlockInput(NamedTuple):
    init_params: Callable[[Any], None]
    mix: Callable[[Any, Tensor, Tensor], Tensor]


BLOCK_INPUTS = {True: BlockInput(record_lambdas, mix_block_input),  # by ModelConfig.lineage.block_lambdas
                False: BlockInput(no_lambdas, block_input_as_is)}


def block_input(config: ModelConfig) -> BlockInput:
    return BLOCK_INPUTS[config.lineage.block_lambdas]
