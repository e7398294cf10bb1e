"""The head and its loss: lm_head logits (plain or FP8), the soft-cap (the record's sigmoid,
the lineage's tanh or none) and the cross-entropy over the capped logits, chunked over tokens
(RECORD.md 2.9). Shape suffixes follow jaxgpt.model's legend."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from jaxgpt import fp8
from jaxgpt.config import RECORD_FP8_GRAD_SCALE
from jaxgpt.layers import linear, round_to


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
