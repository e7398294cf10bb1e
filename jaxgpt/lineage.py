"""The lineage's variants of the record's model (docs/spec/LINEAGE.md), each a small named
function, chosen once from the config when a model is built, so that the record's forward
(jaxgpt.model) reads without a branch per earlier record:

  windows            the step's attention windows by kind: the record's long and short block
                     windows; #15's token window (and its block cover); #8/#9's plain causal
  document ids       the record's EOT count; #8/#9 attend across documents (one document)
  value mixing       the record's `attn.lambdas` (with the value embedding); #9's value residual
                     with layer 0's raw value; none (#8)
  block input        the record's x <- l0 x + l1 x0 (`lambdas`); none before #9
  U-net skips        which layers store and which add a skip (the record's, from #11 on); none

Every choice is a pure function of the ModelConfig; the record preset takes the first of each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxgpt import masks
from jaxgpt.attention import AttentionWindow
from jaxgpt.config import ModelConfig
from jaxgpt.masks import WindowBlocks

# ---------------------------------------------------------------------------------------------
# Windows: the step's window value -> {"long": AttentionWindow, "short": AttentionWindow}


def block_windows(config: ModelConfig, window: WindowBlocks, seq_len: int) -> dict[str, AttentionWindow]:
    """The record's: W_long blocks for the long layers, W_long // 2 for the short ones."""
    del seq_len
    return {"long": AttentionWindow(window, None, config.max_window_blocks),
            "short": AttentionWindow(window // 2, None, config.max_window_blocks)}


def token_windows(config: ModelConfig, window: WindowBlocks, seq_len: int) -> dict[str, AttentionWindow]:
    """#15's: one token window sw for every layer, AND ceil(sw / 128) blocks (LINEAGE.md 5.4)."""
    del seq_len
    one = AttentionWindow((window + config.block_size - 1) // config.block_size, window, config.max_window_blocks)
    return {"long": one, "short": one}


def causal_windows(config: ModelConfig, window: WindowBlocks, seq_len: int) -> dict[str, AttentionWindow]:
    """#8/#9's plain causal attention: every earlier key of the sequence, a window of all its blocks."""
    del window
    everything = AttentionWindow(-(-seq_len // config.block_size), None, -(-seq_len // config.block_size))
    return {"long": everything, "short": everything}


WINDOWS = {"document_blocks": block_windows, "document_tokens": token_windows, "causal": causal_windows}


def logged_window(config: ModelConfig, window: int) -> dict[str, int]:
    """The step's window as its long layers' attention takes it, for the metrics: `window_blocks`,
    the block window after the cap (W_long; #15's ceil(sw / 128); 0 for #8/#9's plain causal
    attention, which has no window), and, for #15, `window_tokens`: sw."""
    if config.lineage.attention_mask == "causal":
        return {"window_blocks": 0}
    long = WINDOWS[config.lineage.attention_mask](config, window, 0)["long"]
    logged = {"window_blocks": min(int(long.blocks), long.max_blocks)}
    return logged if long.tokens is None else {**logged, "window_tokens": int(long.tokens)}

# ---------------------------------------------------------------------------------------------
# Document ids: (B, T) input ids -> (B, T) int32 ids the attention separates


def one_document(input_ids: jax.Array, eot_id: int) -> jax.Array:
    """#8/#9: zeros, every token in one document (they attend across EOTs)."""
    del eot_id
    return jnp.zeros(input_ids.shape, jnp.int32)


DOCUMENT_IDS: dict[str, Callable[[jax.Array, int], jax.Array]] = {
    "document_blocks": masks.document_ids, "document_tokens": masks.document_ids, "causal": one_document}

# ---------------------------------------------------------------------------------------------
# Value mixing. `first_value(attn, h, v_first) -> v_first`: #9's layer-0 raw value (B, T, H, Dh),
# made by the first attention layer, passed through by the rest (None in the other variants);
# `mix(attn, v, ve, v_first) -> v`: v, ve (the layer's value embedding or None) and v_first
# (B, T, H, Dh) in the matmul dtype. Scalars are rounded to the activation dtype first, as torch
# does for a 0-dim tensor.


def keep_first_value(attn: Any, h: jax.Array, v_first: jax.Array | None) -> jax.Array | None:
    return v_first


def layer0_value(attn: Any, h: jax.Array, v_first: jax.Array | None) -> jax.Array | None:
    """#9: layer 0's raw value projection, made by the first attention layer (h its normed input)."""
    return attn.value_projection(h) if v_first is None else v_first


def mix_value_embedding(attn: Any, v: jax.Array, ve: jax.Array | None, v_first: jax.Array | None) -> jax.Array:
    """The record's (#15 on): v = l0 v (+ l1 ve where the layer has a value embedding)."""
    lam = attn.lambdas[...].astype(v.dtype)
    v = lam[0] * v
    return v if ve is None else v + lam[1] * ve.astype(v.dtype).reshape(v.shape)


def mix_value_residual(attn: Any, v: jax.Array, ve: jax.Array | None, v_first: jax.Array | None) -> jax.Array:
    """#9's: v = (1 - lamb) v + lamb v_first ((1 - lamb) formed in the scalar's dtype, as the
    record's (1 - self.lamb))."""
    lamb = attn.lamb[...]
    v_first = v if v_first is None else v_first
    return (1 - lamb).astype(v.dtype) * v + lamb.astype(v.dtype) * v_first


def no_value_mixing(attn: Any, v: jax.Array, ve: jax.Array | None, v_first: jax.Array | None) -> jax.Array:
    """#8: the value projection as it is."""
    return v


class ValueMixing(NamedTuple):
    first_value: Callable[[Any, jax.Array, jax.Array | None], jax.Array | None]
    mix: Callable[[Any, jax.Array, jax.Array | None, jax.Array | None], jax.Array]


VALUE_MIXINGS = {"value_embedding": ValueMixing(keep_first_value, mix_value_embedding),
                 "value_residual": ValueMixing(layer0_value, mix_value_residual),
                 "none": ValueMixing(keep_first_value, no_value_mixing)}


def value_mixing(config: ModelConfig) -> str:
    """The name of `config`'s value mixing in VALUE_MIXINGS (ModelConfig refuses the mixes that
    mean nothing)."""
    if config.lineage.value_residual:
        return "value_residual"
    return "value_embedding" if config.lineage.attn_value_lambdas else "none"


# ---------------------------------------------------------------------------------------------
# Block input and U-net skips


def mix_block_input(block: Any, x: jax.Array, x0: jax.Array) -> jax.Array:
    """The record's x <- l0 x + l1 x0 before each block (#9 on)."""
    lam = block.lambdas[...].astype(x.dtype)
    return lam[0] * x + lam[1] * x0


def block_input_as_is(block: Any, x: jax.Array, x0: jax.Array) -> jax.Array:
    """Before #9: the block takes x as it is."""
    return x


BLOCK_INPUTS = {True: mix_block_input, False: block_input_as_is}  # by ModelConfig.block_lambdas


class SkipStep(NamedTuple):
    """A layer's part in the U-net: `store` its output for a later layer; `add_weight`: the index
    of the skip weight with which it adds the latest stored output to its input (None: adds none)."""

    store: bool
    add_weight: int | None


def skip_plan(config: ModelConfig) -> tuple[SkipStep, ...]:
    """The record's U-net (#11 on): encoder layer i stores its output, decoder layer j adds encoder
    output L/2 - 1 - j weighted by skip_weights[j]; without unet_skips no layer stores or adds."""
    encoder = config.num_encoder_layers
    if not config.lineage.unet_skips:
        return tuple(SkipStep(False, None) for _ in range(config.num_layers))
    return tuple(SkipStep(layer < encoder, layer - encoder if layer >= encoder else None)
                 for layer in range(config.num_layers))
