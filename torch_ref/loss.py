"""The soft-cap of the logits in PyTorch: the record's sigmoid, the lineage's tanh (with its
rounding, compiled or eager) or none (mirrors jaxgpt.loss)."""

from __future__ import annotations

import torch
from torch import Tensor

LOGIT_CAP = 30.0
LOGIT_CAP_TEMPERATURE = 7.5


def soft_cap(logits: Tensor, kind: str = "sigmoid", cap: float = LOGIT_CAP,
             temperature: float = LOGIT_CAP_TEMPERATURE, rounding: str = "once") -> Tensor:
    """Soft-capped logits in fp32, any shape. "sigmoid" (Sub3Min): cap * sigmoid(z / temperature)
    in fp32, 30 * sigmoid(z / 7.5) = 15 tanh(z / 15) + 15 by default. "tanh" (#9-#18):
    cap * tanh(z / cap) on the logits' dtype: "once" computes it in fp32 and rounds once (the
    compiled chain, LINEAGE.md 8.4, inferred), "per_op" runs it eagerly in that dtype. "none" (#8)."""
    if kind == "sigmoid":
        return cap * torch.sigmoid(logits.float() / temperature)
    if kind == "none":
        return logits.float()
    if kind != "tanh":
        raise ValueError(f"unknown soft-cap kind {kind!r}")
    if rounding == "per_op":
        return (cap * torch.tanh(logits / cap)).float()
    return (cap * torch.tanh(logits.float() / cap)).to(logits.dtype).float()
