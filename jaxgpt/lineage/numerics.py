"""The lineage's numeric choices (LINEAGE.md 2-3, 8), each a plain value the record's layers take:
RMSNorm's eps rule, the linear init bound, the rotary tables and rotation, the soft-cap, the FP8
head, and the value-embedding layout."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxgpt.config import ModelConfig
from jaxgpt.rotary import rotary_tables


class RotaryChoice(NamedTuple):
    """The rotary tables' `kind` and `as_written` roundings (jaxgpt.rotary.rotary_tables), and
    whether q and k rotate in fp32 (the record's half-truncated rotary) or in their own dtype
    (#8-#15's full rotary)."""

    kind: str
    as_written: bool
    in_fp32: bool

    def tables(self, head_dim: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
        """(cos, sin), each (max_len, head_dim // 2) fp32 numpy."""
        return rotary_tables(head_dim, max_len, self.kind, self.as_written)


class CapChoice(NamedTuple):
    """The soft-cap's `kind` ("sigmoid", "tanh", "none") and `rounding` of tanh on bf16 logits
    (jaxgpt.loss.soft_cap)."""

    kind: str
    rounding: str


def norm_eps_kind(config: ModelConfig) -> str:
    """RMSNorm's eps rule (jaxgpt.layers.norm_eps): "fp32" or #8-#18's "as_run"."""
    return config.lineage.rms_norm_eps


def init_kind(config: ModelConfig) -> str:
    """The linear init bound's kind (jaxgpt.layers.init_bound): "record" or "torch_default"."""
    return config.lineage.linear_init


def rotary_choice(config: ModelConfig) -> RotaryChoice:
    lineage = config.lineage
    return RotaryChoice(lineage.rotary, lineage.as_written_roundings, lineage.rotary == "half_truncated")


def cap_choice(config: ModelConfig) -> CapChoice:
    return CapChoice(config.lineage.soft_cap, config.lineage.soft_cap_rounding)


def uses_fp8_head(config: ModelConfig) -> bool:
    """Whether training uses the FP8 lm_head (#19 on; the fp32 policy never does)."""
    return config.lineage.fp8_head and config.dtype_policy != "fp32"


def value_embed_chunks(config: ModelConfig) -> bool:
    """Whether the value embeddings are D-wide chunks of one (V, k D) table (#15's `vte`)."""
    return config.lineage.value_embed_layout == "chunks"
