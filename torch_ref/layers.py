"""The record's numerics in PyTorch, layer by layer (RECORD.md 2.2, 2.4): the parameter-free
RMSNorm and its eps, the linear layer that casts its fp32 weight at use, the linear init
(mirrors jaxgpt.layers)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# The record calls rms_norm without eps; in today's PyTorch that means fp32's machine epsilon
# (2^-23) for fp32 and bf16 inputs alike (RECORD.md 2.4), so it is spelled out here.
RMS_EPS = torch.finfo(torch.float32).eps
# The records' PyTorch builds took bf16's epsilon for bf16 inputs (LINEAGE.md 2.1, inferred from
# the PR that changed it): the eps rule "as_run".
RMS_EPS_BF16_AS_RUN = 2.0**-7


def norm_eps(dtype: torch.dtype, eps_rule: str = "fp32") -> float:
    """RMSNorm's eps for inputs of `dtype`: 2^-23, except 2^-7 for bf16 under the rule "as_run"
    (the lineage chooses the rule: torch_ref/lineage/numerics.py)."""
    return RMS_EPS_BF16_AS_RUN if eps_rule == "as_run" and dtype == torch.bfloat16 else RMS_EPS


def norm(x: Tensor, eps_rule: str = "fp32") -> Tensor:
    """Parameter-free RMSNorm over the last axis (computed in fp32); keeps x's dtype. eps 2^-23, or
    2^-7 on bf16 inputs under the eps rule "as_run"."""
    return F.rms_norm(x, (x.size(-1),), eps=norm_eps(x.dtype, eps_rule))


def init_bound(fan_in: int, kind: str = "record") -> float:
    """U(-b, b) bound of a linear weight: the record's sqrt(3) * 0.5 / sqrt(fan_in), or nn.Linear's
    1 / sqrt(fan_in) ("torch_default", #8-#18)."""
    return fan_in**-0.5 if kind == "torch_default" else 3**0.5 * 0.5 * fan_in**-0.5


class CastedLinear(nn.Linear):
    """Bias-free linear layer whose fp32 weight is cast to the input's dtype at every call
    (or, with `compute_dtype` set, input and weight to that dtype: #8/#9's autocast).

    Init: U(-b, b) with b = sqrt(3) * 0.5 / sqrt(in_features) (the record's std 0.5 / sqrt(in)),
    or nn.Linear's 1 / sqrt(in_features) with the init kind "torch_default" (`init_bound`).
    """

    def __init__(self, in_features: int, out_features: int, init_kind: str = "record"):
        self.init_kind = init_kind
        self.compute_dtype: torch.dtype | None = None
        super().__init__(in_features, out_features, bias=False)

    def reset_parameters(self) -> None:
        bound = init_bound(self.in_features, self.init_kind)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        if self.compute_dtype is not None:
            x = x.to(self.compute_dtype)
        return F.linear(x, self.weight.type_as(x))
