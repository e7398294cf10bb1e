"""The record's numerics, layer by layer (RECORD.md 2.2, 2.4, 2.8, 11): which dtype each
policy computes and stores in, the parameter-free RMSNorm, the linear layer that casts its fp32
weight at use, the embedding lookup and the scalar scaling whose gradients are summed in fp32,
relu^2, the linear init.
Shape suffixes follow jaxgpt.model's legend (`x_BTD` is (B, T, D))."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from jaxgpt import compat
from jaxgpt.config import ModelConfig

# torch's F.rms_norm default eps for fp32 and bf16 inputs alike (fp32 machine epsilon).
RMS_EPS = 2.0**-23
# The default eps the records' PyTorch builds took for bf16 inputs (bf16's machine epsilon,
# LINEAGE.md 2.1; inferred from the PyTorch PR that changed it): the eps rule "as_run".
RMS_EPS_BF16_AS_RUN = 2.0**-7


def compute_dtype(config: ModelConfig) -> jnp.dtype:
    """Matmul (and attention) dtype of a policy: fp32 for "fp32", bf16 for every other."""
    return jnp.float32 if config.dtype_policy == "fp32" else jnp.bfloat16


def stream_dtype(config: ModelConfig) -> jnp.dtype:
    """Dtype of the embedding tables and the residual stream: bf16 for "record" and
    "bf16_model", fp32 for "fp32" and "autocast" (#8/#9's fp32 stream under autocast)."""
    return jnp.bfloat16 if config.dtype_policy in ("record", "bf16_model") else jnp.float32


def scalar_dtype(config: ModelConfig) -> jnp.dtype:
    """Dtype of the scalar parameters (lambdas, skip weights): bf16 only under "bf16_model"."""
    return jnp.bfloat16 if config.dtype_policy == "bf16_model" else jnp.float32


def norm_eps(dtype: Any, eps_rule: str = "fp32") -> float:
    """RMSNorm's eps for inputs of `dtype`: 2^-23, except 2^-7 for bf16 inputs under the rule
    "as_run" (the lineage chooses the rule: jaxgpt/lineage/numerics.py)."""
    return RMS_EPS_BF16_AS_RUN if eps_rule == "as_run" and dtype == jnp.bfloat16 else RMS_EPS


def norm(x: jax.Array, eps_rule: str = "fp32") -> jax.Array:
    """x / sqrt(mean(x^2, -1) + eps), computed in fp32 and cast back to x.dtype; no scale.
    eps: `norm_eps(x.dtype, eps_rule)` (2^-23 unless "as_run" on bf16 inputs)."""
    x32 = x.astype(jnp.float32)
    eps = norm_eps(x.dtype, eps_rule)
    inv_rms = jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + eps)
    return (x32 * inv_rms).astype(x.dtype)


def round_to(x: jax.Array, dtype: Any) -> jax.Array:
    """`x` rounded to `dtype`'s precision (kept in x's dtype); reduce_precision, which XLA
    never drops as excess precision (a convert pair may be)."""
    info = jnp.finfo(dtype)
    if info.bits >= jnp.finfo(x.dtype).bits:
        return x
    return jax.lax.reduce_precision(x, exponent_bits=info.nexp, mantissa_bits=info.nmant)

def relu_squared(x: jax.Array) -> jax.Array:
    return jnp.square(jax.nn.relu(x))

def linear(x: jax.Array, weight_OI: jax.Array) -> jax.Array:
    """x @ W^T with W (out, in) cast to x's dtype; fp32 accumulation, output in x's dtype.

    fp32 inputs use full-precision matmul (no TF32 on GPUs), so the fp32 policy stays fp32.
    bf16 inputs give a bf16 dot (fp32 accumulation, one rounding: torch's bf16 GEMM). Asking
    for an fp32 result and casting would round the same way in the forward, but its
    transpose feeds fp32 cotangents into the backward GEMMs, which then run in fp32 on a GPU
    (measured on an H100: docs/BENCHMARKS.md, "Numbers behind choices in the code").
    """
    w = weight_OI.astype(x.dtype)
    if x.dtype == jnp.float32:
        return jnp.einsum("...i,oi->...o", x, w, precision=jax.lax.Precision.HIGHEST)
    return jnp.einsum("...i,oi->...o", x, w)

def init_bound(fan_in: int, kind: str = "record") -> float:
    """U(-b, b) bound of a linear weight: the record's sqrt(3) * 0.5 / sqrt(fan_in), or
    nn.Linear's default 1 / sqrt(fan_in) ("torch_default", #8-#18)."""
    if kind == "torch_default":
        return 1.0 / math.sqrt(fan_in)
    return math.sqrt(3.0) * 0.5 / math.sqrt(fan_in)


def uniform_init(key: jax.Array, shape: tuple[int, ...], fan_in: int, config: ModelConfig | None = None,
                 init_kind: str = "record") -> jax.Array:
    """Initial linear weight, fp32: U(-b, b) (`init_bound` of `init_kind`), bf16-rounded under the
    "bf16_model" policy (#15 rounds its whole model to bf16 before the linears return to fp32)."""
    bound = init_bound(fan_in, init_kind)
    value = jax.random.uniform(key, shape, jnp.float32, -bound, bound)
    if config is not None and config.dtype_policy == "bf16_model":
        value = value.astype(jnp.bfloat16).astype(jnp.float32)
    return value


class Linear(nnx.Module):
    """Bias-free linear layer; `weight` (out, in) fp32, cast to the matmul dtype at use
    (`compute`: the input's dtype when None; bf16 under "autocast", whose inputs are fp32).
    `init_kind`: the init bound's kind (`init_bound`)."""

    def __init__(self, in_features: int, out_features: int, *, zero_init: bool, rngs: nnx.Rngs,
                 config: ModelConfig | None = None, init_kind: str = "record"):
        shape = (out_features, in_features)
        value = (jnp.zeros(shape, jnp.float32) if zero_init
                 else uniform_init(rngs.params(), shape, in_features, config, init_kind))
        self.weight = nnx.Param(value)
        self.compute = None if config is None or config.dtype_policy != "autocast" else jnp.bfloat16

    def __call__(self, x: jax.Array) -> jax.Array:
        return linear(x if self.compute is None else x.astype(self.compute), self.weight[...])


@jax.custom_vjp
def embedding_lookup(table_VD: jax.Array, ids: jax.Array) -> jax.Array:
    """Rows of `table_VD` (V, D) at integer `ids` (any shape) -> (*ids.shape, D), table dtype.

    The gradient of the table sums each id's rows in fp32 and rounds once to the table's dtype,
    as the record's compiled backward does (RECORD.md 11, point 9). jnp.take's own transpose is a
    scatter-add in the table's dtype: for bf16 tables it rounds after every added row (on a
    real batch, where one id can fill a quarter of the tokens, 0.44 of the largest entry off)
    and on a GPU its colliding atomic adds took most of a record step (docs/BENCHMARKS.md,
    "Numbers behind choices in the code").
    """
    return jnp.take(table_VD, ids, axis=0)


def _embedding_lookup_fwd(table_VD: jax.Array, ids: jax.Array):
    # A (V, 0) array carries the table's row count and dtype to the backward at no cost.
    return embedding_lookup(table_VD, ids), (ids, jnp.zeros((table_VD.shape[0], 0), table_VD.dtype))


def _embedding_lookup_bwd(residuals, g: jax.Array):
    ids, table_like = residuals
    g_ND = g.reshape(-1, g.shape[-1]).astype(jnp.float32)
    grad_VD = jax.ops.segment_sum(g_ND, ids.reshape(-1), num_segments=table_like.shape[0])
    return grad_VD.astype(table_like.dtype), None


embedding_lookup.defvjp(_embedding_lookup_fwd, _embedding_lookup_bwd)


def scale_by_scalar(scalar: jax.Array, x: jax.Array) -> jax.Array:
    """`scalar` () rounded to x's dtype, times `x` (any shape) -> x's shape and dtype: the
    record's mixing weights (lambdas, skip weights) applied as torch applies a 0-dim tensor.

    The gradient of x is autodiff's (g times the rounded scalar). The scalar's gradient is
    torch autograd's: g x rounded to x's dtype per element, summed in fp32, rounded once to x's
    dtype, then cast to the scalar's dtype. Autodiff's own is a reduce in x's dtype, which XLA's
    CPU accumulates in bf16 for bf16 x (3-7x the record's own floor on the bf16 rows,
    docs/NUMERICS.md). In fp32 both are one fp32 sum. Under shard_map (or vmap over x alone)
    each shard's (example's) sum is rounded to x's dtype before they are added in the scalar's,
    as each rank's gradient is before the record's all-reduce.
    """
    if jnp.ndim(scalar) != 0:
        raise ValueError(f"scale_by_scalar takes a 0-dim scalar, got shape {jnp.shape(scalar)}")
    # Under shard_map an invariant scalar times a varying x: the scalar is marked varying here,
    # so its gradient is a per-device one whose cross-device sum is the pcast's transpose (the
    # custom_vjp's backward cannot return a varying gradient for an invariant input).
    return _scale_by_scalar(compat.vary_like(scalar, x), compat.vary_like(x, scalar))


@jax.custom_vjp
def _scale_by_scalar(scalar: jax.Array, x: jax.Array) -> jax.Array:
    return scalar.astype(x.dtype) * x


def _scale_by_scalar_fwd(scalar: jax.Array, x: jax.Array):
    return _scale_by_scalar(scalar, x), (scalar, x)


def _scale_by_scalar_bwd(residuals, g: jax.Array):
    scalar, x = residuals
    # The fp32 product of two bf16 values is exact, so rounding it is the bf16 multiply;
    # reduce_precision keeps that rounding where XLA would drop a convert pair.
    product = round_to(g.astype(jnp.float32) * x.astype(jnp.float32), x.dtype)
    grad_scalar = jnp.sum(product, dtype=jnp.float32).astype(x.dtype).astype(scalar.dtype)
    return grad_scalar, scalar.astype(x.dtype) * g


_scale_by_scalar.defvjp(_scale_by_scalar_fwd, _scale_by_scalar_bwd)


class Embedding(nnx.Module):
    """Token table `weight` (V, D), N(0, 1) init, stored in `dtype` (bf16 in the record)."""

    def __init__(self, num_embeddings: int, dim: int, *, dtype: jnp.dtype, rngs: nnx.Rngs):
        table = jax.random.normal(rngs.params(), (num_embeddings, dim), jnp.float32)
        self.weight = nnx.Param(table.astype(dtype))

    def __call__(self, ids: jax.Array) -> jax.Array:
        return embedding_lookup(self.weight[...], ids)
