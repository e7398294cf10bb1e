"""The lineage's variants of the record's model in PyTorch, chosen once from the config when a
module is built (mirrors jaxgpt.lineage): the value mixing of an attention layer (the record's
`lambdas` with the value embedding; #9's value residual with layer 0's raw value; none, #8) and
a block's input (the record's x <- l0 x + l1 x0; as it is before #9); the step's window as the
metrics record it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from torch import Tensor

from torch_ref.config import BLOCK_SIZE, ModelConfig


def keep_first_value(attn: Any, x: Tensor, v_first: Tensor | None) -> Tensor | None:
    return v_first


def layer0_value(attn: Any, x: Tensor, v_first: Tensor | None) -> Tensor | None:
    """#9: layer 0's raw value projection, made by the first attention layer (x its normed input)."""
    return attn.value_projection(x) if v_first is None else v_first


def mix_value_embedding(attn: Any, v: Tensor, ve: Tensor | None, v_first: Tensor | None) -> Tensor:
    """The record's (#15 on): v = l0 v (+ l1 ve; without one lambdas[1] is unused, its gradient 0)."""
    return attn.lambdas[0] * v if ve is None else attn.lambdas[0] * v + attn.lambdas[1] * ve.view_as(v)


def mix_value_residual(attn: Any, v: Tensor, ve: Tensor | None, v_first: Tensor | None) -> Tensor:
    """#9's: v = (1 - lamb) v + lamb v_first."""
    v_first = v if v_first is None else v_first
    return (1 - attn.lamb) * v + attn.lamb * v_first.view_as(v)


def no_value_mixing(attn: Any, v: Tensor, ve: Tensor | None, v_first: Tensor | None) -> Tensor:
    """#8: the value projection as it is."""
    return v


class ValueMixing(NamedTuple):
    first_value: Callable[[Any, Tensor, Tensor | None], Tensor | None]
    mix: Callable[[Any, Tensor, Tensor | None, Tensor | None], Tensor]


VALUE_MIXINGS = {"value_embedding": ValueMixing(keep_first_value, mix_value_embedding),
                 "value_residual": ValueMixing(layer0_value, mix_value_residual),
                 "none": ValueMixing(keep_first_value, no_value_mixing)}


def value_mixing(config: ModelConfig) -> str:
    """The name of `config`'s value mixing in VALUE_MIXINGS."""
    if config.lineage.value_residual:
        return "value_residual"
    return "value_embedding" if config.lineage.attn_value_lambdas else "none"


def mix_block_input(block: Any, x: Tensor, x0: Tensor) -> Tensor:
    """The record's x <- l0 x + l1 x0 before each block (#9 on)."""
    return block.lambdas[0] * x + block.lambdas[1] * x0


def block_input_as_is(block: Any, x: Tensor, x0: Tensor) -> Tensor:
    """Before #9: the block takes x as it is."""
    return x


BLOCK_INPUTS = {True: mix_block_input, False: block_input_as_is}  # by ModelConfig.block_lambdas


def logged_window(config: ModelConfig, window: int) -> dict[str, int]:
    """The step's window as its long layers' attention takes it, for the metrics (jaxgpt.lineage's
    twin): `window_blocks`, W_long or #15's ceil(sw / 128) (0 for #8/#9's plain causal attention,
    which has no window), and, for #15, `window_tokens`: sw. FlexAttention has no cap."""
    if config.lineage.attention_mask == "causal":
        return {"window_blocks": 0}
    if config.lineage.attention_mask == "document_tokens":
        return {"window_blocks": -(-window // BLOCK_SIZE), "window_tokens": window}
    return {"window_blocks": window}
