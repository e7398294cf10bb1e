"""Rotary position embeddings in PyTorch: the record's half-truncated tables and rotation, and
the lineage's full-frequency kinds with the records' own bf16 roundings (mirrors jaxgpt.rotary)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def rotary_tables(head_dim: int, max_len: int, device: torch.device | str | None = None,
                  kind: str = "half_truncated", as_written: bool = True) -> tuple[Tensor, Tensor]:
    """Rotary tables: (cos, sin), each (max_len, head_dim // 2) fp32.

    "half_truncated" (Sub3Min, #18): head_dim // 4 angular frequencies (1/1024) ** linspace(0, 1)
      followed by head_dim // 4 zeros (those dims pass through unrotated); theta = outer(t, freq) in fp32.
    "full" (#8/#9): 1 / 10000 ** (2j / head_dim) in fp32, theta in fp32.
    "full_bf16_freq" (#15): (1 / 10000) ** (2j / head_dim) rounded to bf16 (its model-wide
      .bfloat16()), theta from exact positions in fp32: the compiled reading (LINEAGE.md 5.3, inferred).
    "full_bf16_freq_eager": the eager reading of the same code: outer(int64 t, bf16 freq) is a
      bf16 product of bf16-rounded positions, and cos/sin of it are bf16.
    as_written: the "full" kinds' cos and sin rounded to bf16 (kept as fp32 values) in every dtype
    policy, as the records' code does by its own hand (docs/NUMERICS.md); False: fp32 tables, cast
    to the activation dtype at use.
    """
    if head_dim % 4:
        raise ValueError(f"head_dim must be a multiple of 4 for the rotary tables, got {head_dim}")
    positions = torch.arange(max_len, dtype=torch.float32, device=device)
    if kind == "half_truncated":
        quarter = head_dim // 4
        freq = (1 / 1024) ** torch.linspace(0, 1, steps=quarter, dtype=torch.float32, device=device)
        freq = torch.cat([freq, torch.zeros(quarter, dtype=torch.float32, device=device)])
    elif kind == "full":
        freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    elif kind in ("full_bf16_freq", "full_bf16_freq_eager"):
        freq = ((1 / 10000) ** (torch.arange(0, head_dim, 2, device=device) / head_dim)).bfloat16().float()
    else:
        raise ValueError(f"unknown rotary kind {kind!r}")
    theta = torch.outer(positions, freq)
    if kind == "full_bf16_freq_eager":  # outer(int64 t, bf16 freq) is a bf16 product of bf16-rounded positions
        theta = torch.outer(torch.arange(max_len, device=device), freq.bfloat16()).float()
    if as_written and kind != "half_truncated":
        return theta.cos().bfloat16().float(), theta.sin().bfloat16().float()
    return theta.cos(), theta.sin()


class Rotary(nn.Module):
    """Applies the record's rotary embedding to (B, T, H, Dh) tensors; tables are non-persistent buffers.

    in_fp32: x upcast to fp32 and the result cast back (Sub3Min, #18); False: the tables are cast
    to x's dtype and the rotation runs in it (#8-#15)."""

    def __init__(self, cos: Tensor, sin: Tensor, in_fp32: bool = True):
        super().__init__()
        self.cos = nn.Buffer(cos, persistent=False)
        self.sin = nn.Buffer(sin, persistent=False)
        self.in_fp32 = in_fp32

    def forward(self, x_BTHD: Tensor) -> Tensor:
        seq_len = x_BTHD.size(-3)
        if seq_len > self.cos.size(0):
            raise ValueError(f"sequence of {seq_len} tokens exceeds the rotary table length {self.cos.size(0)}")
        work = torch.float32 if self.in_fp32 else x_BTHD.dtype
        cos = self.cos[None, :seq_len, None, :].to(work)
        sin = self.sin[None, :seq_len, None, :].to(work)
        x1, x2 = x_BTHD.to(work).chunk(2, dim=-1)  # half split: dim j pairs with dim j + Dh/2
        # The record's sign: a rotation by -theta in the usual rotate-half convention.
        y1 = x1 * cos + x2 * sin
        y2 = x2 * cos - x1 * sin
        return torch.cat([y1, y2], dim=-1).type_as(x_BTHD)
