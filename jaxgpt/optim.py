"""The record's optimizer as one optax transformation (RECORD.md 5-7).

Parameters are split into four groups by name (`param_group`): Muon for the hidden matrices,
and one Adam each for the head (lr 0.008), the embedding tables (0.6) and the scalars (0.04),
betas (0.8, 0.95), eps 1e-10. Every learning rate is multiplied by `lr_multiplier` (flat, then
linear down to 0.1x over the last 40% of the steps) and the Muon momentum warms up from 0.85
to 0.95 over 300 steps. All schedules are evaluated at the 0-based step of the update.

Applying updates: `params = optax.apply_updates(params, updates)`. It adds in fp32 and casts
the sum back to each parameter's dtype, so bf16 embedding tables are rounded to bf16 after
every step, exactly as the record's fused Adam stores them.

The schedules themselves (host float64 functions and their optax tables) are `jaxgpt.schedules`.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxgpt import lineage
from jaxgpt.config import OptimConfig
from jaxgpt.muon import Collective, muon
from jaxgpt.schedules import lr_schedule, muon_momentum_schedule

GroupName = Literal["muon", "head", "embed", "scalar"]

# ---------------------------------------------------------------------------------------------
# Parameter groups


def dotted_name(path: tuple[Any, ...]) -> str:
    """A pytree key path as the record's state-dict key: ('blocks', 3, 'attn', 'qkv_w') ->
    'blocks.3.attn.qkv_w'. A trailing `.value` (an nnx.Variable's own field) is dropped."""
    parts = []
    for entry in path:
        if isinstance(entry, jax.tree_util.DictKey):
            parts.append(str(entry.key))
        elif isinstance(entry, jax.tree_util.SequenceKey):
            parts.append(str(entry.idx))
        elif isinstance(entry, jax.tree_util.GetAttrKey):
            parts.append(entry.name)
        elif isinstance(entry, jax.tree_util.FlattenedIndexKey):
            parts.append(str(entry.key))
        else:
            parts.append(str(entry))
    if len(parts) > 1 and parts[-1] in ("value", "raw_value"):
        parts.pop()
    return ".".join(parts)


def param_group(name: str, ndim: int) -> GroupName:
    """Which optimizer updates parameter `name` (a record state-dict key) of rank `ndim`.

    As the record: every parameter with ndim < 2 is a scalar (Adam 0.04); matrices under
    `blocks` go to Muon; `embed.*` and `value_embeds.*` to the embedding Adam (0.6);
    `lm_head.*` to the head Adam (0.008).
    """
    head = name.split(".", 1)[0]
    if ndim < 2:
        return "scalar"
    if head == "blocks":
        return "muon"
    if head in ("embed", "value_embeds"):
        return "embed"
    if head == "lm_head":
        return "head"
    raise ValueError(f"no optimizer group for parameter {name!r} of ndim {ndim}: expected a record state-dict key")


def param_labels(params: Any) -> Any:
    """Tree shaped like `params` (nested dicts or an nnx.State) with each leaf's group name."""
    return jax.tree_util.tree_map_with_path(lambda path, leaf: param_group(dotted_name(path), jnp.ndim(leaf)), params)


# ---------------------------------------------------------------------------------------------
# Adam with low-precision moments


class LowPrecisionAdamState(NamedTuple):
    count: jax.Array  # type: ignore[assignment]  # int32 updates made (optax's name; shadows tuple.count)
    mu: Any  # first moments, stored in state_dtype
    nu: Any  # second moments, stored in state_dtype


def scale_by_adam_stored_in(
    state_dtype: Any, b1: float, b2: float, eps: float
) -> optax.GradientTransformation:
    """Adam direction m_hat / (sqrt(v_hat) + eps) computed in fp32 from moments kept in `state_dtype`.

    optax.scale_by_adam has mu_dtype but no nu_dtype, and does the moment arithmetic in the
    moment dtype; the record's fused kernel loads bf16 moments, does all math in fp32 (the
    direction uses the fresh fp32 moments) and only stores them rounded to bf16.
    """

    def init_fn(params: Any) -> LowPrecisionAdamState:
        zeros = jax.tree.map(lambda p: jnp.zeros(jnp.shape(p), state_dtype), params)
        return LowPrecisionAdamState(jnp.zeros([], jnp.int32), zeros, zeros)

    def update_fn(updates: Any, state: LowPrecisionAdamState, params: Any = None) -> tuple[Any, LowPrecisionAdamState]:
        del params
        count = optax.safe_increment(state.count)
        k = count.astype(jnp.float32)
        bc1, bc2 = 1.0 - b1**k, 1.0 - b2**k
        f32 = lambda x: x.astype(jnp.float32)
        mu = jax.tree.map(lambda g, m: b1 * f32(m) + (1.0 - b1) * f32(g), updates, state.mu)
        nu = jax.tree.map(lambda g, v: b2 * f32(v) + (1.0 - b2) * jnp.square(f32(g)), updates, state.nu)
        direction = jax.tree.map(lambda m, v: (m / bc1) / (jnp.sqrt(v / bc2) + eps), mu, nu)
        store = lambda tree: jax.tree.map(lambda x: x.astype(state_dtype), tree)
        return direction, LowPrecisionAdamState(count, store(mu), store(nu))

    return optax.GradientTransformation(init_fn, update_fn)


# ---------------------------------------------------------------------------------------------
# The record's optimizer


def record_optimizer(
    config: OptimConfig,
    total_steps: int,
    *,
    axis_name: str | None = None,
    bf16_embeddings: bool | None = None,
    muon_collective: Collective = "all_gather",
    bf16_scalars: bool = False,
) -> optax.GradientTransformation:
    """Muon + three Adam groups over any params pytree keyed like the record's state dict.

    Args:
      config: learning rates, betas, eps, momentum warmup, NS steps and dtype, LR cooldown.
      total_steps: length of the run; the LR cooldown covers its last `cooldown_frac`.
      axis_name: mesh axis when called inside `jax.shard_map` with replicated params, state
        and pmean-ed grads; Muon then splits its Newton-Schulz work over that axis.
      bf16_embeddings: keep the embedding group's Adam moments in bf16 (the record, whose
        embedding tables are bf16 parameters). None: `config.bf16_embeddings`, and False if
        that is None too (fp32 moments: the default for parity tests, where the tables are
        fp32). The caller owns the parameter dtype: store the tables in bf16 and
        `optax.apply_updates` rounds them to bf16 after each step. (With bf16 tables and
        False, optax.scale_by_adam would keep bf16 moments with bf16 arithmetic: pass True.)
      muon_collective: how Muon shares its Newton-Schulz results over `axis_name`:
        "all_gather" (the record's) or "psum" (`muon.orthogonalize_split`). Not an OptimConfig
        field: both give bitwise-equal updates, so it is an execution choice, not a
        hyperparameter a checkpoint should record (used to compare the two plans).
      bf16_scalars: the scalar group's parameters are bf16 (#15's bf16 model): its moments
        are kept in bf16 as well, like the embeddings'.

    Returns:
      An optax transformation; updates are fp32 and already include -lr.
    """
    if bf16_embeddings is None:
        bf16_embeddings = bool(config.bf16_embeddings)
    variants = lineage.optim_variants(config)  # the lineage's momentum form, NS step and cooldown
    schedule = lambda base_lr: lr_schedule(base_lr, total_steps, config.cooldown_frac, config.final_lr_frac,
                                           variants.whole_step_cooldown)

    def adam(base_lr: float, low_precision: bool = False) -> optax.GradientTransformation:
        if low_precision:
            direction = scale_by_adam_stored_in(jnp.bfloat16, config.adam_b1, config.adam_b2, config.adam_eps)
        else:
            # eps_root=0: eps is added to sqrt(v_hat), torch's placement (RECORD.md 6).
            direction = optax.scale_by_adam(config.adam_b1, config.adam_b2, config.adam_eps, eps_root=0.0)
        return optax.chain(direction, optax.scale_by_learning_rate(schedule(base_lr)))

    momentum_args = (config.muon_momentum_start, config.muon_momentum_end, config.muon_momentum_warmup_steps)
    hidden = muon(
        schedule(config.muon_lr),
        momentum=muon_momentum_schedule(*momentum_args),
        momentum_complement=muon_momentum_schedule(*momentum_args, complement=True),
        nesterov=True,
        ns_steps=config.ns_steps,
        ns_dtype=jnp.bfloat16 if config.ns_dtype == "bf16" else jnp.float32,
        axis_name=axis_name,
        collective=muon_collective,
        **variants.muon_options(),
    )
    transforms = {
        "muon": hidden,
        "head": adam(config.head_lr),
        "embed": adam(config.embed_lr, low_precision=bf16_embeddings),
        "scalar": adam(config.scalar_lr, low_precision=bf16_scalars),
    }
    return optax.partition(transforms, param_labels)
