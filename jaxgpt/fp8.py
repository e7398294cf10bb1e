"""The record's FP8 lm_head (RECORD.md 2.9), and its training loss fused with it.

Forward:  Xq = e4m3fn(2 X), Wq = e4m3fn(32 W); logits = (Xq @ Wq^T) / 64, fp32 accumulation, bf16.
Backward: Gq = e5m2(s G) for the bf16 logit gradient G (s = 2^29 in the record);
          dX = (Gq @ Wq) / (32 s) in bf16, dW = (Gq^T @ Xq) / (2 s) in fp32,
          reusing the quantised forward operands. Casts are plain round-to-nearest-even, with
          no amax scaling and no saturation, as in the record.

CPUs have no FP8 dot: FP8 values are exact in bf16, so a bf16 GEMM with fp32 accumulation
computes the FP8 product exactly there; on an H100, XLA turns the same HLO into FP8 GEMMs
(scripts/gpu_plan.py counts them).

Two entry points (torch_ref/fp8.py holds the torch twin of the first):
- `fp8_head`: the matmul alone, a custom_vjp usable under any loss.
- `fp8_head_loss`: the matmul under a per-token loss of its logits, with the whole backward of
  the head done inside the forward pass, chunk by chunk, while each chunk's logits are at hand:
  G, Gq and both gradient GEMMs. The backward then only scales dX and dW by the loss's
  cotangent. Autodiff through `fp8_head` instead either keeps (N, Vp) logits for the backward
  or, chunked under jax.checkpoint, recomputes the forward GEMM there (a fourth FP8 GEMM).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxgpt.config import RECORD_FP8_GRAD_SCALE

X_SCALE = 2.0
W_SCALE = 32.0
GRAD_SCALE = RECORD_FP8_GRAD_SCALE  # for a mean over 65,536 tokens: config.fp8_grad_scale_for

# (logits (K, Vp) bf16, targets (K,) int) -> fp32 scalar: a loss summed over K tokens.
LogitsLoss = Callable[[jax.Array, jax.Array], jax.Array]


def quantize_operands(x_ND: jax.Array, w_VD: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(N, D) bf16 activations and (Vp, D) fp32 weights -> e4m3fn(2 X), e4m3fn(32 W)."""
    x_q = (x_ND * jnp.asarray(X_SCALE, x_ND.dtype)).astype(jnp.float8_e4m3fn)
    w_q = (w_VD.astype(jnp.float32) * W_SCALE).astype(jnp.float8_e4m3fn)
    return x_q, w_q


def quantize_grad(g_NV: jax.Array, grad_scale: float) -> jax.Array:
    """(N, Vp) bf16 logit gradient -> e5m2(s G), with s G rounded to bf16 first as torch does
    (bf16 times a Python float computes in fp32 and rounds to bf16; exact for 2^k)."""
    # reduce_precision keeps G's bf16 rounding on GPUs: XLA:GPU may drop a convert pair
    # f32 -> bf16 -> f32 ("excess precision") and fold the scale into the soft-cap's 1/7.5.
    g = jax.lax.reduce_precision(g_NV.astype(jnp.float32), exponent_bits=8, mantissa_bits=7)
    return (g * grad_scale).astype(jnp.bfloat16).astype(jnp.float8_e5m2)


def logits_from_quantized(x_q: jax.Array, w_q: jax.Array) -> jax.Array:
    """(N, D) e4m3fn x (Vp, D) e4m3fn -> (N, Vp) bf16 logits, rescaled by 1/64 (a power of two)."""
    acc = jnp.einsum("nd,vd->nv", x_q.astype(jnp.bfloat16), w_q.astype(jnp.bfloat16),
                     preferred_element_type=jnp.float32)
    return (acc * (1.0 / (X_SCALE * W_SCALE))).astype(jnp.bfloat16)


def grads_from_quantized(
    g_q: jax.Array, x_q: jax.Array, w_q: jax.Array, grad_scale: float
) -> tuple[jax.Array, jax.Array]:
    """The two gradient GEMMs: Gq (N, Vp) e5m2 -> dX (N, D) bf16, dW (Vp, D) fp32."""
    g = g_q.astype(jnp.bfloat16)
    dx = jnp.einsum("nv,vd->nd", g, w_q.astype(jnp.bfloat16), preferred_element_type=jnp.float32)
    dw = jnp.einsum("nv,nd->vd", g, x_q.astype(jnp.bfloat16), preferred_element_type=jnp.float32)
    dx = (dx * (1.0 / (grad_scale * W_SCALE))).astype(jnp.bfloat16)
    dw = dw * (1.0 / (grad_scale * X_SCALE))
    return dx, dw


# ---------------------------------------------------------------------------------------------
# The matmul alone


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def fp8_head(x_ND: jax.Array, w_VD: jax.Array, grad_scale: float = GRAD_SCALE) -> jax.Array:
    """(N, D) bf16 x (Vp, D) fp32 -> (N, Vp) bf16 logits; the backward is the module docstring's.

    No saturation: |s G| must stay below 61440 (e5m2 -> inf).
    """
    return logits_from_quantized(*quantize_operands(x_ND, w_VD))


def _fp8_head_fwd(x_ND: jax.Array, w_VD: jax.Array, grad_scale: float):
    x_q, w_q = quantize_operands(x_ND, w_VD)
    return logits_from_quantized(x_q, w_q), (x_q, w_q)


def _fp8_head_bwd(grad_scale: float, residuals, g_NV: jax.Array):
    x_q, w_q = residuals
    return grads_from_quantized(quantize_grad(g_NV, grad_scale), x_q, w_q, grad_scale)


fp8_head.defvjp(_fp8_head_fwd, _fp8_head_bwd)


# ---------------------------------------------------------------------------------------------
# The matmul fused with its loss


def map_token_chunks(fn: Callable, x_N: jax.Array, targets_N: jax.Array, chunk_tokens: int | None):
    """fn over chunks of K = chunk_tokens tokens in a lax.scan (None: one call on all N tokens).

    fn(x (K, ...), targets (K,)) -> (sums, rows): `sums` (a pytree: a loss total, a weight
    gradient) is added up over the chunks in order, in its own dtype; `rows` (a pytree of
    arrays with K leading rows, or ()) is joined back into N rows. A remainder shorter than a
    chunk is one more call after the scan, added last.
    """
    num_tokens = x_N.shape[0]
    if chunk_tokens is None or chunk_tokens >= num_tokens:
        return fn(x_N, targets_N)
    num_chunks, tail = divmod(num_tokens, chunk_tokens)
    body = num_chunks * chunk_tokens
    x_C = x_N[:body].reshape(num_chunks, chunk_tokens, *x_N.shape[1:])
    t_C = targets_N[:body].reshape(num_chunks, chunk_tokens)
    sums_shape, _ = jax.eval_shape(fn, x_C[0], t_C[0])

    def step(sums, xt):
        chunk_sums, rows = fn(*xt)
        return jax.tree.map(jnp.add, sums, chunk_sums), rows

    # zeros_like of the abstract sums keeps their type under shard_map (varying over an axis).
    zeros = jax.tree.map(jnp.zeros_like, sums_shape)
    sums, rows = jax.lax.scan(step, zeros, (x_C, t_C))
    rows = jax.tree.map(lambda r: r.reshape(body, *r.shape[2:]), rows)
    if tail:
        tail_sums, tail_rows = fn(x_N[body:], targets_N[body:])
        sums = jax.tree.map(jnp.add, sums, tail_sums)
        rows = jax.tree.map(lambda r, t: jnp.concatenate([r, t]), rows, tail_rows)
    return sums, rows


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def fp8_head_loss(
    x_ND: jax.Array, w_VD: jax.Array, targets_N: jax.Array, logits_loss: LogitsLoss,
    chunk_tokens: int | None = None, grad_scale: float = GRAD_SCALE,
) -> jax.Array:
    """Mean over N tokens of logits_loss(fp8_head(X, W), targets); fp32 scalar.

    x_ND (N, D) bf16, w_VD (Vp, D) fp32, targets_N (N,) int. `logits_loss` sums a per-token loss
    of (K, Vp) bf16 logits; it runs `chunk_tokens` tokens at a time (None: all at once), so no
    more than (chunk_tokens, Vp) fp32 logits exist at once. Residuals for the backward: dX
    (N, D) bf16 and dW (Vp, D) fp32, computed in the forward (see the module docstring).

    G is computed for a loss cotangent of 1, which is what value_and_grad of this loss (the
    trainer) hands in; the backward scales dX and dW by the actual cotangent c. So with c = 1
    and no chunks the result is bitwise autodiff through `fp8_head` under the same loss, and
    chunks only add dW's per-chunk GEMMs in fp32. Any other c differs from autodiff only where
    c meets the bf16 and e5m2 roundings of G (nowhere for c = 2^k, outside e5m2's subnormals).
    Computing the gradients costs nothing extra under value_and_grad but is wasted without a
    derivative, so a plain call (evaluation) runs the loss alone.
    """
    x_q, w_q = quantize_operands(x_ND, w_VD)

    def chunk(x_q_K, targets_K):
        return logits_loss(logits_from_quantized(x_q_K, w_q), targets_K), ()

    return map_token_chunks(chunk, x_q, targets_N, chunk_tokens)[0] / x_ND.shape[0]


def _fp8_head_loss_fwd(x_ND, w_VD, targets_N, logits_loss, chunk_tokens, grad_scale):
    num_tokens = x_ND.shape[0]
    x_q, w_q = quantize_operands(x_ND, w_VD)
    # What d(total / N) hands each token's loss when d(mean) = 1, as autodiff computes it.
    cotangent = jnp.float32(1.0) / num_tokens

    def chunk(x_q_K, targets_K):
        # jax.vjp runs autodiff's own formulas, so G is bitwise what `fp8_head` would be handed.
        logits = logits_from_quantized(x_q_K, w_q)
        total, vjp = jax.vjp(lambda z: logits_loss(z, targets_K), logits)
        # ones_like keeps the total's type under shard_map (varying over the data axis).
        g_q = quantize_grad(vjp(jnp.ones_like(total) * cotangent)[0], grad_scale)
        dx, dw = grads_from_quantized(g_q, x_q_K, w_q, grad_scale)
        return (total, dw), dx

    (total, dw), dx = map_token_chunks(chunk, x_q, targets_N, chunk_tokens)
    return total / num_tokens, (dx, dw)


def _fp8_head_loss_bwd(logits_loss, chunk_tokens, grad_scale, residuals, cotangent):
    del logits_loss, chunk_tokens, grad_scale
    dx, dw = residuals
    dx = (dx.astype(jnp.float32) * cotangent).astype(jnp.bfloat16)  # exact for cotangent 1
    return dx, dw * cotangent, None


fp8_head_loss.defvjp(_fp8_head_loss_fwd, _fp8_head_loss_bwd)
