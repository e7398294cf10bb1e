"""torch_ref.fp8: the record's FP8 lm_head matmul, CPU emulation (and the CUDA kernel on a GPU).

Precision used in the bounds below (round to nearest, relative error at most half an ulp):
e4m3fn has 3 mantissa bits -> 2^-4; e5m2 has 2 -> 2^-3; bf16 has 7 -> 2^-8. A product of two
rounded operands is off by at most (1 + a)(1 + b) - 1 relative, so a dot product's error is
bounded by that factor times sum |x_k| |w_k| (plus one output rounding).
"""

from __future__ import annotations

import pytest
import torch

from torch_ref import fp8

E4M3_REL = 2.0**-4
E5M2_REL = 2.0**-3
BF16_REL = 2.0**-8


def float8_grid(dtype: torch.dtype) -> torch.Tensor:
    """Every finite value of a float8 dtype, sorted (from all 256 bit patterns)."""
    values = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).float()
    return values[values.isfinite()].unique()


@pytest.mark.parametrize("dtype, scale", [(torch.float8_e4m3fn, fp8.X_SCALE), (torch.float8_e4m3fn, fp8.W_SCALE),
                                          (torch.float8_e5m2, fp8.GRAD_SCALE)])
def test_quantize_rounds_to_the_nearest_grid_value(dtype, scale):
    grid = float8_grid(dtype)
    generator = torch.Generator().manual_seed(0)
    # Magnitudes spread over the range the record sees (|2X| < 28, |32 W| ~ 1, G * 2^29 <= 2^13).
    x = torch.randn(4096, generator=generator) * torch.logspace(-3, 1, 4096) / scale * 4
    quantized = fp8.quantize(x, scale, dtype)
    assert quantized.dtype == dtype
    values = quantized.float()
    assert torch.isin(values, grid).all(), "dequantised values must lie on the float8 grid"
    # Nearest: no grid value is strictly closer to x * scale than the chosen one.
    target = x * scale
    nearest_distance = (target[:, None] - grid[None, :]).abs().min(dim=1).values
    assert torch.equal((target - values).abs(), nearest_distance)


def test_e4m3_grid_facts():
    grid = float8_grid(torch.float8_e4m3fn)
    assert grid.max() == 448 and len(grid) == 253  # 126 positive, 126 negative, zero (two zeros, NaNs dropped)


def _operands(dtype=torch.bfloat16, seed=0, rows=200):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 96, generator=generator).to(dtype)  # O(1), like RMS-normed activations
    w = torch.randn(rows, 96, generator=generator) * 0.05  # lm_head-like magnitudes
    return x, w


def test_forward_is_the_scaled_product_of_quantised_operands():
    x, w = _operands()
    out = fp8.fp8_matmul(x, w, backend="emulated")
    assert out.shape == (64, 200) and out.dtype == torch.bfloat16
    x_q = (x.float() * 2).to(torch.float8_e4m3fn).float()
    w_q = (w * 32).to(torch.float8_e4m3fn).float()
    expected = (x_q @ w_q.T / 64).to(torch.bfloat16)
    # Same fp32 products (exact: 4-bit by 4-bit significands); summation order may differ: 1 bf16 ulp.
    torch.testing.assert_close(out, expected, rtol=BF16_REL, atol=1e-6)


def test_forward_is_within_fp8_precision_of_the_fp32_matmul():
    x, w = _operands()
    out = fp8.fp8_matmul(x, w, backend="emulated").float()
    exact = x.float() @ w.T
    bound = (x.float().abs() @ w.abs().T) * ((1 + E4M3_REL) ** 2 - 1) + exact.abs() * BF16_REL + 1e-6
    assert ((out - exact).abs() <= bound).all()
    assert (out - exact).abs().max() > 0  # it is genuinely quantised, not a plain matmul


def test_backward_reuses_quantised_operands_and_scales():
    x, w = _operands()
    x.requires_grad_(True)
    w.requires_grad_(True)
    out = fp8.fp8_matmul(x, w, backend="emulated")
    grad = (torch.randn(out.shape, generator=torch.Generator().manual_seed(1)) * 2.0**-17).to(torch.bfloat16)
    out.backward(grad)
    assert x.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.float32
    g_q = (grad.float() * 2.0**29).to(torch.float8_e5m2).float()
    x_q = (x.detach().float() * 2).to(torch.float8_e4m3fn).float()
    w_q = (w.detach() * 32).to(torch.float8_e4m3fn).float()
    # Exact fp8 x fp8 products in fp32; only summation order differs (fp32 rounding, ~1e-6 relative).
    torch.testing.assert_close(w.grad, g_q.T @ x_q / (2.0**29 * 2), rtol=1e-5, atol=1e-12)
    # dX is rounded to bf16: one bf16 ulp.
    torch.testing.assert_close(x.grad.float(), g_q @ w_q / (2.0**29 * 32), rtol=BF16_REL, atol=1e-12)


def test_gradients_are_within_fp8_precision_of_the_fp32_matmul_gradients():
    x, w = _operands(torch.float32)
    x.requires_grad_(True)
    w.requires_grad_(True)
    grad = torch.randn(64, 200, generator=torch.Generator().manual_seed(2)) * 2.0**-17
    fp8.fp8_matmul(x, w, backend="emulated").backward(grad)
    x_ref, w_ref = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
    (x_ref @ w_ref.T).backward(grad)
    factor = (1 + E5M2_REL) * (1 + E4M3_REL) - 1  # one e5m2 and one e4m3 operand per product
    bound_x = (grad.abs() @ w.detach().abs()) * factor + 1e-12
    bound_w = (grad.abs().T @ x.detach().abs()) * factor + 1e-12
    assert ((x.grad - x_ref.grad).abs() <= bound_x).all()
    assert ((w.grad - w_ref.grad).abs() <= bound_w).all()
    # And on average far better than the worst case (errors are not systematic).
    assert (w.grad - w_ref.grad).norm() < 0.1 * w_ref.grad.norm()


def test_record_grad_scale_overflows_e5m2_for_short_sequences():
    # RECORD.md 2.9: 2^29 assumes |G| <= 2^-16 (mean over 65536 tokens). A loss over 256 tokens has
    # |G| up to 2^-8, and 2^-8 * 2^29 = 2^21 > 57344 (e5m2 max) becomes inf: the scale must follow T.
    x, w = _operands(torch.float32)
    w.requires_grad_(True)
    grad = torch.full((64, 200), 2.0**-8)
    fp8.fp8_matmul(x, w, backend="emulated").backward(grad)
    assert not w.grad.isfinite().all()
    w.grad = None
    fp8.fp8_matmul(x, w, backend="emulated", grad_scale=2.0**29 * 256 / 65536).backward(grad)
    assert w.grad.isfinite().all()


def test_lm_head_fp8_keeps_leading_axes():
    x, w = _operands()
    out = fp8.lm_head_fp8(x.view(1, 64, 96), w, backend="emulated")
    assert out.shape == (1, 64, 200)
    assert torch.equal(out[0], fp8.fp8_matmul(x, w, backend="emulated"))


def test_bad_arguments_are_rejected():
    x, w = _operands()
    with pytest.raises(ValueError, match=r"x \(M, K\) and w \(N, K\)"):
        fp8.fp8_matmul(x, w[:, :10])
    with pytest.raises(ValueError, match="unknown FP8 backend"):
        fp8.fp8_matmul(x, w, backend="tpu")
    with pytest.raises(ValueError, match="divisible by 16"):
        fp8.fp8_matmul(x, w, backend="cuda")  # 200 rows: _scaled_mm would fail deep inside
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        fp8.fp8_matmul(x, w[:192], backend="cuda")
    with pytest.raises(ValueError, match="grad_scale must be positive"):
        fp8.fp8_matmul(x, w, grad_scale=0.0)


@pytest.mark.gpu
def test_cuda_kernel_matches_the_emulation():
    x, w = _operands(rows=208)  # _scaled_mm needs every dimension divisible by 16
    x, w = x.cuda().requires_grad_(True), w.cuda().requires_grad_(True)
    x_e, w_e = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    out = fp8.fp8_matmul(x, w, backend="cuda")
    out_e = fp8.fp8_matmul(x_e, w_e, backend="emulated")
    # Fast accumulation and bf16 output: a few bf16 ulps on O(1) logits.
    torch.testing.assert_close(out.float(), out_e.float(), rtol=1e-2, atol=1e-2)
    grad = torch.randn_like(out) * 2.0**-17
    out.backward(grad)
    out_e.backward(grad)
    # Same exact products, but an H100's FP8 GEMM sums them with less than fp32 precision even
    # without fast accumulation: measured 6e-8 abs on entries near zero (rel 0.44 there).
    # Compare against the largest entry instead: 1e-3 of it.
    torch.testing.assert_close(w.grad, w_e.grad, rtol=1e-3, atol=1e-3 * w_e.grad.abs().max().item())
    torch.testing.assert_close(x.grad.float(), x_e.grad.float(), rtol=1e-2, atol=1e-9)  # bf16 output
