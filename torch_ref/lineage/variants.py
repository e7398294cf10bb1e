"""The model's variants resolved once (mirrors jaxgpt.lineage.variants): `model_variants(config)`
reads every model switch of the lineage and returns a frozen `ModelVariants` of plain functions
and values, which torch_ref.model's modules take instead of the switches."""

from __future__ import annotations

from dataclasses import dataclass

from torch_ref.config import ModelConfig
from torch_ref.lineage import block_input, numerics, skips, values, windows
from torch_ref.lineage.block_input import BlockInput
from torch_ref.lineage.numerics import CapChoice, RotaryChoice
from torch_ref.lineage.skips import Skips
from torch_ref.lineage.values import ValueMixing
from torch_ref.lineage.windows import Masks


@dataclass(frozen=True)
class ModelVariants:
    """What the lineage's model switches choose, as the record's modules take it."""

    masks: Masks  # the step's window -> the long and short layers' masks
    value_mixing: ValueMixing  # an attention layer's value mixing and its scalars
    block_input: BlockInput  # a block's input mixing and its scalars
    skips: Skips  # the U-net's plan and its weights
    norm_eps: str  # RMSNorm's eps rule, torch_ref.layers.norm's second argument
    init_kind: str  # the linear init bound's kind, torch_ref.layers.init_bound's
    rotary: RotaryChoice
    cap: CapChoice
    fp8_head: bool  # training uses the FP8 lm_head (GPT's `fp8_head` option, as the trainer builds it)
    value_embed_chunks: bool  # value embeddings are chunks of one table
    padded_embeddings: bool  # the token and value tables have the head's padded rows


def model_variants(config: ModelConfig) -> ModelVariants:
    """`config`'s variants."""
    return ModelVariants(
        masks=windows.MASKS[config.lineage.attention_mask],
        value_mixing=values.VALUE_MIXINGS[values.value_mixing(config)],
        block_input=block_input.block_input(config),
        skips=skips.skips(config),
        norm_eps=numerics.norm_eps_kind(config),
        init_kind=numerics.init_kind(config),
        rotary=numerics.rotary_choice(config),
        cap=numerics.cap_choice(config),
        fp8_head=numerics.uses_fp8_head(config),
        value_embed_chunks=numerics.value_embed_chunks(config),
        padded_embeddings=numerics.padded_embeddings(config),
    )
