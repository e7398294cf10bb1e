"""The record's GPT in Flax NNX (RECORD.md section 2).

Parameter paths joined with "." are the record's state-dict keys (`embed.weight`,
`blocks.3.attn.qkv_w`, ...) and every matrix keeps the record's (out, in) layout, so a torch
checkpoint converts by renaming and casting only (see `jaxgpt.run.convert`).

Dtype policies (ModelConfig.dtype_policy):
  "record":     embedding tables stored bf16, linear weights fp32 and cast to bf16 at use,
                activations bf16; rotary, RMSNorm, softmax, soft-cap and CE in fp32; FP8 head
                when train=True and config.fp8_head, plain bf16 head otherwise.
  "fp32":       everything fp32, plain fp32 head (parity tests).
  "bf16_model": as "record", plus bf16 scalars and bf16-rounded initial linear weights (#15).
  "autocast":   fp32 parameters and residual stream, bf16 matmul inputs and outputs (#8/#9).

The lineage's other switches (ModelConfig's "lineage switches") change which parameters exist
(`block_lambdas`, `unet_skips`, value embeddings, `attn_value_lambdas`, `value_residual`) and how
the layers compute (`attention_mask`, `rotary`, `as_written_roundings`, `soft_cap`, `rms_norm_eps`); parameter
names stay this module's in every case (jaxgpt.run.convert maps each record's own state-dict names).

Shape suffixes (the project's one legend; docs/DESIGN.md points here): an array argument of a
fixed layout inside the layers and the head carries its axes as a suffix, `x_BTD` is (B, T, D).
  B batch, T tokens of a sequence, N = B*T tokens flattened, D model dim, H heads, Dh head dim,
  R = Dh // 2 rotary frequencies, V vocabulary rows (Vp where the lm_head's padding to a multiple
  of 128 matters), C chunks and K tokens per chunk of the chunked loss (C new tokens when
  decoding), O and I a weight's out and in features.
Shape-generic arguments (`x` of `norm`, `linear`) and GPT's methods, whose (B, T) ids
are given in their docstrings, carry none; of the other modules only fp8.py uses suffixes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
import numpy as np
from flax import nnx

from jaxgpt import attention as attention_lib
from jaxgpt import fp8, masks
from jaxgpt.kernels.block_lists import KernelBlockLists, kernel_block_lists
from jaxgpt.config import RECORD_FP8_GRAD_SCALE, ModelConfig

WindowBlocks = int | jax.Array

# torch's F.rms_norm default eps for fp32 and bf16 inputs alike (fp32 machine epsilon).
RMS_EPS = 2.0**-23
# The default eps the records' PyTorch builds took for bf16 inputs (bf16's machine epsilon,
# LINEAGE.md 2.1; inferred from the PyTorch PR that changed it): rms_norm_eps "as_run".
RMS_EPS_BF16_AS_RUN = 2.0**-7


# ---------------------------------------------------------------------------------------------
# Pure functions


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


def norm_eps(dtype: Any, rms_norm_eps: str = "fp32") -> float:
    """RMSNorm's eps for inputs of `dtype`: 2^-23, except 2^-7 for bf16 inputs under "as_run"."""
    return RMS_EPS_BF16_AS_RUN if rms_norm_eps == "as_run" and dtype == jnp.bfloat16 else RMS_EPS


def norm(x: jax.Array, rms_norm_eps: str = "fp32") -> jax.Array:
    """x / sqrt(mean(x^2, -1) + eps), computed in fp32 and cast back to x.dtype; no scale.
    eps: `norm_eps(x.dtype, rms_norm_eps)` (2^-23 unless "as_run" on bf16 inputs)."""
    x32 = x.astype(jnp.float32)
    eps = norm_eps(x.dtype, rms_norm_eps)
    inv_rms = jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + eps)
    return (x32 * inv_rms).astype(x.dtype)


def round_to(x: jax.Array, dtype: Any) -> jax.Array:
    """`x` rounded to `dtype`'s precision (kept in x's dtype); reduce_precision, which XLA
    never drops as excess precision (a convert pair may be)."""
    info = jnp.finfo(dtype)
    if info.bits >= jnp.finfo(x.dtype).bits:
        return x
    return jax.lax.reduce_precision(x, exponent_bits=info.nexp, mantissa_bits=info.nmant)


def _bf16(values: np.ndarray) -> np.ndarray:
    """fp32 numpy values rounded to bf16 (nearest even), returned as fp32."""
    import ml_dtypes  # numpy's bf16, as used by jax

    return values.astype(ml_dtypes.bfloat16).astype(np.float32)


@functools.lru_cache(maxsize=8)
def rotary_tables(head_dim: int, max_len: int, kind: str = "half_truncated",
                  as_written: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin), each (max_len, head_dim // 2) float32 numpy, built once per shape and kind.

    "half_truncated" (Sub3Min, #18): frequencies (1/1024) ** linspace(0, 1, head_dim // 4) in
      fp32, then head_dim // 4 zeros (those dims pass through unrotated); angle t * freq in fp32.
    "full" (#8/#9): head_dim // 2 frequencies 1 / 10000 ** (2j / head_dim) in fp32, angle in fp32.
    "full_bf16_freq" (#15): the frequencies (1 / 10000) ** (2j / head_dim) rounded to bf16 (the
      model's .bfloat16()), angle t * freq in fp32 with exact t: torch.compile's reading
      (LINEAGE.md 5.3; inferred, not verified).
    "full_bf16_freq_eager": the same frequencies under eager type promotion: positions rounded to
      bf16 (multiples of 256 above 32768), their product with the frequencies rounded to bf16,
      cos/sin of that. The alternative reading of the same record.
    as_written: the "full" kinds' cos and sin are rounded to bf16 here, in every dtype policy, as
    the records' code does by its own hand (#8/#9's `.bfloat16()` on fp32 tables, #15's tables
    built from its bf16 buffer; docs/NUMERICS.md); False leaves them fp32 (a study), and a bf16
    activation dtype then rounds them at use.
    """
    if head_dim % 4:
        raise ValueError(f"rotary needs head_dim divisible by 4, got {head_dim}")
    positions = np.arange(max_len, dtype=np.float32)
    if kind == "half_truncated":
        quarter = head_dim // 4
        exponents = np.linspace(0.0, 1.0, quarter, dtype=np.float32)
        freq = np.power(np.float32(1.0 / 1024.0), exponents, dtype=np.float32)
        freq = np.concatenate([freq, np.zeros(quarter, np.float32)])
    elif kind == "full":
        exponents = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
        # 10000 ** e rounded to fp32 once (the value torch's fp32 pow gives; numpy's float32 pow is
        # off by an ulp on some exponents), then the fp32 reciprocal, as #8/#9's code computes it.
        freq = np.float32(1.0) / np.power(10000.0, exponents.astype(np.float64)).astype(np.float32)
    elif kind in ("full_bf16_freq", "full_bf16_freq_eager"):
        exponents = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
        freq = _bf16(np.power(np.float32(1.0 / 10000.0), exponents, dtype=np.float32))
        if kind == "full_bf16_freq_eager":
            positions = _bf16(positions)
    else:
        raise ValueError(f"unknown rotary kind {kind!r}")
    theta = positions[:, None] * freq[None, :]
    if kind == "full_bf16_freq_eager":
        theta = _bf16(theta)
    if kind == "half_truncated":
        cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    else:  # the correctly rounded fp32 cos/sin of the fp32 angle: bf16 rounding turns ulps into 2^-8 flips
        cos, sin = (f(theta.astype(np.float64)).astype(np.float32) for f in (np.cos, np.sin))
    if as_written and kind != "half_truncated":
        cos, sin = _bf16(cos), _bf16(sin)
    cos.flags.writeable = False  # shared through the cache
    sin.flags.writeable = False
    return cos, sin


def apply_rotary(x_BTHD: jax.Array, cos_TR: jax.Array, sin_TR: jax.Array, *, in_fp32: bool = True) -> jax.Array:
    """The record's half-split rotary: y1 = x1 c + x2 s, y2 = -x1 s + x2 c.

    x_BTHD: (B, T, H, Dh) any float dtype; cos_TR, sin_TR: (T, Dh // 2) fp32.
    in_fp32: x upcast to fp32 and the result cast back (Sub3Min, #18); False: the tables are
    cast to x's dtype and the rotation runs in it (#8-#15's bf16 tables and products).
    Returns (B, T, H, Dh) in x's dtype.
    """
    work = jnp.float32 if in_fp32 else x_BTHD.dtype
    x = x_BTHD.astype(work)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = (t.astype(work)[None, :, None, :] for t in (cos_TR, sin_TR))
    y1 = x1 * cos + x2 * sin
    y2 = x2 * cos - x1 * sin
    return jnp.concatenate([y1, y2], axis=-1).astype(x_BTHD.dtype)


def relu_squared(x: jax.Array) -> jax.Array:
    return jnp.square(jax.nn.relu(x))


def soft_cap(logits: jax.Array, cap: float, temperature: float, kind: str = "sigmoid",
             rounding: str = "once", round_dtype: Any = None) -> jax.Array:
    """The soft-capped logits in fp32, any shape.

    "sigmoid": cap * sigmoid(z / temperature) in fp32 (= the record's 15 tanh(z/15) + 15 for 30,
    7.5). "tanh": cap * tanh(z / cap) in the logits' dtype (`round_dtype` when given: #9-#18 cap
    bf16 logits, then cast): rounding "once" computes it in fp32 and rounds once (the compiled
    chain, LINEAGE.md 8.4, inferred), "per_op" rounds after the divide, the tanh and the
    multiply (eager). "none": the logits themselves (#8).
    """
    z = logits.astype(jnp.float32)
    if kind == "sigmoid":
        return cap * jax.nn.sigmoid(z / temperature)
    if kind == "none":
        return z
    if kind != "tanh":
        raise ValueError(f"unknown soft-cap kind {kind!r}")
    rnd = functools.partial(round_to, dtype=round_dtype or logits.dtype)
    if rounding == "per_op":
        return rnd(cap * rnd(jnp.tanh(rnd(z / cap))))
    return rnd(cap * jnp.tanh(z / cap))


def linear(x: jax.Array, weight_OI: jax.Array) -> jax.Array:
    """x @ W^T with W (out, in) cast to x's dtype; fp32 accumulation, output in x's dtype.

    fp32 inputs use full-precision matmul (no TF32 on GPUs), so the fp32 policy stays fp32.
    bf16 inputs give a bf16 dot (fp32 accumulation, one rounding: torch's bf16 GEMM). Asking
    for an fp32 result and casting would round the same way in the forward, but its
    transpose feeds fp32 cotangents into the backward GEMMs, which then run in fp32 on a GPU
    (measured on an H100: one record MLP fwd+bwd 9.0 ms, docs/BENCHMARKS.md).
    """
    w = weight_OI.astype(x.dtype)
    if x.dtype == jnp.float32:
        return jnp.einsum("...i,oi->...o", x, w, precision=jax.lax.Precision.HIGHEST)
    return jnp.einsum("...i,oi->...o", x, w)


def head_logits(
    x_ND: jax.Array, w_VD: jax.Array, *, use_fp8: bool, fp8_grad_scale: float = RECORD_FP8_GRAD_SCALE
) -> jax.Array:
    """lm_head logits (N, Vp) before the soft-cap: FP8 head or a plain linear in x's dtype."""
    if use_fp8:
        return fp8.fp8_head(x_ND.astype(jnp.bfloat16), w_VD, fp8_grad_scale)
    return linear(x_ND, w_VD)


def capped_cross_entropy(logits_NV: jax.Array, targets_N: jax.Array, *, cap: float, temperature: float,
                         cap_kind: str = "sigmoid", cap_rounding: str = "once") -> jax.Array:
    """Sum over N tokens of CE(soft_cap(logits), target) over all Vp classes; fp32 scalar.

    Written so that XLA:GPU reads the (N, Vp) logits in two passes and writes no fp32 (N, Vp)
    buffer (the compile-only H100 plan before this wrote the capped logits once and read them
    twice):
    - log-sum-exp shifted by the cap, not the row max: soft_cap bounds the capped logits to
      (0, cap) (the tanh cap to (-cap, cap)), so exp(capped - cap) stays in fp32's normal range
      with no max pass (the same math; the fp32 sum rounds differently, at the ulp level); #8's
      uncapped logits take the usual max-shifted log-sum-exp;
    - the target logit is picked from the fp32 logits by a one-hot select, then capped: a
      gather's transpose would be a scatter into a zeroed (N, Vp) buffer, while the select's
      fuses into the softmax gradient;
    - under jax.checkpoint, keeping only the two (N,) sums, the backward recomputes the capped
      logits from the logits inside its own fusion instead of sharing a stored copy.
    The gradient is summed in fp32 and rounded to the logits' dtype once, as the record's is.
    """
    if cap_kind == "none":  # #8's plain logits: unbounded, so the usual max-shifted log-sum-exp
        logits_f32 = logits_NV.astype(jnp.float32)
        is_target = jnp.arange(logits_NV.shape[-1]) == targets_N[:, None]
        return (jax.nn.logsumexp(logits_f32, axis=-1) - jnp.where(is_target, logits_f32, 0.0).sum(axis=-1)).sum()
    if not 0 < cap <= 40:  # exp(-cap) (tanh: exp(-2 cap)) must stay a normal fp32 number for the cap shift
        raise ValueError(f"soft-cap {cap} outside (0, 40]: the cross-entropy shifts by it")
    return _capped_cross_entropy(logits_NV, targets_N, cap, temperature, cap_kind, cap_rounding)


@functools.partial(jax.checkpoint, static_argnums=(2, 3, 4, 5),
                   policy=jax.checkpoint_policies.save_only_these_names("softmax_denominator", "target_logit"))
def _capped_cross_entropy(logits_NV: jax.Array, targets_N: jax.Array, cap: float, temperature: float,
                          cap_kind: str, cap_rounding: str) -> jax.Array:
    logits_f32 = logits_NV.astype(jnp.float32)  # one convert: both gradient paths meet in fp32
    # The tanh cap rounds to the logits' own dtype (bf16), as the records cap bf16 logits.
    capped = functools.partial(soft_cap, cap=cap, temperature=temperature, kind=cap_kind, rounding=cap_rounding,
                               round_dtype=logits_NV.dtype)
    is_target = jnp.arange(logits_NV.shape[-1]) == targets_N[:, None]
    picked = checkpoint_name(jnp.where(is_target, logits_f32, 0.0).sum(axis=-1), "target_logit")
    sum_exp = checkpoint_name(jnp.exp(capped(logits_f32) - cap).sum(axis=-1), "softmax_denominator")
    return (cap + jnp.log(sum_exp) - capped(picked)).sum()


def head_loss(
    x_ND: jax.Array, w_VD: jax.Array, targets_N: jax.Array, *, use_fp8: bool, cap: float,
    temperature: float, chunk_tokens: int | None = None, fp8_grad_scale: float = RECORD_FP8_GRAD_SCALE,
    cap_kind: str = "sigmoid", cap_rounding: str = "once",
) -> jax.Array:
    """Mean soft-capped CE over N tokens, fp32 scalar; optionally `chunk_tokens` at a time.

    The FP8 head goes through `fp8.fp8_head_loss`, whose forward computes the logits' gradient
    while it has them, chunk by chunk. The plain head is differentiated by autodiff; its chunks
    run in `fp8.map_token_chunks`' lax.scan under jax.checkpoint. Either way no more than (chunk_tokens, Vp) fp32
    logits exist at once, and the mean is the same sum divided by N.
    """
    loss_of_logits = functools.partial(capped_cross_entropy, cap=cap, temperature=temperature, cap_kind=cap_kind,
                                       cap_rounding=cap_rounding)
    if use_fp8:
        return fp8.fp8_head_loss(x_ND.astype(jnp.bfloat16), w_VD, targets_N, loss_of_logits, chunk_tokens,
                                 fp8_grad_scale)

    def piece(x_KD, targets_K):
        return loss_of_logits(linear(x_KD, w_VD), targets_K), ()

    if chunk_tokens is not None and chunk_tokens < x_ND.shape[0]:
        piece = jax.checkpoint(piece)
    return fp8.map_token_chunks(piece, x_ND, targets_N, chunk_tokens)[0] / x_ND.shape[0]


class DecodeContext(NamedTuple):
    """Where the C new tokens of an incremental decoding step sit in the cached sequence.

    positions: (C,) int32 absolute positions (rotary and window use them, as in training);
    cache_doc_ids: (B, S) int32 document id of every cache slot, the new tokens' included.
    """

    positions: jax.Array
    cache_doc_ids: jax.Array


# ---------------------------------------------------------------------------------------------
# Modules


def linear_init_bound(fan_in: int, linear_init: str = "record") -> float:
    """U(-b, b) bound of a linear weight: the record's sqrt(3) * 0.5 / sqrt(fan_in), or
    nn.Linear's default 1 / sqrt(fan_in) ("torch_default", #8-#18)."""
    if linear_init == "torch_default":
        return 1.0 / math.sqrt(fan_in)
    return math.sqrt(3.0) * 0.5 / math.sqrt(fan_in)


def _uniform_init(key: jax.Array, shape: tuple[int, ...], fan_in: int, config: ModelConfig | None = None) -> jax.Array:
    """Initial linear weight, fp32: U(-b, b) (`linear_init_bound`), bf16-rounded under the
    "bf16_model" policy (#15 rounds its whole model to bf16 before the linears return to fp32)."""
    bound = linear_init_bound(fan_in, "record" if config is None else config.linear_init)
    value = jax.random.uniform(key, shape, jnp.float32, -bound, bound)
    if config is not None and config.dtype_policy == "bf16_model":
        value = value.astype(jnp.bfloat16).astype(jnp.float32)
    return value


class Linear(nnx.Module):
    """Bias-free linear layer; `weight` (out, in) fp32, cast to the matmul dtype at use
    (`compute`: the input's dtype when None; bf16 under "autocast", whose inputs are fp32)."""

    def __init__(self, in_features: int, out_features: int, *, zero_init: bool, rngs: nnx.Rngs,
                 config: ModelConfig | None = None):
        shape = (out_features, in_features)
        value = (jnp.zeros(shape, jnp.float32) if zero_init
                 else _uniform_init(rngs.params(), shape, in_features, config))
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
    and on a GPU its colliding atomic adds took 233 ms of a 420 ms record step on an H100.
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


class Embedding(nnx.Module):
    """Token table `weight` (V, D), N(0, 1) init, stored in `dtype` (bf16 in the record)."""

    def __init__(self, num_embeddings: int, dim: int, *, dtype: jnp.dtype, rngs: nnx.Rngs):
        table = jax.random.normal(rngs.params(), (num_embeddings, dim), jnp.float32)
        self.weight = nnx.Param(table.astype(dtype))

    def __call__(self, ids: jax.Array) -> jax.Array:
        return embedding_lookup(self.weight[...], ids)


class ValueEmbedding(nnx.Module):
    """The record's `value_embeds.embed.{k}` tables: k tables (V, D) ("tables"), or one (V, k D)
    table whose D-wide chunks are the value embeddings ("chunks", #15's `vte`)."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        count, width = config.value_embed_tables
        self.chunks = config.value_embed_layout == "chunks"
        self.embed = nnx.List([
            Embedding(config.embedding_rows, width, dtype=stream_dtype(config), rngs=rngs) for _ in range(count)
        ])

    def lookup(self, input_ids: jax.Array, dim: int) -> list[jax.Array]:
        """The value embeddings of `input_ids` (B, T): one (B, T, D) array per slot index."""
        if not self.chunks:
            return [table(input_ids) for table in self.embed]
        if not self.embed:
            return []
        rows = self.embed[0](input_ids)  # (B, T, k D): one lookup, then the chunks
        return [rows[..., i * dim:(i + 1) * dim] for i in range(rows.shape[-1] // dim)]


SEPARATE_QKV_NAMES = ("q_w", "k_w", "v_w")  # qkv_layout "separate": the slices of qkv_w, in order


class AttentionWindow(NamedTuple):
    """One attention call's window: `blocks` (int or traced int32; the block window, W_long or
    W_short), `tokens` (#15's token window sw, or None) and the static cap of `blocks`."""

    blocks: WindowBlocks
    tokens: WindowBlocks | None
    max_blocks: int


class CausalSelfAttention(nnx.Module):
    """QKV attention: c_proj (D, D), the QKV weights by config.qkv_layout (the record's merged
    qkv_w (3, D, D) as (q|k|v, out, in), or q_w, k_w, v_w, each (D, D) (out, in), whose stack
    is qkv_w: both layouts draw the same numbers from the same key), and by the lineage
    switches `lambdas` (2,) (attn_value_lambdas) or #9's `lamb` () (value_residual)."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        dim = config.model_dim
        self.config = config
        qkv_w = _uniform_init(rngs.params(), (3, dim, dim), dim, config)
        if config.qkv_layout == "merged":
            self.qkv_w = nnx.Param(qkv_w)
        else:
            self.q_w, self.k_w, self.v_w = (nnx.Param(w) for w in qkv_w)
        if config.attn_value_lambdas:
            self.lambdas = nnx.Param(jnp.array([0.5, 0.5], scalar_dtype(config)))
        if config.value_residual:
            self.lamb = nnx.Param(jnp.array(0.5, scalar_dtype(config)))
        self.c_proj = Linear(dim, dim, zero_init=True, rngs=rngs, config=config)

    def __call__(
        self, h_BTD: jax.Array, ve_BTD: jax.Array | None, doc_ids_BT: jax.Array,
        window: AttentionWindow, rotary: tuple[jax.Array, jax.Array],
        decode: DecodeContext | None = None, lists: KernelBlockLists | None = None,
        v_first_BTHD: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array]:
        """h (B, T, D) normed input; ve (B, T, D) or None; returns ((B, T, D) in h's dtype, #9's
        v_first: layer 0's raw value projection (B, T, H, Dh), computed here when None and the
        config has value_residual, else passed through).

        With `decode` (after `init_cache`), the T new keys and values are written into the
        cache at decode.positions and the queries attend to the whole cache instead.
        `lists`: the kernel backends' block lists for this window, shared between layers."""
        config = self.config
        batch, seq, dim = h_BTD.shape
        if config.value_residual and v_first_BTHD is None:  # layer 0: its own raw value is v_first
            v_first_BTHD = self.value_projection(h_BTD)
        q, k, v = self.project(h_BTD, ve_BTD, rotary, v_first_BTHD)
        if decode is not None:
            y = self._attend_cached(q, k, v, doc_ids_BT, window, decode)
        else:
            y = attention_lib.attention(
                q, k, v, doc_ids_BT, window.blocks, backend=attention_backend(config),
                scale=config.attention_scale, block_size=config.block_size, max_window_blocks=window.max_blocks,
                kernel_lists=lists, window_tokens=window.tokens,
            )
        return self.c_proj(y.reshape(batch, seq, dim)), v_first_BTHD

    def value_projection(self, h_BTD: jax.Array) -> jax.Array:
        """The raw value projection (B, T, H, Dh) in the matmul dtype (#9's v_first in layer 0):
        the same op as `project`'s value matmul in the separate layout, which XLA merges with it."""
        config = self.config
        batch, seq, dim = h_BTD.shape
        weight = self.qkv_w[...][2] if config.qkv_layout == "merged" else self.v_w[...]
        return linear(h_BTD.astype(compute_dtype(config)), weight).reshape(batch, seq, config.num_heads, config.head_dim)

    def project(
        self, h_BTD: jax.Array, ve_BTD: jax.Array | None, rotary: tuple[jax.Array, jax.Array],
        v_first_BTHD: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(q, k, v), each (B, T, H, Dh) in the matmul dtype: QKV matmul (one merged or three
        separate), value mixing (with the value embedding, or #9's value residual with
        v_first), QK-norm and rotary on q and k."""
        config = self.config
        batch, seq, dim = h_BTD.shape
        heads = config.num_heads
        h = h_BTD.astype(compute_dtype(config))  # autocast: bf16 copies of the fp32 stream
        if config.qkv_layout == "merged":
            qkv = linear(h, self.qkv_w[...].reshape(3 * dim, dim))
            qkv = qkv.reshape(batch, seq, 3 * heads, config.head_dim)
            q, k, v = qkv[:, :, :heads], qkv[:, :, heads:2 * heads], qkv[:, :, 2 * heads:]
        else:
            q, k, v = (linear(h, w[...]).reshape(batch, seq, heads, config.head_dim)
                       for w in (self.q_w, self.k_w, self.v_w))
        # Scalars are rounded to the activation dtype first, as torch does for a 0-dim tensor.
        if config.value_residual:
            # (1 - lamb) is formed in the scalar's dtype first, as the record's (1 - self.lamb).
            lamb = self.lamb[...]
            v_first = v if v_first_BTHD is None else v_first_BTHD
            v = (1 - lamb).astype(v.dtype) * v + lamb.astype(v.dtype) * v_first
        if config.attn_value_lambdas:
            lam = self.lambdas[...].astype(v.dtype)
            v = lam[0] * v
            if ve_BTD is not None:
                v = v + lam[1] * ve_BTD.astype(v.dtype).reshape(v.shape)
        q, k = norm(q, config.rms_norm_eps), norm(k, config.rms_norm_eps)
        in_fp32 = config.rotary == "half_truncated"
        return apply_rotary(q, *rotary, in_fp32=in_fp32), apply_rotary(k, *rotary, in_fp32=in_fp32), v

    def init_cache(self, batch: int, max_len: int, dtype: jnp.dtype) -> None:
        """Zeroed key and value caches, each (batch, max_len, H, Dh) in `dtype`."""
        shape = (batch, max_len, self.config.num_heads, self.config.head_dim)
        self.cache_k = nnx.Cache(jnp.zeros(shape, dtype))
        self.cache_v = nnx.Cache(jnp.zeros(shape, dtype))

    def _attend_cached(self, q, k, v, doc_ids_BC, window: AttentionWindow, decode: DecodeContext) -> jax.Array:
        start = decode.positions[0]
        for cache, new in ((self.cache_k, k), (self.cache_v, v)):
            cache.set_value(jax.lax.dynamic_update_slice_in_dim(cache.get_value(), new.astype(cache.get_value().dtype), start, axis=1))
        config = self.config
        return attention_lib.cached_attention(
            q, self.cache_k.get_value(), self.cache_v.get_value(), decode.positions, doc_ids_BC,
            decode.cache_doc_ids, window.blocks, scale=config.attention_scale, block_size=config.block_size,
            window_tokens=window.tokens,
        )


class MLP(nnx.Module):
    """c_fc (F, D) -> relu^2 -> c_proj (D, F), c_proj zero-initialised."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        self.c_fc = Linear(config.model_dim, config.hidden_dim, zero_init=False, rngs=rngs, config=config)
        self.c_proj = Linear(config.hidden_dim, config.model_dim, zero_init=True, rngs=rngs, config=config)

    def __call__(self, h_BTD: jax.Array) -> jax.Array:
        return self.c_proj(relu_squared(self.c_fc(h_BTD)))


class Block(nnx.Module):
    """x = l0 x + l1 x0 (block_lambdas); x += attn(norm(x)) (unless attention-free); x += mlp(norm(x))."""

    def __init__(self, config: ModelConfig, layer: int, *, rngs: nnx.Rngs):
        self.config = config
        self.attn = CausalSelfAttention(config, rngs=rngs) if config.has_attention(layer) else None
        self.mlp = MLP(config, rngs=rngs)
        if config.block_lambdas:
            self.lambdas = nnx.Param(jnp.array([1.0, 0.0], scalar_dtype(config)))

    def __call__(
        self, x_BTD: jax.Array, ve_BTD: jax.Array | None, x0_BTD: jax.Array, doc_ids_BT: jax.Array,
        window: WindowBlocks | AttentionWindow, rotary: tuple[jax.Array, jax.Array],
        decode: DecodeContext | None = None, lists: KernelBlockLists | None = None,
    ) -> jax.Array:
        """The block's output (B, T, D). `window`: an AttentionWindow, or W blocks (a block window)."""
        return self.run(x_BTD, ve_BTD, x0_BTD, doc_ids_BT, window, rotary, decode, lists)[0]

    def run(
        self, x_BTD: jax.Array, ve_BTD: jax.Array | None, x0_BTD: jax.Array, doc_ids_BT: jax.Array,
        window: WindowBlocks | AttentionWindow, rotary: tuple[jax.Array, jax.Array],
        decode: DecodeContext | None = None, lists: KernelBlockLists | None = None,
        v_first_BTHD: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array | None]:
        """(output (B, T, D), #9's v_first: layer 0's raw value projection once an attention layer
        made it (value_residual), else `v_first_BTHD` as given)."""
        config = self.config
        if not isinstance(window, AttentionWindow):
            window = AttentionWindow(window, None, config.max_window_blocks)
        x = x_BTD
        if config.block_lambdas:
            lam = self.lambdas[...].astype(x_BTD.dtype)
            x = lam[0] * x_BTD + lam[1] * x0_BTD
        if self.attn is not None:
            y, v_first_BTHD = self.attn(norm(x, config.rms_norm_eps), ve_BTD, doc_ids_BT, window, rotary, decode, lists,
                                        v_first_BTHD)
            x = x + y
        return x + self.mlp(norm(x, config.rms_norm_eps)), v_first_BTHD


def _block_runner(remat: str):
    """Returns run(block, x, ve, x0, doc_ids, window, rotary, decode, lists, v_first) -> Block.run's
    (output (B, T, D), v_first).

    "none" calls the block as is; "block" / "block_dots" call it under nnx.remat (nothing
    saved / matmul outputs saved), so the backward pass recomputes the block from its inputs.
    Decoding (no backward pass) always calls the block as is.
    """
    policy = jax.checkpoint_policies.dots_saveable if remat == "block_dots" else None

    def run(block: Block, x, ve, x0, doc_ids, window: AttentionWindow, rotary, decode=None, lists=None, v_first=None):
        if remat == "none" or decode is not None:
            return block.run(x, ve, x0, doc_ids, window, rotary, decode, lists, v_first)
        # The window is closed over, so a Python-int window stays static inside the remat.
        step = nnx.remat(lambda blk, x_, ve_, x0_, ids_, rot_, lists_, vf_: blk.run(x_, ve_, x0_, ids_, window, rot_, None,
                                                                                  lists_, vf_),
                         policy=policy)
        return step(block, x, ve, x0, doc_ids, rotary, lists, v_first)

    return run


def attention_backend(config: ModelConfig) -> str:
    """The backend the attention calls use: config.attention_backend, except that "auto" means
    "blocked" for #15's token window (the Pallas kernel applies block windows only)."""
    if config.attention_mask == "document_tokens" and config.attention_backend == "auto":
        return "blocked"
    return attention_lib.resolve_backend(config.attention_backend)


class GPT(nnx.Module):
    """The Sub3Min GPT and its lineage. Parameter paths are the record's state-dict keys (module docstring)."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        self.config = config
        # Construction order follows the record's (embed, value embeds, blocks, lm_head).
        self.embed = Embedding(config.embedding_rows, config.model_dim, dtype=stream_dtype(config), rngs=rngs)
        self.value_embeds = ValueEmbedding(config, rngs=rngs)
        self.blocks = nnx.List([Block(config, layer, rngs=rngs) for layer in range(config.num_layers)])
        if config.unet_skips:
            self.skip_weights = nnx.Param(jnp.ones((config.num_encoder_layers,), scalar_dtype(config)))
        self.lm_head = Linear(config.model_dim, config.padded_vocab_size, zero_init=True, rngs=rngs)

    def _check_inputs(self, input_ids: jax.Array) -> None:
        config = self.config
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, T), got shape {input_ids.shape}")
        if not jnp.issubdtype(input_ids.dtype, jnp.integer):
            raise ValueError(f"input_ids must be integers, got {input_ids.dtype}")
        seq = input_ids.shape[1]
        if seq == 0 or seq % config.block_size:
            raise ValueError(f"sequence length {seq} is not a positive multiple of {config.block_size}")
        if seq > config.rope_max_len:
            raise ValueError(f"sequence length {seq} exceeds rope_max_len {config.rope_max_len}")

    def _rotary_tables(self) -> tuple[np.ndarray, np.ndarray]:
        config = self.config
        return rotary_tables(config.head_dim, config.rope_max_len, config.rotary, config.as_written_roundings)

    def document_ids(self, input_ids: jax.Array) -> jax.Array:
        """(B, T) int32 document ids the attention separates: the EOT count, or zeros (one
        document) for attention_mask "causal" (#8/#9 attend across documents)."""
        if self.config.attention_mask == "causal":
            return jnp.zeros(input_ids.shape, jnp.int32)
        return masks.document_ids(input_ids, self.config.eot_id)

    def hidden(self, input_ids: jax.Array, window_blocks: WindowBlocks) -> jax.Array:
        """Final normed activations (B, T, D) in the policy's stream dtype. `window_blocks`: the
        step's window (W_long blocks; sw tokens for attention_mask "document_tokens"; ignored
        for "causal")."""
        self._check_inputs(input_ids)
        seq = input_ids.shape[1]
        cos, sin = self._rotary_tables()
        rotary = (jnp.asarray(cos[:seq]), jnp.asarray(sin[:seq]))
        return self._layers(input_ids, self.document_ids(input_ids), window_blocks, rotary)

    def _windows(self, window: WindowBlocks, seq_len: int) -> dict[str, AttentionWindow]:
        """The attention windows of a step by kind ("long", "short") from its window value."""
        config = self.config
        if config.attention_mask == "causal":  # every earlier key of the sequence: a window of all its blocks
            everything = AttentionWindow(-(-seq_len // config.block_size), None, -(-seq_len // config.block_size))
            return {"long": everything, "short": everything}
        if config.attention_mask == "document_tokens":  # tokens AND ceil(tokens / 128) blocks (LINEAGE.md 5.4)
            blocks = (window + config.block_size - 1) // config.block_size
            one = AttentionWindow(blocks, window, config.max_window_blocks)
            return {"long": one, "short": one}
        return {"long": AttentionWindow(window, None, config.max_window_blocks),
                "short": AttentionWindow(window // 2, None, config.max_window_blocks)}

    def _layers(
        self, input_ids: jax.Array, doc_ids: jax.Array, window: WindowBlocks,
        rotary: tuple[jax.Array, jax.Array], decode: DecodeContext | None = None,
    ) -> jax.Array:
        """Embeddings, the blocks (U-net when unet_skips) and the final norm: (B, T) ids -> (B, T, D)."""
        config = self.config
        windows = self._windows(window, input_ids.shape[1] if decode is None else config.rope_max_len)
        lists = None
        if attention_backend(config) in ("pallas", "mosaic") and decode is None:
            # The kernel's block lists, built once per step for each window and shared by its layers.
            lists = {kind: kernel_block_lists(doc_ids, w.blocks, max_window_blocks=w.max_blocks,
                                              block_size=config.block_size) for kind, w in windows.items()}

        x = x0 = norm(self.embed(input_ids), config.rms_norm_eps)
        value_embeds = self.value_embeds.lookup(input_ids, config.model_dim)
        skips = []
        v_first = None
        run_block = _block_runner(config.remat)
        for layer, block in enumerate(self.blocks):
            decoder_step = layer - config.num_encoder_layers
            if config.unet_skips and decoder_step >= 0:  # decoder layer j adds the (L/2 - 1 - j)th encoder output
                skip_w = self.skip_weights[...][decoder_step].astype(x.dtype)
                x = x + skip_w * skips.pop()
            slot = config.value_embed_slots[layer]
            ve = None if slot is None else value_embeds[slot]
            kind = "long" if config.uses_long_window(layer) else "short"
            # v_first: #9's layer-0 raw value projection, mixed into every later layer's value
            x, v_first = run_block(block, x, ve, x0, doc_ids, windows[kind], rotary, decode,
                                   None if lists is None else lists.get(kind), v_first)
            if config.unet_skips and decoder_step < 0:
                skips.append(x)
        return norm(x, config.rms_norm_eps)

    def logits(self, input_ids: jax.Array, window_blocks: WindowBlocks, *, train: bool = False) -> jax.Array:
        """(B, T, Vp) lm_head logits before the soft-cap: bf16 (bf16 policies) or fp32 (fp32 policy).

        train=True with config.fp8_head under a bf16 policy uses the FP8 head, otherwise the plain head.
        """
        return self._head(self.hidden(input_ids, window_blocks), train=train)

    def _uses_fp8(self, train: bool) -> bool:
        config = self.config
        return train and config.fp8_head and config.dtype_policy != "fp32"

    def _head(self, x_BTD: jax.Array, *, train: bool) -> jax.Array:
        batch, seq, dim = x_BTD.shape
        x_ND = x_BTD.reshape(batch * seq, dim).astype(compute_dtype(self.config))
        out = head_logits(x_ND, self.lm_head.weight[...], use_fp8=self._uses_fp8(train),
                          fp8_grad_scale=self.config.fp8_grad_scale)
        return out.reshape(batch, seq, -1)

    # -- incremental decoding (text sampling): the same layers over a key/value cache

    def init_decode_cache(self, batch: int, max_len: int) -> None:
        """Allocate zeroed caches for decoding up to `max_len` positions of `batch` sequences:
        keys and values of every attention layer and the document id of every position."""
        config = self.config
        if not 0 < max_len <= config.rope_max_len:
            raise ValueError(f"decode cache length {max_len} must be in 1..rope_max_len {config.rope_max_len}")
        self.cache_length = nnx.Cache(jnp.zeros((), jnp.int32))
        self.cache_doc_ids = nnx.Cache(jnp.zeros((batch, max_len), jnp.int32))
        for block in self.blocks:
            if block.attn is not None:
                block.attn.init_cache(batch, max_len, compute_dtype(config))

    def decode_logits(self, input_ids: jax.Array, window_blocks: WindowBlocks) -> jax.Array:
        """(B, C, Vp) eval-mode logits (before the soft-cap) of C tokens that continue the
        cached sequence, at positions cache_length .. cache_length + C - 1; writes them into
        the cache and advances it. Equal to `logits` of the whole sequence at those positions
        (tests/test_sample.py). The caller keeps cache_length + C <= the cache length (writes
        past it are clamped by XLA, not detected)."""
        batch, chunk = input_ids.shape
        max_len = self.cache_doc_ids.get_value().shape[1]
        start = self.cache_length.get_value()
        positions = start + jnp.arange(chunk, dtype=jnp.int32)
        # Document ids continue from the last cached position (0 before the first token).
        previous = jnp.where(start > 0, self.cache_doc_ids.get_value()[:, jnp.maximum(start - 1, 0)], 0)
        doc_ids = previous[:, None] + self.document_ids(input_ids)
        cache_doc_ids = jax.lax.dynamic_update_slice_in_dim(self.cache_doc_ids.get_value(), doc_ids, start, axis=1)
        cos, sin = self._rotary_tables()
        rotary = (jnp.asarray(cos[:max_len])[positions], jnp.asarray(sin[:max_len])[positions])
        x = self._layers(input_ids, doc_ids, window_blocks, rotary, DecodeContext(positions, cache_doc_ids))
        self.cache_doc_ids.set_value(cache_doc_ids)
        self.cache_length.set_value(start + chunk)
        return self._head(x, train=False)

    def __call__(
        self, input_ids: jax.Array, target_ids: jax.Array, window_blocks: WindowBlocks, *,
        train: bool = True,
    ) -> jax.Array:
        """Mean cross-entropy (fp32 scalar) of the soft-capped logits over all B*T tokens.

        input_ids, target_ids: (B, T) int; window_blocks: the step's window (see `hidden`).
        """
        if target_ids.shape != input_ids.shape:  # input_ids are checked by `hidden`
            raise ValueError(f"target_ids shape {target_ids.shape} != input_ids shape {input_ids.shape}")
        config = self.config
        x = self.hidden(input_ids, window_blocks)
        batch, seq, dim = x.shape
        return head_loss(
            x.reshape(batch * seq, dim).astype(compute_dtype(config)), self.lm_head.weight[...], target_ids.reshape(-1),
            use_fp8=self._uses_fp8(train), cap=config.logit_cap,
            temperature=config.logit_cap_temperature, chunk_tokens=config.loss_chunk_tokens,
            fp8_grad_scale=config.fp8_grad_scale, cap_kind=config.soft_cap, cap_rounding=config.soft_cap_rounding,
        )


# ---------------------------------------------------------------------------------------------
# Parameters by record name


@dataclass(frozen=True)
class ModelGraph:
    """The NNX graph of a GPT and where each record-named parameter sits in it, so that a flat
    {record name: array} dict can be the pytree a compiled step takes and donates."""

    graphdef: Any
    paths: dict[str, tuple]  # record name -> NNX state path

    @classmethod
    def split(cls, model: nnx.Module) -> tuple[ModelGraph, dict[str, jax.Array]]:
        """(graph, params by record name) of `model` (an nnx.eval_shape model gives shapes)."""
        graphdef, state = nnx.split(model)
        paths = {path_to_name(path): path for path, _ in nnx.to_flat_state(state)}
        return cls(graphdef, paths), param_dict(model)

    def bind(self, params: dict[str, Any]) -> GPT:
        """A GPT module over `params` (usable inside jit: no copies, no checks)."""
        state = nnx.from_flat_state({self.paths[name]: value for name, value in params.items()})
        return nnx.merge(self.graphdef, state)


def path_to_name(path: tuple) -> str:
    """NNX state path (e.g. ('blocks', 3, 'attn', 'qkv_w')) -> record key 'blocks.3.attn.qkv_w'."""
    return ".".join(str(part) for part in path)


def param_dict(model: nnx.Module) -> dict[str, jax.Array]:
    """All nnx.Param values keyed by record name, in the model's dtypes."""
    flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
    return {path_to_name(path): variable.get_value() for path, variable in flat}


def param_shapes(config: ModelConfig) -> dict[str, jax.ShapeDtypeStruct]:
    """Name -> shape/dtype of every parameter of GPT(config), without allocating anything."""
    abstract = nnx.eval_shape(lambda: GPT(config, rngs=nnx.Rngs(0)))
    return {name: jax.ShapeDtypeStruct(value.shape, value.dtype) for name, value in param_dict(abstract).items()}


def param_shape_problems(params: Mapping[str, Any], expected: Mapping[str, Sequence[int]]) -> list[str]:
    """Every way `params` ({name: array-like}) differs from `expected` ({name: shape}): missing
    names, unknown names and mis-shaped arrays, as readable fragments. Empty when they fit."""
    shapes = {name: tuple(np.shape(value if hasattr(value, "shape") else np.asarray(value))) for name, value in params.items()}
    missing = sorted(set(expected) - set(shapes))
    unknown = sorted(set(shapes) - set(expected))
    misshaped = sorted(
        f"{name}: got {shapes[name]}, expected {tuple(expected[name])}"
        for name in set(expected) & set(shapes) if shapes[name] != tuple(expected[name])
    )
    if not (missing or unknown or misshaped):
        return []
    return [f"missing {missing}", f"unknown {unknown}", f"mis-shaped {misshaped}"]


def check_param_shapes(params: Mapping[str, Any], expected: Mapping[str, Sequence[int]], what: str) -> None:
    """Raise ValueError listing every missing, unknown and mis-shaped name (see param_shape_problems)."""
    problems = param_shape_problems(params, expected)
    if problems:
        raise ValueError(f"parameters do not match {what}: " + "; ".join(problems))


def load_param_dict(model: nnx.Module, params: dict[str, jax.Array | np.ndarray]) -> None:
    """Set every parameter of `model` from `params` (record names), cast to the model's dtypes.

    Raises ValueError listing all missing, unknown and mis-shaped names.
    """
    state = nnx.state(model, nnx.Param)
    flat = nnx.to_flat_state(state)
    expected = {path_to_name(path): variable for path, variable in flat}
    check_param_shapes(params, {name: variable.get_value().shape for name, variable in expected.items()}, "the model")
    for name, variable in expected.items():
        variable.set_value(jnp.asarray(params[name]).astype(variable.get_value().dtype))
    nnx.update(model, nnx.from_flat_state(flat))
