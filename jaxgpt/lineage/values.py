"""The lineage's value mixing in an attention layer (LINEAGE.md 4.2, 5.2): the record's
`attn.lambdas` (2,) mixing in the value embedding (#15 on); #9's value residual with layer 0's
raw value and its scalar `attn.lamb` (); none (#8). Each variant creates its own parameters
under the record's names.

`init_params(attn, dtype)` sets the variant's scalars on the attention module;
`first_value(attn, h, v_first) -> v_first`: #9's layer-0 raw value (B, T, H, Dh), made by the
first attention layer, passed through by the rest (None in the other variants);
`mix(attn, v, ve, v_first) -> v`: v, ve (the layer's value embedding or None) and v_first
(B, T, H, Dh) in the matmul dtype. Scalars are rounded to the activation dtype first, as torch
does for a 0-dim tensor, and their gradients summed in fp32 (jaxgpt.layers.scale_by_scalar).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from jaxgpt.config import ModelConfig
from jaxgpt.layers import scale_by_scalar


def record_lambdas(attn: Any, dtype: Any) -> None:
    attn.lambdas = nnx.Param(jnp.array([0.5, 0.5], dtype))


def residual_lamb(attn: Any, dtype: Any) -> None:
    attn.lamb = nnx.Param(jnp.array(0.5, dtype))


def no_scalars(attn: Any, dtype: Any) -> None:
    """#8: the value is not mixed, so the layer has no scalar for it."""


def keep_first_value(attn: Any, h: jax.Array, v_first: jax.Array | None) -> jax.Array | None:
    return v_first


def layer0_value(attn: Any, h: jax.Array, v_first: jax.Array | None) -> jax.Array | None:
    """#9: layer 0's raw value projection, made by the first attention layer (h its normed input)."""
    return attn.value_projection(h) if v_first is None else v_first


def mix_value_embedding(attn: Any, v: jax.Array, ve: jax.Array | None, v_first: jax.Array | None) -> jax.Array:
    """The record's (#15 on): v = l0 v (+ l1 ve where the layer has a value embedding)."""
    lam = attn.lambdas[...]
    v = scale_by_scalar(lam[0], v)
    return v if ve is None else v + scale_by_scalar(lam[1], ve.astype(v.dtype).reshape(v.shape))


def mix_value_residual(attn: Any, v: jax.Array, ve: jax.Array | None, v_first: jax.Array | None) -> jax.Array:
    """#9's: v = (1 - lamb) v + lamb v_first ((1 - lamb) formed in the scalar's dtype, as the
    record's (1 - self.lamb))."""
    lamb = attn.lamb[...]
    v_first = v if v_first is None else v_first
    return scale_by_scalar(1 - lamb, v) + scale_by_scalar(lamb, v_first)


def no_value_mixing(attn: Any, v: jax.Array, ve: jax.Array | None, v_first: jax.Array | None) -> jax.Array:
    """#8: the value projection as it is."""
    return v


class ValueMixing(NamedTuple):
    init_params: Callable[[Any, Any], None]
    first_value: Callable[[Any, jax.Array, jax.Array | None], jax.Array | None]
    mix: Callable[[Any, jax.Array, jax.Array | None, jax.Array | None], jax.Array]


VALUE_MIXINGS = {"value_embedding": ValueMixing(record_lambdas, keep_first_value, mix_value_embedding),
                 "value_residual": ValueMixing(residual_lamb, layer0_value, mix_value_residual),
                 "none": ValueMixing(no_scalars, keep_first_value, no_value_mixing)}


def value_mixing(config: ModelConfig) -> str:
    """The name of `config`'s value mixing in VALUE_MIXINGS (ModelConfig refuses the mixes that
    mean nothing)."""
    if config.lineage.value_residual:
        return "value_residual"
    return "value_embedding" if config.lineage.attn_value_lambdas else "none"
