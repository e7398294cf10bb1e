"""The record's FP8 lm_head matmul (RECORD.md 2.9): logits = X @ W^T with scaled float8 operands.

Forward:  Xq = e4m3fn(X * 2), Wq = e4m3fn(W * 32); logits = (Xq @ Wq^T) / (2 * 32)   (X's dtype)
Backward: Gq = e5m2(G * 2^29);  dX = (Gq @ Wq) / (2^29 * 32)   (X's dtype, bf16 in the record)
                                dW = (Gq^T @ Xq) / (2^29 * 2)  (W's dtype, fp32)
The backward reuses the quantised forward operands Xq, Wq, not X and W. Casts are plain
round-to-nearest-even conversions (no amax, no saturation); the scales keep values in range.

Two backends with one autograd.Function:
- "cuda": torch._scaled_mm on float8 operands (fast accumulation in the forward only), as the record.
- "emulated" (any device): the same float8 roundings, then fp32 matmuls of the dequantised values.
  Products of two float8 values are exact in fp32, so this differs from the GPU only by the
  accumulation order and by the GPU's reduced-precision "fast accumulation" in the forward.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

__all__ = ["GRAD_SCALE", "W_SCALE", "X_SCALE", "FP8Backend", "fp8_matmul", "lm_head_fp8", "quantize"]

X_SCALE = 2.0
W_SCALE = 32.0
GRAD_SCALE = 2.0**29

FP8Backend = Literal["auto", "cuda", "emulated"]


def quantize(t: Tensor, scale: float, dtype: torch.dtype) -> Tensor:
    """Round t * scale to a float8 dtype (round to nearest even). Same shape, dtype `dtype`."""
    return t.mul(scale).to(dtype)


def _scaled_mm_cuda(a_q: Tensor, b_q_t: Tensor, a_scale: float, b_scale: float, out_dtype: torch.dtype,
                    fast_accum: bool) -> Tensor:
    """(a_q @ b_q_t) * a_scale * b_scale through the float8 tensor cores. b_q_t must be column-major."""
    scale_a = torch.tensor(a_scale, dtype=torch.float32, device=a_q.device)
    scale_b = torch.tensor(b_scale, dtype=torch.float32, device=a_q.device)
    return torch._scaled_mm(a_q, b_q_t, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype,
                            use_fast_accum=fast_accum)


def _scaled_mm_emulated(a_q: Tensor, b_q_t: Tensor, a_scale: float, b_scale: float,
                        out_dtype: torch.dtype) -> Tensor:
    """The same product with dequantised fp32 operands and fp32 accumulation."""
    return (a_q.float() @ b_q_t.float()).mul(a_scale * b_scale).to(out_dtype)


class _FP8Matmul(torch.autograd.Function):
    """x (M, K), w (N, K) -> x @ w^T (M, N) with the record's FP8 quantisation in both passes."""

    @staticmethod
    def forward(ctx, x: Tensor, w: Tensor, scales: tuple[float, float, float], use_cuda: bool) -> Tensor:
        x_scale, w_scale, _ = scales
        x_q = quantize(x, x_scale, torch.float8_e4m3fn)
        w_q = quantize(w, w_scale, torch.float8_e4m3fn)
        inv_x, inv_w = 1.0 / x_scale, 1.0 / w_scale
        if use_cuda:
            out = _scaled_mm_cuda(x_q, w_q.t(), inv_x, inv_w, x.dtype, fast_accum=True)
        else:
            out = _scaled_mm_emulated(x_q, w_q.t(), inv_x, inv_w, x.dtype)
        ctx.save_for_backward(x_q, w_q)
        ctx.use_cuda = use_cuda
        ctx.scales = scales
        ctx.dtypes = (x.dtype, w.dtype)
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        x_q, w_q = ctx.saved_tensors
        x_dtype, w_dtype = ctx.dtypes
        x_scale, w_scale, grad_scale = ctx.scales
        g_q = quantize(grad_out.contiguous(), grad_scale, torch.float8_e5m2)
        inv_x, inv_w, inv_g = 1.0 / x_scale, 1.0 / w_scale, 1.0 / grad_scale
        if ctx.use_cuda:
            # _scaled_mm wants a row-major left and a column-major right operand.
            grad_x = _scaled_mm_cuda(g_q, w_q.t().contiguous().t(), inv_g, inv_w, x_dtype, fast_accum=False)
            # dW^T = Xq^T @ Gq is the faster layout for a (50304, 768) weight.
            grad_w = _scaled_mm_cuda(x_q.t().contiguous(), g_q.t().contiguous().t(), inv_x, inv_g,
                                     torch.float32, fast_accum=False).t()
        else:
            grad_x = _scaled_mm_emulated(g_q, w_q, inv_g, inv_w, x_dtype)
            grad_w = _scaled_mm_emulated(x_q.t(), g_q, inv_x, inv_g, torch.float32).t()
        return grad_x, grad_w.to(w_dtype), None, None


def fp8_matmul(x: Tensor, w: Tensor, backend: FP8Backend = "auto", grad_scale: float = GRAD_SCALE) -> Tensor:
    """x (M, K) in bf16 (record) or fp32, w (N, K) fp32 -> (M, N) in x's dtype, FP8 in both passes.

    backend "auto" uses _scaled_mm on CUDA and the emulation elsewhere. `grad_scale` (the record's
    2^29) is sized for a loss averaged over 65536 tokens (|G| <= 2^-16); a loss over fewer tokens T
    needs about 2^29 * T / 65536, or G * grad_scale overflows e5m2 (max 57344) to inf.
    """
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"fp8_matmul needs x (M, K) and w (N, K); got {tuple(x.shape)} and {tuple(w.shape)}")
    if backend not in ("auto", "cuda", "emulated"):
        raise ValueError(f"unknown FP8 backend {backend!r}; choose 'auto', 'cuda' or 'emulated'")
    use_cuda = backend == "cuda" or (backend == "auto" and x.is_cuda)
    if use_cuda and any(size % 16 for size in (*x.shape, w.shape[0])):
        # torch._scaled_mm's own limit; the record's (65536, 768) x (50304, 768) meets it.
        raise ValueError(f"the 'cuda' FP8 backend needs M, N and K divisible by 16; got x {tuple(x.shape)}, "
                         f"w {tuple(w.shape)}")
    if use_cuda and not x.is_cuda:
        raise ValueError("the 'cuda' FP8 backend needs CUDA tensors")
    if not grad_scale > 0:
        raise ValueError(f"grad_scale must be positive, got {grad_scale}")
    scales = (X_SCALE, W_SCALE, float(grad_scale))
    return _FP8Matmul.apply(x.contiguous(), w.contiguous(), scales, use_cuda)


def lm_head_fp8(x: Tensor, w: Tensor, backend: FP8Backend = "auto", grad_scale: float = GRAD_SCALE) -> Tensor:
    """x (..., D), w (Vp, D) -> logits (..., Vp) through the FP8 matmul."""
    flat = x.reshape(-1, x.shape[-1])
    return fp8_matmul(flat, w, backend, grad_scale).reshape(*x.shape[:-1], w.shape[0])
