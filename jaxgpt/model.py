"""The record's GPT in Flax NNX (RECORD.md section 2).

Parameter paths joined with "." are the record's state-dict keys (`embed.weight`,
`blocks.3.attn.qkv_w`, ...) and every matrix keeps the record's (out, in) layout, so a torch
checkpoint converts by renaming and casting only (see `jaxgpt.convert`).

Dtype policies (ModelConfig.dtype_policy):
  "record": embedding tables stored bf16, linear weights fp32 and cast to bf16 at use,
            activations bf16; rotary, RMSNorm, softmax, soft-cap and CE in fp32; FP8 head
            when train=True, plain bf16 head otherwise.
  "fp32":   everything fp32, plain fp32 head (parity tests).

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


# ---------------------------------------------------------------------------------------------
# Pure functions


def compute_dtype(config: ModelConfig) -> jnp.dtype:
    """Activation dtype of a policy: bf16 for "record", fp32 for "fp32"."""
    return jnp.bfloat16 if config.dtype_policy == "record" else jnp.float32


def norm(x: jax.Array) -> jax.Array:
    """x / sqrt(mean(x^2, -1) + 2^-23), computed in fp32 and cast back to x.dtype; no scale."""
    x32 = x.astype(jnp.float32)
    inv_rms = jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + RMS_EPS)
    return (x32 * inv_rms).astype(x.dtype)


@functools.lru_cache(maxsize=8)
def rotary_tables(head_dim: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin), each (max_len, head_dim // 2) float32 numpy, built once per shape.

    Frequencies: (1/1024) ** linspace(0, 1, head_dim // 4) in fp32, then head_dim // 4 zeros
    (those dims pass through unrotated); angle t * freq in fp32 for t = 0..max_len-1.
    """
    if head_dim % 4:
        raise ValueError(f"rotary needs head_dim divisible by 4, got {head_dim}")
    quarter = head_dim // 4
    exponents = np.linspace(0.0, 1.0, quarter, dtype=np.float32)
    freq = np.power(np.float32(1.0 / 1024.0), exponents, dtype=np.float32)
    freq = np.concatenate([freq, np.zeros(quarter, np.float32)])
    theta = np.arange(max_len, dtype=np.float32)[:, None] * freq[None, :]
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    cos.flags.writeable = False  # shared through the cache
    sin.flags.writeable = False
    return cos, sin


def apply_rotary(x_BTHD: jax.Array, cos_TR: jax.Array, sin_TR: jax.Array) -> jax.Array:
    """The record's half-split rotary: y1 = x1 c + x2 s, y2 = -x1 s + x2 c, in fp32.

    x_BTHD: (B, T, H, Dh) any float dtype; cos_TR, sin_TR: (T, Dh // 2) fp32.
    Returns (B, T, H, Dh) in x's dtype.
    """
    x32 = x_BTHD.astype(jnp.float32)
    half = x32.shape[-1] // 2
    x1, x2 = x32[..., :half], x32[..., half:]
    cos, sin = cos_TR[None, :, None, :], sin_TR[None, :, None, :]
    y1 = x1 * cos + x2 * sin
    y2 = x2 * cos - x1 * sin
    return jnp.concatenate([y1, y2], axis=-1).astype(x_BTHD.dtype)


def relu_squared(x: jax.Array) -> jax.Array:
    return jnp.square(jax.nn.relu(x))


def soft_cap(logits: jax.Array, cap: float, temperature: float) -> jax.Array:
    """cap * sigmoid(z / temperature) in fp32 (= the record's 15 tanh(z/15) + 15 for 30, 7.5)."""
    return cap * jax.nn.sigmoid(logits.astype(jnp.float32) / temperature)


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


def capped_cross_entropy(logits_NV: jax.Array, targets_N: jax.Array, *, cap: float, temperature: float) -> jax.Array:
    """Sum over N tokens of CE(soft_cap(logits), target) over all Vp classes; fp32 scalar.

    Written so that XLA:GPU reads the (N, Vp) logits in two passes and writes no fp32 (N, Vp)
    buffer (the compile-only H100 plan before this wrote the capped logits once and read them
    twice):
    - log-sum-exp shifted by the cap, not the row max: soft_cap bounds the capped logits to
      (0, cap), so exp(capped - cap) stays in fp32's normal range with no max pass (the same
      math; the fp32 sum rounds differently, at the ulp level);
    - the target logit is picked from the fp32 logits by a one-hot select, then capped: a
      gather's transpose would be a scatter into a zeroed (N, Vp) buffer, while the select's
      fuses into the softmax gradient;
    - under jax.checkpoint, keeping only the two (N,) sums, the backward recomputes the capped
      logits from the logits inside its own fusion instead of sharing a stored copy.
    The gradient is summed in fp32 and rounded to the logits' dtype once, as the record's is.
    """
    if not 0 < cap <= 40:  # exp(-cap) must stay a normal fp32 number for the cap shift
        raise ValueError(f"soft-cap {cap} outside (0, 40]: the cross-entropy shifts by it")
    return _capped_cross_entropy(logits_NV, targets_N, cap, temperature)


@functools.partial(jax.checkpoint, static_argnums=(2, 3),
                   policy=jax.checkpoint_policies.save_only_these_names("softmax_denominator", "target_logit"))
def _capped_cross_entropy(logits_NV: jax.Array, targets_N: jax.Array, cap: float, temperature: float) -> jax.Array:
    logits_f32 = logits_NV.astype(jnp.float32)  # one convert: both gradient paths meet in fp32
    is_target = jnp.arange(logits_NV.shape[-1]) == targets_N[:, None]
    picked = checkpoint_name(jnp.where(is_target, logits_f32, 0.0).sum(axis=-1), "target_logit")
    sum_exp = checkpoint_name(jnp.exp(soft_cap(logits_f32, cap, temperature) - cap).sum(axis=-1),
                              "softmax_denominator")
    return (cap + jnp.log(sum_exp) - soft_cap(picked, cap, temperature)).sum()


def head_loss(
    x_ND: jax.Array, w_VD: jax.Array, targets_N: jax.Array, *, use_fp8: bool, cap: float,
    temperature: float, chunk_tokens: int | None = None, fp8_grad_scale: float = RECORD_FP8_GRAD_SCALE,
) -> jax.Array:
    """Mean soft-capped CE over N tokens, fp32 scalar; optionally `chunk_tokens` at a time.

    The FP8 head goes through `fp8.fp8_head_loss`, whose forward computes the logits' gradient
    while it has them, chunk by chunk. The plain head is differentiated by autodiff; its chunks
    run in `fp8.map_token_chunks`' lax.scan under jax.checkpoint. Either way no more than (chunk_tokens, Vp) fp32
    logits exist at once, and the mean is the same sum divided by N.
    """
    loss_of_logits = functools.partial(capped_cross_entropy, cap=cap, temperature=temperature)
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


def _uniform_init(key: jax.Array, shape: tuple[int, ...], fan_in: int) -> jax.Array:
    # The record's linear init: U(-b, b), b = sqrt(3) * 0.5 / sqrt(fan_in).
    bound = math.sqrt(3.0) * 0.5 / math.sqrt(fan_in)
    return jax.random.uniform(key, shape, jnp.float32, -bound, bound)


class Linear(nnx.Module):
    """Bias-free linear layer; `weight` (out, in) fp32, cast to the input dtype at use."""

    def __init__(self, in_features: int, out_features: int, *, zero_init: bool, rngs: nnx.Rngs):
        shape = (out_features, in_features)
        value = (jnp.zeros(shape, jnp.float32) if zero_init
                 else _uniform_init(rngs.params(), shape, in_features))
        self.weight = nnx.Param(value)

    def __call__(self, x: jax.Array) -> jax.Array:
        return linear(x, self.weight[...])


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
    """The record's `value_embeds.embed.{k}` tables."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        dtype = compute_dtype(config)
        self.embed = nnx.List([
            Embedding(config.vocab_size, config.model_dim, dtype=dtype, rngs=rngs)
            for _ in range(config.num_value_embeds)
        ])


SEPARATE_QKV_NAMES = ("q_w", "k_w", "v_w")  # qkv_layout "separate": the slices of qkv_w, in order


class CausalSelfAttention(nnx.Module):
    """QKV attention: lambdas (2,), c_proj (D, D) and, by config.qkv_layout, either the record's
    merged qkv_w (3, D, D) as (q|k|v, out, in) or q_w, k_w, v_w, each (D, D) (out, in), whose
    stack is qkv_w (both layouts draw the same numbers from the same key)."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        dim = config.model_dim
        self.config = config
        qkv_w = _uniform_init(rngs.params(), (3, dim, dim), dim)
        if config.qkv_layout == "merged":
            self.qkv_w = nnx.Param(qkv_w)
        else:
            self.q_w, self.k_w, self.v_w = (nnx.Param(w) for w in qkv_w)
        self.lambdas = nnx.Param(jnp.array([0.5, 0.5], jnp.float32))
        self.c_proj = Linear(dim, dim, zero_init=True, rngs=rngs)

    def __call__(
        self, h_BTD: jax.Array, ve_BTD: jax.Array | None, doc_ids_BT: jax.Array,
        window_blocks: WindowBlocks, rotary: tuple[jax.Array, jax.Array],
        decode: DecodeContext | None = None, lists: KernelBlockLists | None = None,
    ) -> jax.Array:
        """h (B, T, D) normed input; ve (B, T, D) or None; returns (B, T, D) in h's dtype.

        With `decode` (after `init_cache`), the T new keys and values are written into the
        cache at decode.positions and the queries attend to the whole cache instead.
        `lists`: the kernel backends' block lists for this window, shared between layers."""
        cfg = self.config
        batch, seq, dim = h_BTD.shape
        q, k, v = self.project(h_BTD, ve_BTD, rotary)
        if decode is not None:
            y = self._attend_cached(q, k, v, doc_ids_BT, window_blocks, decode)
        else:
            y = attention_lib.attention(
                q, k, v, doc_ids_BT, window_blocks, backend=cfg.attention_backend,
                scale=cfg.attn_scale, block_size=cfg.block_size, max_window_blocks=cfg.max_window_blocks,
                kernel_lists=lists,
            )
        return self.c_proj(y.reshape(batch, seq, dim))

    def project(
        self, h_BTD: jax.Array, ve_BTD: jax.Array | None, rotary: tuple[jax.Array, jax.Array]
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(q, k, v), each (B, T, H, Dh) in h's dtype: QKV matmul (one merged or three
        separate), value mixing with the value embedding, QK-norm and rotary on q and k."""
        cfg = self.config
        batch, seq, dim = h_BTD.shape
        heads = cfg.num_heads
        if cfg.qkv_layout == "merged":
            qkv = linear(h_BTD, self.qkv_w[...].reshape(3 * dim, dim))
            qkv = qkv.reshape(batch, seq, 3 * heads, cfg.head_dim)
            q, k, v = qkv[:, :, :heads], qkv[:, :, heads:2 * heads], qkv[:, :, 2 * heads:]
        else:
            q, k, v = (linear(h_BTD, w[...]).reshape(batch, seq, heads, cfg.head_dim)
                       for w in (self.q_w, self.k_w, self.v_w))
        # Scalars are rounded to the activation dtype first, as torch does for a 0-dim tensor.
        lam = self.lambdas[...].astype(h_BTD.dtype)
        v = lam[0] * v
        if ve_BTD is not None:
            v = v + lam[1] * ve_BTD.reshape(v.shape)
        q, k = norm(q), norm(k)
        return apply_rotary(q, *rotary), apply_rotary(k, *rotary), v

    def init_cache(self, batch: int, max_len: int, dtype: jnp.dtype) -> None:
        """Zeroed key and value caches, each (batch, max_len, H, Dh) in `dtype`."""
        shape = (batch, max_len, self.config.num_heads, self.config.head_dim)
        self.cache_k = nnx.Cache(jnp.zeros(shape, dtype))
        self.cache_v = nnx.Cache(jnp.zeros(shape, dtype))

    def _attend_cached(self, q, k, v, doc_ids_BC, window_blocks, decode: DecodeContext) -> jax.Array:
        start = decode.positions[0]
        for cache, new in ((self.cache_k, k), (self.cache_v, v)):
            cache.set_value(jax.lax.dynamic_update_slice_in_dim(cache.get_value(), new.astype(cache.get_value().dtype), start, axis=1))
        cfg = self.config
        return attention_lib.cached_attention(
            q, self.cache_k.get_value(), self.cache_v.get_value(), decode.positions, doc_ids_BC,
            decode.cache_doc_ids, window_blocks, scale=cfg.attn_scale, block_size=cfg.block_size,
        )


class MLP(nnx.Module):
    """c_fc (F, D) -> relu^2 -> c_proj (D, F), c_proj zero-initialised."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        self.c_fc = Linear(config.model_dim, config.hidden_dim, zero_init=False, rngs=rngs)
        self.c_proj = Linear(config.hidden_dim, config.model_dim, zero_init=True, rngs=rngs)

    def __call__(self, h_BTD: jax.Array) -> jax.Array:
        return self.c_proj(relu_squared(self.c_fc(h_BTD)))


class Block(nnx.Module):
    """x = l0 x + l1 x0; x += attn(norm(x)) (unless attention-free); x += mlp(norm(x))."""

    def __init__(self, config: ModelConfig, layer: int, *, rngs: nnx.Rngs):
        self.attn = CausalSelfAttention(config, rngs=rngs) if config.has_attention(layer) else None
        self.mlp = MLP(config, rngs=rngs)
        self.lambdas = nnx.Param(jnp.array([1.0, 0.0], jnp.float32))

    def __call__(
        self, x_BTD: jax.Array, ve_BTD: jax.Array | None, x0_BTD: jax.Array, doc_ids_BT: jax.Array,
        window_blocks: WindowBlocks, rotary: tuple[jax.Array, jax.Array],
        decode: DecodeContext | None = None, lists: KernelBlockLists | None = None,
    ) -> jax.Array:
        lam = self.lambdas[...].astype(x_BTD.dtype)
        x = lam[0] * x_BTD + lam[1] * x0_BTD
        if self.attn is not None:
            x = x + self.attn(norm(x), ve_BTD, doc_ids_BT, window_blocks, rotary, decode, lists)
        return x + self.mlp(norm(x))


def _block_runner(remat: str):
    """Returns run(block, x, ve, x0, doc_ids, window, rotary, decode, lists) -> block output (B, T, D).

    "none" calls the block as is; "block" / "block_dots" call it under nnx.remat (nothing
    saved / matmul outputs saved), so the backward pass recomputes the block from its inputs.
    Decoding (no backward pass) always calls the block as is.
    """
    policy = jax.checkpoint_policies.dots_saveable if remat == "block_dots" else None

    def run(block: Block, x, ve, x0, doc_ids, window: WindowBlocks, rotary, decode=None, lists=None):
        if remat == "none" or decode is not None:
            return block(x, ve, x0, doc_ids, window, rotary, decode, lists)
        # The window is closed over, so a Python-int window stays static inside the remat.
        step = nnx.remat(lambda blk, x_, ve_, x0_, ids_, rot_, lists_: blk(x_, ve_, x0_, ids_, window, rot_, None, lists_),
                         policy=policy)
        return step(block, x, ve, x0, doc_ids, rotary, lists)

    return run


class GPT(nnx.Module):
    """The Sub3Min GPT. Parameter paths are the record's state-dict keys (module docstring)."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        self.config = config
        dtype = compute_dtype(config)
        # Construction order follows the record's (embed, value embeds, blocks, lm_head).
        self.embed = Embedding(config.vocab_size, config.model_dim, dtype=dtype, rngs=rngs)
        self.value_embeds = ValueEmbedding(config, rngs=rngs)
        self.blocks = nnx.List([Block(config, layer, rngs=rngs) for layer in range(config.num_layers)])
        self.skip_weights = nnx.Param(jnp.ones((config.num_encoder_layers,), jnp.float32))
        self.lm_head = Linear(config.model_dim, config.padded_vocab_size, zero_init=True, rngs=rngs)

    def _check_inputs(self, input_ids: jax.Array) -> None:
        cfg = self.config
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, T), got shape {input_ids.shape}")
        if not jnp.issubdtype(input_ids.dtype, jnp.integer):
            raise ValueError(f"input_ids must be integers, got {input_ids.dtype}")
        seq = input_ids.shape[1]
        if seq == 0 or seq % cfg.block_size:
            raise ValueError(f"sequence length {seq} is not a positive multiple of {cfg.block_size}")
        if seq > cfg.rope_max_len:
            raise ValueError(f"sequence length {seq} exceeds rope_max_len {cfg.rope_max_len}")

    def hidden(self, input_ids: jax.Array, window_blocks: WindowBlocks) -> jax.Array:
        """Final normed activations (B, T, D) in the policy's activation dtype."""
        self._check_inputs(input_ids)
        cfg = self.config
        seq = input_ids.shape[1]
        cos, sin = rotary_tables(cfg.head_dim, cfg.rope_max_len)
        rotary = (jnp.asarray(cos[:seq]), jnp.asarray(sin[:seq]))
        doc_ids = masks.document_ids(input_ids, cfg.eot_id)
        return self._layers(input_ids, doc_ids, window_blocks, rotary)

    def _layers(
        self, input_ids: jax.Array, doc_ids: jax.Array, window_blocks: WindowBlocks,
        rotary: tuple[jax.Array, jax.Array], decode: DecodeContext | None = None,
    ) -> jax.Array:
        """Embeddings, the U-net of blocks and the final norm: (B, T) ids -> (B, T, D)."""
        cfg = self.config
        long_window = window_blocks
        short_window = window_blocks // 2
        lists = None
        if attention_lib.resolve_backend(cfg.attention_backend) in ("pallas", "mosaic") and decode is None:
            # The kernel's block lists, built once per step for each window and shared by its layers.
            build = functools.partial(kernel_block_lists, doc_ids, max_window_blocks=cfg.max_window_blocks,
                                      block_size=cfg.block_size)
            lists = {"long": build(long_window), "short": build(short_window)}

        x = x0 = norm(self.embed(input_ids))
        tables = [table(input_ids) for table in self.value_embeds.embed]
        skips = []
        run_block = _block_runner(cfg.remat)
        for layer, block in enumerate(self.blocks):
            decoder_step = layer - cfg.num_encoder_layers
            if decoder_step >= 0:  # U-net: decoder layer j adds the (L/2 - 1 - j)th encoder output
                skip_w = self.skip_weights[...][decoder_step].astype(x.dtype)
                x = x + skip_w * skips.pop()
            slot = cfg.value_embed_slots[layer]
            ve = None if slot is None else tables[slot]
            kind = "long" if cfg.uses_long_window(layer) else "short"
            window = long_window if kind == "long" else short_window
            x = run_block(block, x, ve, x0, doc_ids, window, rotary, decode, None if lists is None else lists.get(kind))
            if decoder_step < 0:
                skips.append(x)
        return norm(x)

    def logits(self, input_ids: jax.Array, window_blocks: WindowBlocks, *, train: bool = False) -> jax.Array:
        """(B, T, Vp) lm_head logits before the soft-cap: bf16 (record) or fp32 (fp32 policy).

        train=True under the record policy uses the FP8 head, otherwise the plain head.
        """
        return self._head(self.hidden(input_ids, window_blocks), train=train)

    def _head(self, x_BTD: jax.Array, *, train: bool) -> jax.Array:
        batch, seq, dim = x_BTD.shape
        use_fp8 = train and self.config.dtype_policy == "record"
        out = head_logits(x_BTD.reshape(batch * seq, dim), self.lm_head.weight[...], use_fp8=use_fp8,
                          fp8_grad_scale=self.config.fp8_grad_scale)
        return out.reshape(batch, seq, -1)

    # -- incremental decoding (text sampling): the same layers over a key/value cache

    def init_decode_cache(self, batch: int, max_len: int) -> None:
        """Allocate zeroed caches for decoding up to `max_len` positions of `batch` sequences:
        keys and values of every attention layer and the document id of every position."""
        cfg = self.config
        if not 0 < max_len <= cfg.rope_max_len:
            raise ValueError(f"decode cache length {max_len} must be in 1..rope_max_len {cfg.rope_max_len}")
        self.cache_length = nnx.Cache(jnp.zeros((), jnp.int32))
        self.cache_doc_ids = nnx.Cache(jnp.zeros((batch, max_len), jnp.int32))
        for block in self.blocks:
            if block.attn is not None:
                block.attn.init_cache(batch, max_len, compute_dtype(cfg))

    def decode_logits(self, input_ids: jax.Array, window_blocks: WindowBlocks) -> jax.Array:
        """(B, C, Vp) eval-mode logits (before the soft-cap) of C tokens that continue the
        cached sequence, at positions cache_length .. cache_length + C - 1; writes them into
        the cache and advances it. Equal to `logits` of the whole sequence at those positions
        (tests/test_sample.py). The caller keeps cache_length + C <= the cache length (writes
        past it are clamped by XLA, not detected)."""
        cfg = self.config
        batch, chunk = input_ids.shape
        max_len = self.cache_doc_ids.get_value().shape[1]
        start = self.cache_length.get_value()
        positions = start + jnp.arange(chunk, dtype=jnp.int32)
        # Document ids continue from the last cached position (0 before the first token).
        previous = jnp.where(start > 0, self.cache_doc_ids.get_value()[:, jnp.maximum(start - 1, 0)], 0)
        doc_ids = previous[:, None] + masks.document_ids(input_ids, cfg.eot_id)
        cache_doc_ids = jax.lax.dynamic_update_slice_in_dim(self.cache_doc_ids.get_value(), doc_ids, start, axis=1)
        cos, sin = rotary_tables(cfg.head_dim, cfg.rope_max_len)
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

        input_ids, target_ids: (B, T) int; window_blocks: W_long (W_short = W_long // 2).
        """
        if target_ids.shape != input_ids.shape:  # input_ids are checked by `hidden`
            raise ValueError(f"target_ids shape {target_ids.shape} != input_ids shape {input_ids.shape}")
        cfg = self.config
        x = self.hidden(input_ids, window_blocks)
        batch, seq, dim = x.shape
        return head_loss(
            x.reshape(batch * seq, dim), self.lm_head.weight[...], target_ids.reshape(-1),
            use_fp8=train and cfg.dtype_policy == "record", cap=cfg.logit_cap,
            temperature=cfg.logit_cap_temperature, chunk_tokens=cfg.loss_chunk_tokens,
            fp8_grad_scale=cfg.fp8_grad_scale,
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
