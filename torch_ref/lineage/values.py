"""The lineage's value mixing in an attention layer (LINEAGE.md 4.2, 5.2; mirrors
jaxgpt.lineage.values): the record's `attn.lambdas` (2,) mixing in the value embedding (#15 on);
#9's value residual with layer 0's raw value and its scalar `attn.lamb` (); none (#8). Each
variant creates its own parameters under the record's names (`init_params(attn)`);
`first_value(attn, x, v_first)` and `mix(attn, v, ve, v_first)` as jaxgpt's, on (B, T, H, Dh)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from torch_ref.config import ModelConfig


def record_lambdas(attn: Any) -> None:
    attn.lambdas = nn.Parameter(torch.tensor([0.5, 0.5]))


def residual_lamb(attn: Any) -> None:
    attn.lamb = nn.Parameter(torch.tensor(0.5))


def no_scalars(attn: Any) -> None:
    """#8: the value is not mixed, so the layer has no scalar for it."""


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
    init_params: Callable[[Any], None]
    first_value: Callable[[Any, Tensor, Tensor | None], Tensor | None]
    mix: Callable[[Any, Tensor, Tensor | None, Tensor | None], Tensor]


VALUE_MIXINGS = {"value_embedding": ValueMixing(record_lambdas, keep_first_value, mix_value_embedding),
                 "value_residual": ValueMixing(residual_lamb, layer0_value, mix_value_residual),
                 "none": ValueMixing(no_scalars, keep_first_value, no_value_mixing)}


def value_mixing(config: ModelConfig) -> str:
    """The name of `config`'s value mixing in VALUE_MIXINGS."""
    if config.lineage.value_residual:
        return "value_residual"
    return "value_embedding" if config.lineage.attn_value_lambdas else "none"
