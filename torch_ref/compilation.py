"""How the record compiles on a GPU, stated once: the Inductor settings and the CUDA allocator
setting its script makes (RECORD.md 2.2), applied by torch_ref's CUDA path before it compiles.

The record's script sets, before anything compiles:
- `torch._inductor.config.coordinate_descent_tuning = True`: Inductor tunes each generated
  Triton kernel's launch settings by coordinate descent at compile time (longer first step; the
  kernels it picks can differ from the defaults', hence the reduction order);
- `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`: the caching allocator grows segments
  instead of allocating new ones (less fragmentation, so peak reserved memory differs);
and compiles the whole model with `torch.compile` (default mode), the Newton-Schulz function
(`torch_ref.muon`) and its FP8 matmul's inner functions (inside the compiled model here).
On the CPU torch_ref runs eagerly and none of this applies.
"""

from __future__ import annotations

import os
from typing import cast

import torch
from torch import nn

INDUCTOR_SETTINGS = {"coordinate_descent_tuning": True}
ALLOCATOR_SETTING = ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")


def set_allocator() -> None:
    """The record's allocator setting, unless the user set the variable (read at CUDA's first
    allocation, so called before the model is built)."""
    os.environ.setdefault(*ALLOCATOR_SETTING)


def apply_inductor_settings() -> dict[str, object]:
    """Set INDUCTOR_SETTINGS in torch._inductor.config (process-wide, as the record does); returns them."""
    import torch._inductor.config as inductor_config

    for name, value in INDUCTOR_SETTINGS.items():
        setattr(inductor_config, name, value)
    return dict(INDUCTOR_SETTINGS)


def compile_model(model: nn.Module) -> nn.Module:
    """The record's torch.compile of the whole model, under its Inductor settings."""
    apply_inductor_settings()
    return cast(nn.Module, torch.compile(model))  # an OptimizedModule; torch's stubs say a callable
