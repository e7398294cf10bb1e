"""The record's optimizer as one optax transformation, and its schedules (RECORD.md 4-7).

Parameters are split into four groups by name (`param_group`): Muon for the hidden matrices,
and one Adam each for the head (lr 0.008), the embedding tables (0.6) and the scalars (0.04),
betas (0.8, 0.95), eps 1e-10. Every learning rate is multiplied by `lr_multiplier` (flat, then
linear down to 0.1x over the last 40% of the steps) and the Muon momentum warms up from 0.85
to 0.95 over 300 steps. All schedules are evaluated at the 0-based step of the update.

Applying updates: `params = optax.apply_updates(params, updates)`. It adds in fp32 and casts
the sum back to each parameter's dtype, so bf16 embedding tables are rounded to bf16 after
every step, exactly as the record's fused Adam stores them.

Schedule functions take a Python number and compute in float64, as the record's host code; the
optax schedules inside the compiled step index host tables of their values, rounded to fp32 once.
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxgpt.config import BLOCK_SIZE, OptimConfig
from jaxgpt.muon import Collective, muon

GroupName = Literal["muon", "head", "embed", "scalar"]
Number = int | float | np.integer | np.floating

# ---------------------------------------------------------------------------------------------
# Schedules


def lr_multiplier(step: Number, total_steps: int, cooldown_frac: float = 0.4, final_lr_frac: float = 0.1,
                  whole_steps: bool = False) -> float:
    """Learning-rate factor at 0-based `step`: 1.0, then linear down to `final_lr_frac`.

    f = w + (1 - w) * final_lr_frac with w = min((1 - step / total_steps) / cooldown_frac, 1),
    in float64 on the host as the record. For the record (1393 steps) f is 1.0 through step 835
    and 0.10162 at step 1392. whole_steps (#8-#15's warmdown_iters form): the cooldown lasts
    K = round(cooldown_frac * total_steps) steps and w = min((total_steps - step) / K, 1).
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if not 0.0 <= cooldown_frac <= 1.0:
        raise ValueError(f"cooldown_frac must be in [0, 1], got {cooldown_frac}")
    remaining = 1 - step / total_steps
    if not 0.0 <= remaining <= 1.0:
        raise ValueError(f"step {step} is outside [0, total_steps={total_steps}]")
    if cooldown_frac == 0.0:
        return 1.0
    if whole_steps:
        cooldown_steps = round(cooldown_frac * total_steps)
        if cooldown_steps == 0:
            return 1.0
        w = min((total_steps - step) / cooldown_steps, 1.0)
    else:
        w = min(remaining / cooldown_frac, 1.0)
    return w * 1.0 + (1 - w) * final_lr_frac


def lr_schedule(
    base_lr: float, total_steps: int, cooldown_frac: float = 0.4, final_lr_frac: float = 0.1,
    whole_steps: bool = False,
) -> optax.Schedule:
    """optax schedule: count (int32, 0-based) -> base_lr * lr_multiplier(count), fp32.

    The values are computed on the host in float64 for every step 0..total_steps and rounded
    to fp32 once, exactly the lr torch's LambdaLR hands its kernels; counts past the end use
    the last value.
    """
    table = np.array(
        [base_lr * lr_multiplier(step, total_steps, cooldown_frac, final_lr_frac, whole_steps)
         for step in range(total_steps + 1)],
        np.float32,
    )
    return _table_schedule(table)


def _table_schedule(table: np.ndarray) -> optax.Schedule:
    """count -> table[min(count, len - 1)]: host-computed values indexed by a traced step."""
    values = jnp.asarray(table)
    return lambda count: values[jnp.minimum(jnp.asarray(count, jnp.int32), len(table) - 1)]


def muon_momentum(step: Number, start: float = 0.85, end: float = 0.95, warmup_steps: int = 300) -> float:
    """Muon momentum at 0-based `step`, in float64 on the host as the record:
    (1 - frac) * start + frac * end, frac = min(step / warmup, 1)."""
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    frac = min(step / warmup_steps, 1) if warmup_steps else 1
    return (1 - frac) * start + frac * end


def muon_momentum_schedule(
    start: float = 0.85, end: float = 0.95, warmup_steps: int = 300, *, complement: bool = False
) -> optax.Schedule:
    """optax schedule form of `muon_momentum` (count int32, 0-based), from a host float64 table
    rounded to fp32 once, as torch receives it. complement=True gives 1 - m (formed in float64
    before rounding), the weight of the record's momentum-buffer lerp."""
    values = [muon_momentum(step, start, end, warmup_steps) for step in range(warmup_steps + 1)]
    return _table_schedule(np.array([1 - m if complement else m for m in values], np.float32))


def window_blocks(step: int, total_steps: int, max_tokens: int = 1728, block_size: int = BLOCK_SIZE) -> tuple[int, int]:
    """Attention windows (long, short) in blocks at `step`, host side in float64 as the record.

    window = smallest multiple of `block_size` >= max_tokens * step / total_steps, at least one
    block; long = window // block_size, short = long // 2. (0, 1393) -> (1, 0); (1393, 1393) -> (14, 7).
    The train loop passes the result into the compiled step as a value.
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    tokens = max_tokens * step / total_steps  # Python float (float64)
    long_blocks = max(1, math.ceil(tokens / block_size))
    return long_blocks, long_blocks // 2


TOKEN_WINDOW_STEP = 64  # #15's token window grows in steps of 64 tokens


def window_value(step: int, total_steps: int, max_tokens: int = 1728, schedule: str = "blocks_ceil",
                 block_size: int = BLOCK_SIZE) -> int:
    """The window a step passes to the model (its W_long, or #15's token window), host float64.

    "blocks_ceil": Sub3Min's `window_blocks(...)[0]`; "blocks_floor": #18's
    floor(((1 - x) * bs + x * (bs + max_tokens)) / bs) blocks with x = step / total_steps (1 -> 14
    for 1728); "tokens": #15's 64 floor((64 + max_tokens * step / total_steps) / 64) tokens
    (64 -> 1792); "none": 0 (attention_mask "causal" takes no window).
    """
    if schedule == "blocks_ceil":
        return window_blocks(step, total_steps, max_tokens, block_size)[0]
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    if schedule == "blocks_floor":
        x = step / total_steps
        return int(((1 - x) * block_size + x * (block_size + max_tokens)) // block_size)
    if schedule == "tokens":
        return TOKEN_WINDOW_STEP * int((TOKEN_WINDOW_STEP + max_tokens * step / total_steps) // TOKEN_WINDOW_STEP)
    if schedule == "none":
        return 0
    raise ValueError(f"unknown window schedule {schedule!r}")


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
    count: jax.Array  # int32 number of updates made
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
    schedule = lambda base_lr: lr_schedule(base_lr, total_steps, config.cooldown_frac, config.final_lr_frac,
                                           config.cooldown_whole_steps)

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
        momentum_form=config.muon_momentum_form,
        ns_iteration=config.ns_iteration,
    )
    transforms = {
        "muon": hidden,
        "head": adam(config.head_lr),
        "embed": adam(config.embed_lr, low_precision=bf16_embeddings),
        "scalar": adam(config.scalar_lr, low_precision=bf16_scalars),
    }
    return optax.partition(transforms, param_labels)
