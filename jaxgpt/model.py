"""The record's GPT in Flax NNX (RECORD.md section 2): the modules and the forward pass.

Parameter paths joined with "." are the record's state-dict keys (`embed.weight`,
`blocks.3.attn.qkv_w`, ...) and every matrix keeps the record's (out, in) layout, so a torch
checkpoint converts by renaming and casting only (see `jaxgpt.run.convert`). The pieces it is
built from: jaxgpt.layers (dtypes, RMSNorm, linear, embeddings), jaxgpt.rotary, jaxgpt.attention,
jaxgpt.loss (head, soft-cap, cross-entropy); its parameters as a flat dict: jaxgpt.params; its
incremental decoding: jaxgpt.decode.

Dtype policies (ModelConfig.dtype_policy):
  "record":     embedding tables stored bf16, linear weights fp32 and cast to bf16 at use,
                activations bf16; rotary, RMSNorm, softmax, soft-cap and CE in fp32; FP8 head
                when train=True and the lineage's FP8 head is on, plain bf16 head otherwise.
  "fp32":       everything fp32, plain fp32 head (parity tests).
  "bf16_model": as "record", plus bf16 scalars and bf16-rounded initial linear weights (#15).
  "autocast":   fp32 parameters and residual stream, bf16 matmul inputs and outputs (#8/#9).

The lineage (#8-#18) enters as one `lineage.ModelVariants` (jaxgpt/lineage/), resolved once from the config
when a module is built (`lineage.model_variants`) and handed down: plain functions and values for
a step's windows, document ids, value mixing, block input, U-net skips, norm eps, init, rotary
and soft-cap. The variants with parameters create them under this module's names in every case
(jaxgpt.run.convert maps each record's own state-dict names); this module reads no switch.

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

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxgpt import attention as attention_lib
from jaxgpt import lineage
from jaxgpt.attention import AttentionWindow
from jaxgpt.config import ModelConfig
from jaxgpt.kernels.block_lists import KernelBlockLists, kernel_block_lists
from jaxgpt.layers import (
    Embedding,
    Linear,
    compute_dtype,
    linear,
    norm,
    relu_squared,
    scalar_dtype,
    scale_by_scalar,
    stream_dtype,
    uniform_init,
)
from jaxgpt.loss import head_logits, head_loss
from jaxgpt.masks import WindowBlocks
from jaxgpt.rotary import apply_rotary

SEPARATE_QKV_NAMES = ("q_w", "k_w", "v_w")  # qkv_layout "separate": the slices of qkv_w, in order
# An attention call: (attention module, q, k, v (B, T, H, Dh), doc ids (B, T), window, kernel
# lists) -> (B, T, H, Dh). None in a forward: the configured backend over the step's tokens;
# jaxgpt.decode passes its cached attention.
Attend = Callable[[Any, jax.Array, jax.Array, jax.Array, jax.Array, AttentionWindow, Any], jax.Array]


class ValueEmbedding(nnx.Module):
    """The record's `value_embeds.embed.{k}` tables: k tables (V, D) ("tables"), or one (V, k D)
    table whose D-wide chunks are the value embeddings ("chunks", #15's `vte`)."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, variants: lineage.ModelVariants | None = None):
        count, width = config.value_embed_tables
        self.chunks = (variants or lineage.model_variants(config)).value_embed_chunks
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


class CausalSelfAttention(nnx.Module):
    """QKV attention: c_proj (D, D), the QKV weights by config.qkv_layout (the record's merged
    qkv_w (3, D, D) as (q|k|v, out, in), or q_w, k_w, v_w, each (D, D) (out, in), whose stack
    is qkv_w: both layouts draw the same numbers from the same key), and the value mixing's
    scalars (its variant's `init_params`): the record's `lambdas` (2,), #9's `lamb` (), or none.
    `variants`: the model's (None: resolved from `config`)."""

    cache_k: nnx.Cache  # the key and value caches, (B, S, H, Dh), while decoding (jaxgpt.decode.init_cache)
    cache_v: nnx.Cache

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, variants: lineage.ModelVariants | None = None):
        dim = config.model_dim
        self.config = config
        self.variants = variants = variants or lineage.model_variants(config)
        qkv_w = uniform_init(rngs.params(), (3, dim, dim), dim, config, variants.init_kind)
        if config.qkv_layout == "merged":
            self.qkv_w = nnx.Param(qkv_w)
        else:
            self.q_w, self.k_w, self.v_w = (nnx.Param(w) for w in qkv_w)
        variants.value_mixing.init_params(self, scalar_dtype(config))
        self.c_proj = Linear(dim, dim, zero_init=True, rngs=rngs, config=config, init_kind=variants.init_kind)

    def __call__(
        self, h_BTD: jax.Array, ve_BTD: jax.Array | None, doc_ids_BT: jax.Array,
        window: AttentionWindow, rotary: tuple[jax.Array, jax.Array],
        attend: Attend | None = None, lists: KernelBlockLists | None = None,
        v_first_BTHD: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array | None]:
        """h (B, T, D) normed input; ve (B, T, D) or None; returns ((B, T, D) in h's dtype, #9's
        v_first: layer 0's raw value projection (B, T, H, Dh) once made, else as given).
        `lists`: the kernel backends' block lists for this window, shared between layers."""
        batch, seq, dim = h_BTD.shape
        v_first_BTHD = self.variants.value_mixing.first_value(self, h_BTD, v_first_BTHD)
        q, k, v = self.project(h_BTD, ve_BTD, rotary, v_first_BTHD)
        y = (attend or attend_tokens)(self, q, k, v, doc_ids_BT, window, lists)
        return self.c_proj(y.reshape(batch, seq, dim)), v_first_BTHD

    def value_projection(self, h_BTD: jax.Array) -> jax.Array:
        """The raw value projection (B, T, H, Dh) in the matmul dtype (#9's v_first in layer 0):
        the same op as `project`'s value matmul in the separate layout, which XLA merges with it."""
        config = self.config
        batch, seq, _ = h_BTD.shape
        weight = self.qkv_w[...][2] if config.qkv_layout == "merged" else self.v_w[...]
        return linear(h_BTD.astype(compute_dtype(config)), weight).reshape(batch, seq, config.num_heads, config.head_dim)

    def project(
        self, h_BTD: jax.Array, ve_BTD: jax.Array | None, rotary: tuple[jax.Array, jax.Array],
        v_first_BTHD: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(q, k, v), each (B, T, H, Dh) in the matmul dtype: the QKV matmul (one merged or three
        separate), the value mixing (the lineage's), QK-norm and rotary on q and k."""
        config, variants = self.config, self.variants
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
        v = variants.value_mixing.mix(self, v, ve_BTD, v_first_BTHD)
        q, k = norm(q, variants.norm_eps), norm(k, variants.norm_eps)
        # the record's half-truncated rotary rotates in fp32; #8-#15's full rotary in q's dtype
        q, k = (apply_rotary(x, *rotary, in_fp32=variants.rotary.in_fp32) for x in (q, k))
        return q, k, v


def attend_tokens(attn: CausalSelfAttention, q: jax.Array, k: jax.Array, v: jax.Array, doc_ids_BT: jax.Array,
                  window: AttentionWindow, lists: KernelBlockLists | None) -> jax.Array:
    """The forward's attention (an `Attend`): the step's queries over its own keys, with the
    configured backend."""
    config = attn.config
    return attention_lib.attention(
        q, k, v, doc_ids_BT, window.blocks, backend=attn.variants.backend(config.attention_backend),
        scale=config.attention_scale,
        block_size=config.block_size, max_window_blocks=window.max_blocks, kernel_lists=lists,
        window_tokens=window.tokens,
    )


class MLP(nnx.Module):
    """c_fc (F, D) -> relu^2 -> c_proj (D, F), c_proj zero-initialised."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, variants: lineage.ModelVariants | None = None):
        init_kind = (variants or lineage.model_variants(config)).init_kind
        self.c_fc = Linear(config.model_dim, config.hidden_dim, zero_init=False, rngs=rngs, config=config,
                           init_kind=init_kind)
        self.c_proj = Linear(config.hidden_dim, config.model_dim, zero_init=True, rngs=rngs, config=config,
                             init_kind=init_kind)

    def __call__(self, h_BTD: jax.Array) -> jax.Array:
        return self.c_proj(relu_squared(self.c_fc(h_BTD)))


class Block(nnx.Module):
    """x = l0 x + l1 x0 (the record's block input, the lineage's variant); x += attn(norm(x))
    (unless the layer is attention-free); x += mlp(norm(x)). `variants`: the model's (None:
    resolved from `config`)."""

    def __init__(self, config: ModelConfig, layer: int, *, rngs: nnx.Rngs,
                 variants: lineage.ModelVariants | None = None):
        self.config = config
        self.variants = variants = variants or lineage.model_variants(config)
        self.attn = CausalSelfAttention(config, rngs=rngs, variants=variants) if config.has_attention(layer) else None
        self.mlp = MLP(config, rngs=rngs, variants=variants)
        variants.block_input.init_params(self, scalar_dtype(config))

    def __call__(
        self, x_BTD: jax.Array, ve_BTD: jax.Array | None, x0_BTD: jax.Array, doc_ids_BT: jax.Array,
        window: WindowBlocks | AttentionWindow, rotary: tuple[jax.Array, jax.Array],
        attend: Attend | None = None, lists: KernelBlockLists | None = None,
    ) -> jax.Array:
        """The block's output (B, T, D). `window`: an AttentionWindow, or W blocks (a block window)."""
        return self.run(x_BTD, ve_BTD, x0_BTD, doc_ids_BT, window, rotary, attend, lists)[0]

    def run(
        self, x_BTD: jax.Array, ve_BTD: jax.Array | None, x0_BTD: jax.Array, doc_ids_BT: jax.Array,
        window: WindowBlocks | AttentionWindow, rotary: tuple[jax.Array, jax.Array],
        attend: Attend | None = None, lists: KernelBlockLists | None = None,
        v_first_BTHD: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array | None]:
        """(output (B, T, D), #9's v_first: layer 0's raw value projection once an attention layer
        made it (#9's value residual), else `v_first_BTHD` as given)."""
        config, variants = self.config, self.variants
        if not isinstance(window, AttentionWindow):
            window = AttentionWindow(window, None, config.max_window_blocks)
        x = variants.block_input.mix(self, x_BTD, x0_BTD)
        if self.attn is not None:
            y, v_first_BTHD = self.attn(norm(x, variants.norm_eps), ve_BTD, doc_ids_BT, window, rotary, attend, lists,
                                        v_first_BTHD)
            x = x + y
        return x + self.mlp(norm(x, variants.norm_eps)), v_first_BTHD


def _block_runner(remat: str):
    """Returns run(block, x, ve, x0, doc_ids, window, rotary, attend, lists, v_first) -> Block.run's
    (output (B, T, D), v_first).

    "none" calls the block as is; "block" / "block_dots" call it under nnx.remat (nothing
    saved / matmul outputs saved), so the backward pass recomputes the block from its inputs.
    A block given its own `attend` (decoding: no backward pass) is always called as is.
    """
    policy = jax.checkpoint_policies.dots_saveable if remat == "block_dots" else None

    def run(block: Block, x, ve, x0, doc_ids, window: AttentionWindow, rotary, attend=None, lists=None, v_first=None):
        if remat == "none" or attend is not None:
            return block.run(x, ve, x0, doc_ids, window, rotary, attend, lists, v_first)
        # The window is closed over, so a Python-int window stays static inside the remat.
        step = nnx.remat(lambda blk, x_, ve_, x0_, ids_, rot_, lists_, vf_: blk.run(x_, ve_, x0_, ids_, window, rot_, None,
                                                                                  lists_, vf_),
                         policy=policy)
        return step(block, x, ve, x0, doc_ids, rotary, lists, v_first)

    return run


class GPT(nnx.Module):
    """The Sub3Min GPT and its lineage. Parameter paths are the record's state-dict keys (module docstring)."""

    cache_length: nnx.Cache  # while decoding (jaxgpt.decode.init_cache): the cached positions, and
    cache_doc_ids: nnx.Cache  # the document id of each, (B, S) int32
    skip_weights: nnx.Param  # (L/2,): the U-net's, when the lineage has skips (lineage/skips.py creates it)

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        self.config = config
        self.variants = variants = lineage.model_variants(config)  # the lineage's, resolved once
        # Construction order follows the record's (embed, value embeds, blocks, lm_head).
        self.embed = Embedding(config.embedding_rows, config.model_dim, dtype=stream_dtype(config), rngs=rngs)
        self.value_embeds = ValueEmbedding(config, rngs=rngs, variants=variants)
        self.blocks = nnx.List([Block(config, layer, rngs=rngs, variants=variants) for layer in range(config.num_layers)])
        self.skips = variants.skips.steps
        variants.skips.init_params(self, scalar_dtype(config))
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

    def rotary_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """(cos, sin), each (rope_max_len, Dh // 2) fp32 numpy, of the lineage's rotary kind."""
        return self.variants.rotary.tables(self.config.head_dim, self.config.rope_max_len)

    def document_ids(self, input_ids: jax.Array) -> jax.Array:
        """(B, T) int32 document ids the attention separates (the lineage's: the EOT count, or one
        document for #8/#9)."""
        return self.variants.document_ids(input_ids, self.config.eot_id)

    def hidden(self, input_ids: jax.Array, window_blocks: WindowBlocks) -> jax.Array:
        """Final normed activations (B, T, D) in the policy's stream dtype. `window_blocks`: the
        step's window (W_long blocks; sw tokens under #15's token-window mask; ignored
        under #8/#9's plain causal mask)."""
        self._check_inputs(input_ids)
        seq = input_ids.shape[1]
        cos, sin = self.rotary_tables()
        rotary = (jnp.asarray(cos[:seq]), jnp.asarray(sin[:seq]))
        return self.layers(input_ids, self.document_ids(input_ids), window_blocks, rotary)

    def layers(
        self, input_ids: jax.Array, doc_ids: jax.Array, window: WindowBlocks,
        rotary: tuple[jax.Array, jax.Array], attend: Attend | None = None,
    ) -> jax.Array:
        """Embeddings, the blocks (with the U-net's skips) and the final norm: (B, T) ids -> (B, T, D).
        `attend`: the attention call of every layer (None: the step's own tokens, `attend_tokens`)."""
        config, variants = self.config, self.variants
        windows = variants.windows(config, window, input_ids.shape[1] if attend is None else config.rope_max_len)
        lists = None
        if variants.backend(config.attention_backend) in ("pallas", "mosaic") and attend is None:
            # The kernel's block lists, built once per step for each window and shared by its layers.
            lists = {kind: kernel_block_lists(doc_ids, w.blocks, max_window_blocks=w.max_blocks,
                                              block_size=config.block_size) for kind, w in windows.items()}
        x = x0 = norm(self.embed(input_ids), variants.norm_eps)
        value_embeds = self.value_embeds.lookup(input_ids, config.model_dim)
        stored: list[jax.Array] = []
        v_first = None  # v_first: #9's layer-0 raw value projection, mixed into later layers
        run_block = _block_runner(config.remat)
        for layer, (block, skip) in enumerate(zip(self.blocks, self.skips, strict=True)):
            if skip.add_weight is not None:  # decoder layer j adds the (L/2 - 1 - j)th encoder output
                x = x + scale_by_scalar(self.skip_weights[...][skip.add_weight], stored.pop())
            slot = config.value_embed_slots[layer]
            kind = "long" if config.uses_long_window(layer) else "short"
            x, v_first = run_block(block, x, None if slot is None else value_embeds[slot], x0, doc_ids, windows[kind],
                                   rotary, attend, None if lists is None else lists.get(kind), v_first)
            if skip.store:
                stored.append(x)
        return norm(x, variants.norm_eps)

    def logits(self, input_ids: jax.Array, window_blocks: WindowBlocks, *, train: bool = False) -> jax.Array:
        """(B, T, Vp) lm_head logits before the soft-cap: bf16 (bf16 policies) or fp32 (fp32 policy).

        train=True with the lineage's FP8 head under a bf16 policy uses the FP8 head, otherwise the plain head.
        """
        return self.head(self.hidden(input_ids, window_blocks), train=train)

    def uses_fp8(self, train: bool) -> bool:
        return train and self.variants.fp8_head

    def head(self, x_BTD: jax.Array, *, train: bool) -> jax.Array:
        """(B, T, Vp) logits of final activations (B, T, D)."""
        batch, seq, dim = x_BTD.shape
        x_ND = x_BTD.reshape(batch * seq, dim).astype(compute_dtype(self.config))
        out = head_logits(x_ND, self.lm_head.weight[...], use_fp8=self.uses_fp8(train),
                          fp8_grad_scale=self.config.fp8_grad_scale)
        return out.reshape(batch, seq, -1)

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
            use_fp8=self.uses_fp8(train), cap=config.logit_cap,
            temperature=config.logit_cap_temperature, chunk_tokens=config.loss_chunk_tokens,
            fp8_grad_scale=config.fp8_grad_scale, cap_kind=self.variants.cap.kind, cap_rounding=self.variants.cap.rounding,
        )
