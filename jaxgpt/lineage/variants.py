"""The model's variants resolved once: `model_variants(config)` reads every model switch of the
lineage and returns a frozen `ModelVariants` of plain functions and values, which jaxgpt.model's
modules take instead of the switches."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from jaxgpt.config import AttentionBackend, ModelConfig
from jaxgpt.lineage import block_input, numerics, skips, values, windows
from jaxgpt.lineage.block_input import BlockInput
from jaxgpt.lineage.numerics import CapChoice, RotaryChoice
from jaxgpt.lineage.skips import Skips
from jaxgpt.lineage.values import ValueMixing
from jaxgpt.lineage.windows import DocumentIds, Windows


@dataclass(frozen=True)
class ModelVariants:
    """What the lineage's model switches choose, as the record's modules take it."""

    windows: Windows  # the step's window value -> the long and short layers' AttentionWindow
    document_ids: DocumentIds  # (B, T) ids -> (B, T) int32 documents the attention separates
    # the configured backend -> the one the attention calls use (called where they are traced)
    backend: Callable[[AttentionBackend], AttentionBackend]
    value_mixing: ValueMixing  # an attention layer's value mixing and its scalars
    block_input: BlockInput  # a block's input mixing and its scalars
    skips: Skips  # the U-net's plan and its weights
    norm_eps: str  # RMSNorm's eps rule, jaxgpt.layers.norm's second argument
    init_kind: str  # the linear init bound's kind, jaxgpt.layers.init_bound's
    rotary: RotaryChoice
    cap: CapChoice
    fp8_head: bool  # training uses the FP8 lm_head
    value_embed_chunks: bool  # value embeddings are chunks of one table


@functools.lru_cache(maxsize=64)
def model_variants(config: ModelConfig) -> ModelVariants:
    """`config`'s variants; cached, so that equal configs share one object (an NNX graph's static
    data compares equal, and jit reuses its programs)."""
    return ModelVariants(
        windows=windows.WINDOWS[config.lineage.attention_mask],
        document_ids=windows.DOCUMENT_IDS[config.lineage.attention_mask],
        backend=windows.BACKENDS[config.lineage.attention_mask],
        value_mixing=values.VALUE_MIXINGS[values.value_mixing(config)],
        block_input=block_input.block_input(config),
        skips=skips.skips(config),
        norm_eps=numerics.norm_eps_kind(config),
        init_kind=numerics.init_kind(config),
        rotary=numerics.rotary_choice(config),
        cap=numerics.cap_choice(config),
        fp8_head=numerics.uses_fp8_head(config),
        value_embed_chunks=numerics.value_embed_chunks(config),
    )
