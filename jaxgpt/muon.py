"""Muon for the hidden matrices, as optax transformations (RECORD.md section 5).

Three layers, each usable on its own:

- `newton_schulz(G)`: the record's quintic Newton-Schulz orthogonalisation in bf16, batched over
  leading dims (so the (3, D, D) qkv leaf is orthogonalised per q, k, v slice).
- `scale_by_muon(...)`: a `GradientTransformation` that turns gradients into the record's
  orthogonalised, shape-scaled directions (lerp Nesterov, no bias correction, momentum that
  may be a schedule of the 0-based step). It does not apply the learning rate: chain it with
  `optax.scale_by_learning_rate`, or use `muon(...)` which does exactly that.
- distributed mode (`axis_name=...` inside `jax.shard_map`): the Newton-Schulz work is split
  round-robin over the devices of the axis and the bf16 results are exchanged, as the record
  splits it over its 8 ranks.

How the record's Muon differs from `optax.contrib.muon`: docs/MUON_VS_OPTAX.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxgpt.compat import all_gather_invariant

# Quintic coefficients (a, b, c): steep slope at zero, singular values end in ~[0.5, 1.5].
NS_COEFFICIENTS: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)
NS_NORM_EPS = 1e-7  # added to the Frobenius norm (not to its square), as the record

ScalarOrSchedule = float | jax.Array | Callable[[jax.Array], jax.Array]
Collective = Literal["psum", "all_gather"]


# ---------------------------------------------------------------------------------------------
# Newton-Schulz


def _rounder(dtype: Any) -> Callable[[jax.Array], jax.Array]:
    """Round fp32 values to `dtype`'s precision, keeping them fp32.

    The NS below carries fp32 arrays and rounds them at exactly the points where PyTorch eager
    stores a bf16 tensor. Plain `.astype(bf16)` round trips are not enough under jit: XLA may
    drop convert pairs (excess precision) and fuse, which on random inputs moves a bf16 NS by
    ~3% after 5 iterations; `reduce_precision` is never dropped.
    """
    info = jnp.finfo(dtype)
    if info.bits >= 32:
        return lambda x: x
    return lambda x: jax.lax.reduce_precision(x, exponent_bits=info.nexp, mantissa_bits=info.nmant)


def newton_schulz(
    G: jax.Array, steps: int = 5, *, eps: float = NS_NORM_EPS, dtype: Any = jnp.bfloat16, iteration: str = "poly"
) -> jax.Array:
    """Approximately orthogonalise each matrix of G (the record's `zeropower_via_newtonschulz5`).

    Args:
      G: (..., rows, cols) array of any float dtype; leading dims are a batch of independent
        matrices.
      steps: number of quintic iterations (the record uses 5).
      eps: added to each matrix's Frobenius norm before dividing by it.
      dtype: dtype of every matmul and of the result (bf16 as the record; fp32 for checks).
      iteration: "poly" (the record's, from #11 on): A = X X^T, B = bA + (cA)A, X = aX + BX;
        "chain" (#8/#9): A = X X^T, B = AX, X = aX + bB + (cA)B. Same polynomial, different
        bf16 rounding points.

    Returns:
      (..., rows, cols) array of `dtype`: U S' V^T with S' roughly in [0.5, 1.5] where
      G = U S V^T.

    Rounding follows PyTorch eager on the record's function: every op's result is rounded to
    `dtype`, products with the Python-float coefficients are formed in fp32 (torch keeps a
    scalar operand in fp32; jnp would round -4.775 to -4.78125 first), and matmuls accumulate
    in fp32. (The torch.compile'd record fuses b*A into the following add and so skips one of
    these roundings; any two bf16 NS implementations differ by a few percent, see tests.)
    """
    if G.ndim < 2:
        raise ValueError(f"newton_schulz needs an array of ndim >= 2 (a batch of matrices), got shape {G.shape}")
    if not jnp.issubdtype(G.dtype, jnp.floating):
        raise ValueError(f"newton_schulz needs a floating-point array, got dtype {G.dtype}")
    if steps < 0:
        raise ValueError(f"newton_schulz steps must be >= 0, got {steps}")
    a, b, c = (jnp.float32(coef) for coef in NS_COEFFICIENTS)
    rnd = _rounder(dtype)

    def matmul(x: jax.Array, y: jax.Array) -> jax.Array:
        # dtype operands, fp32 accumulation (a cuBLAS bf16 GEMM's contract); HIGHEST so that the
        # fp32 mode is not silently done in TF32 on a GPU.
        out = jnp.matmul(
            x.astype(dtype), y.astype(dtype),
            precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32,
        )
        return rnd(out)

    X = rnd(G.astype(jnp.float32))
    # Work on the wide orientation so that A = X X^T is the smaller Gram matrix.
    tall = X.shape[-2] > X.shape[-1]
    if tall:
        X = jnp.swapaxes(X, -2, -1)
    norm = rnd(jnp.sqrt(jnp.sum(jnp.square(X), axis=(-2, -1), keepdims=True)))  # one per matrix
    X = rnd(X / rnd(norm + eps))

    if iteration not in ("poly", "chain"):
        raise ValueError(f"newton_schulz iteration must be 'poly' or 'chain', got {iteration!r}")

    def quintic_step(_: int, X: jax.Array) -> jax.Array:
        A = matmul(X, jnp.swapaxes(X, -2, -1))
        if iteration == "chain":  # Python's left-to-right ((aX + bB) + (cA) @ B), as #8/#9 wrote it
            B = matmul(A, X)
            return rnd(rnd(rnd(a * X) + rnd(b * B)) + matmul(rnd(c * A), B))
        B = rnd(rnd(b * A) + matmul(rnd(c * A), A))
        return rnd(rnd(a * X) + matmul(B, X))

    # A loop, not 5 unrolled copies: several times less to compile, same numbers.
    X = jax.lax.fori_loop(0, steps, quintic_step, X)
    if tall:
        X = jnp.swapaxes(X, -2, -1)
    return X.astype(dtype)


def update_scale(shape: Sequence[int]) -> float:
    """sqrt(max(1, rows / cols)) from the last two dims: 2.0 for c_fc (3072, 768), else 1.0 here."""
    rows, cols = shape[-2], shape[-1]
    return math.sqrt(max(1.0, rows / cols))


# ---------------------------------------------------------------------------------------------
# Momentum


def torch_lerp(start: jax.Array, end: jax.Array, weight: jax.Array | float) -> jax.Array:
    """PyTorch's lerp: start + w (end - start) when |w| < 0.5, else end - (end - start)(1 - w).

    The two forms round differently; mirroring torch's choice keeps fp32 parity at the ulp
    level (the record's momentum lerp has w = 1 - m <= 0.15, its Nesterov lerp w = m >= 0.85).
    """
    weight = jnp.asarray(weight, jnp.float32)
    diff = end - start
    return jnp.where(jnp.abs(weight) < 0.5, start + weight * diff, end - diff * (1.0 - weight))


class MuonState(NamedTuple):
    """count: int32 scalar, number of updates made (the 0-based step of the next update);
    momentum: fp32 buffers shaped like the params (zeros at first, no bias correction)."""

    count: jax.Array  # type: ignore[assignment]  # named as optax's states name it (tuple.count is shadowed)
    momentum: Any


def _value_at(hyper: ScalarOrSchedule, count: jax.Array) -> jax.Array:
    return jnp.asarray(hyper(count) if callable(hyper) else hyper, jnp.float32)


# ---------------------------------------------------------------------------------------------
# Orthogonalisation of a list of directions, on one device or split over a mesh axis


def ns_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """The shape NS iterates on: last two dims swapped when rows > cols."""
    shape = tuple(shape)
    return shape[:-2] + (min(shape[-2:]), max(shape[-2:])) if shape[-2] > shape[-1] else shape


def _group_by_wide_shape(arrays: Sequence[jax.Array]) -> dict[tuple[int, ...], list[int]]:
    """Indices of `arrays` grouped by their NS shape (`ns_shape`), in first-appearance order."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, array in enumerate(arrays):
        groups.setdefault(ns_shape(array.shape), []).append(index)
    return groups


def orthogonalize_local(directions: Sequence[jax.Array], ns: Callable[[jax.Array], jax.Array]) -> list[jax.Array]:
    """`ns` of every direction on this device, one leaf at a time (the single-device path)."""
    return [ns(d) for d in directions]


def orthogonalize_split(
    directions: Sequence[jax.Array],
    ns: Callable[[jax.Array], jax.Array],
    axis_name: str,
    collective: Collective,
) -> list[jax.Array]:
    """NS of every direction, each computed on one device of `axis_name` and shared with all.

    Leaves are grouped by the shape NS works on, tall matrices transposed (NS transposes them
    itself, so NS(X) = NS(X^T)^T bit for bit). Equal shapes stack into one batched NS call and
    one collective; the record groups by element count instead, which here gives the same
    groups (c_fc (4D, D) joins mlp c_proj (D, 4D): 24 = 3 x 8 leaves, no padding).
    Leaf j of a group goes to device j % world: the stack is padded with zeros to
    rounds * world matrices and viewed as (rounds, world, ...); device r orthogonalises
    column r, a (rounds, ...) batch.
    The results come back in NS dtype (bf16: half the bytes of fp32), either by
    - "all_gather" (default, the record's collective): each device's column is gathered by an
      all-gather typed as replicated over the axis (`compat.all_gather_invariant`), so the
      result leaves a shard_map with out_specs P() under the default check_vma=True; or by
    - "psum": each device writes its column into a zero buffer and the buffers are summed
      (exact: one nonzero term per slot); an all-reduce, about twice all_gather's bytes.
    """
    world = jax.lax.axis_size(axis_name)
    rank = jax.lax.axis_index(axis_name)
    results: list[jax.Array | None] = [None] * len(directions)
    orient = lambda x: jnp.swapaxes(x, -2, -1) if x.shape[-2] > x.shape[-1] else x  # its own inverse
    for shape, members in _group_by_wide_shape(directions).items():
        rounds = -(-len(members) // world)
        stack = jnp.stack([orient(directions[i]) for i in members])
        padding = rounds * world - len(members)
        if padding:
            stack = jnp.concatenate([stack, jnp.zeros((padding, *shape), stack.dtype)])
        stack = stack.reshape(rounds, world, *shape)
        mine = ns(jax.lax.dynamic_index_in_dim(stack, rank, axis=1, keepdims=False))  # (rounds, *shape)
        if collective == "psum":
            # where, not a one-hot product: a non-finite result must not leak into other slots.
            is_mine = (jnp.arange(world) == rank).reshape(1, world, *([1] * len(shape)))
            shared = jax.lax.psum(jnp.where(is_mine, mine[:, None], jnp.zeros((), mine.dtype)), axis_name)
        elif collective == "all_gather":
            shared = all_gather_invariant(mine, axis_name, axis=1)
        else:
            raise ValueError(f"collective must be 'psum' or 'all_gather', got {collective!r}")
        shared = shared.reshape(rounds * world, *shape)
        for position, index in enumerate(members):
            tall = directions[index].shape[-2] > directions[index].shape[-1]
            results[index] = jnp.swapaxes(shared[position], -2, -1) if tall else shared[position]
    return results  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# The transformations


def check_matrices(params: Any) -> None:
    """ValueError naming the first leaf that is not a matrix (Muon orthogonalises ndim >= 2 only)."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        if jnp.ndim(leaf) < 2:
            raise ValueError(
                f"Muon only handles matrices (ndim >= 2); leaf {jax.tree_util.keystr(path)} has shape "
                f"{jnp.shape(leaf)}. Route it to another optimizer with optax.partition."
            )


def momentum_directions(grads: list[jax.Array], buffers: list[jax.Array], m: Any, one_minus_m: Any, *,
                        nesterov: bool, form: str) -> tuple[list[jax.Array], list[jax.Array]]:
    """(new momentum buffers, directions to orthogonalise), fp32, for each gradient and buffer:
    "ema" B <- lerp(B, g, 1 - m), u = lerp(g, B, m) (or B without nesterov); "sgd" (#8/#9)
    B <- m B + g, u = g + m B (torch's buf.mul_(m).add_(g); g.add(buf, alpha=m))."""
    new_buffers, directions = [], []
    for g, buf in zip(grads, buffers, strict=True):
        g = g.astype(jnp.float32)
        if form == "sgd":
            buf = buf * m + g
            direction = g + m * buf if nesterov else buf
        else:
            buf = torch_lerp(buf, g, one_minus_m)
            direction = torch_lerp(g, buf, m) if nesterov else buf
        new_buffers.append(buf)
        directions.append(direction)
    return new_buffers, directions


def _check_options(ns_steps: int, collective: str, momentum_form: str) -> None:
    """ValueError naming the first of scale_by_muon's options that has no meaning."""
    if ns_steps < 0:
        raise ValueError(f"ns_steps must be >= 0, got {ns_steps}")
    if collective not in ("psum", "all_gather"):
        raise ValueError(f"collective must be 'psum' or 'all_gather', got {collective!r}")
    if momentum_form not in ("ema", "sgd"):
        raise ValueError(f"momentum_form must be 'ema' or 'sgd', got {momentum_form!r}")


def scale_by_muon(
    momentum: ScalarOrSchedule = 0.95,
    nesterov: bool = True,
    ns_steps: int = 5,
    ns_dtype: Any = jnp.bfloat16,
    axis_name: str | None = None,
    *,
    collective: Collective = "all_gather",
    momentum_complement: ScalarOrSchedule | None = None,
    momentum_form: str = "ema",
    ns_iteration: str = "poly",
) -> optax.GradientTransformation:
    """The record's Muon direction, without the learning rate.

    Per leaf P with gradient g (fp32) and momentum buffer B (fp32, zeros at first), at the
    0-based step k = state.count with m = momentum(k) (or the constant):
      B <- lerp(B, g, 1 - m);  u = lerp(g, B, m) if nesterov else B   (PyTorch's lerp forms)
      update = sqrt(max(1, rows / cols)) * NS(u)  (NS in `ns_dtype`, result upcast to fp32)
    so `optax.scale_by_learning_rate(lr)` chained after gives the record's P -= lr * scale * O.
    momentum_form "sgd" is #8/#9's plain SGD momentum instead: B <- m B + g; u = g + m B (no
    1 - m weight: the buffer is 1/(1 - m) times the EMA's, which NS's normalisation mostly
    cancels; under a momentum warmup the two are not proportional). `ns_iteration`: see
    `newton_schulz`.

    Every leaf must have ndim >= 2 (leading dims are independent matrices); route other leaves
    elsewhere with `optax.partition`.

    `momentum_complement` (value or schedule) is the 1 - m used as the buffer's lerp weight.
    The record forms it in float64 on the host and torch rounds it to fp32 once; 1 - fp32(m)
    differs by up to 2e-7 relative, enough to flip an occasional bf16 rounding of the NS input
    (see parity_tests/test_optim_parity.py). None: 1 - m, in float64 when `momentum` is a
    Python number, else in fp32.

    Distributed mode, `axis_name` set: call the update inside `jax.shard_map` over that axis
    with the same (already averaged) gradients on every device. The NS calls are split
    round-robin over the devices (see `orthogonalize_split`), so each does ~1/world of them.
    The momentum buffers stay replicated: every device updates all of them. That costs one
    elementwise pass per leaf (negligible next to NS), keeps the state a plain replicated
    pytree shaped like the params (orbax saves it, `out_specs=P()` returns it, and the
    checkpoint does not depend on the device count), and differs from the record, whose
    ranks hold only their own parameters' buffers, only in memory, not in the numbers.
    The result equals the single-device transform (bitwise on CPU in our tests).
    """
    _check_options(ns_steps, collective, momentum_form)

    def ns(x: jax.Array) -> jax.Array:
        return newton_schulz(x, ns_steps, dtype=ns_dtype, iteration=ns_iteration)

    def init_fn(params: Any) -> MuonState:
        check_matrices(params)
        buffers = jax.tree.map(lambda p: jnp.zeros(jnp.shape(p), jnp.float32), params)
        return MuonState(count=jnp.zeros([], jnp.int32), momentum=buffers)

    def update_fn(updates: Any, state: MuonState, params: Any = None) -> tuple[Any, MuonState]:
        del params
        m = _value_at(momentum, state.count)
        if momentum_complement is not None:
            one_minus_m = _value_at(momentum_complement, state.count)
        elif isinstance(momentum, (int, float)):
            one_minus_m = jnp.float32(1 - momentum)  # float64 on the host, as torch
        else:
            one_minus_m = 1.0 - m
        grads, treedef = jax.tree.flatten(updates)
        buffers = treedef.flatten_up_to(state.momentum)  # type: ignore[attr-defined]  # PyTreeDef's; not in jax's stubs
        new_buffers, directions = momentum_directions(grads, buffers, m, one_minus_m, nesterov=nesterov,
                                                      form=momentum_form)
        if axis_name is None:
            orthogonal = orthogonalize_local(directions, ns)
        else:
            orthogonal = orthogonalize_split(directions, ns, axis_name, collective)
        # Upcast first, then scale in fp32 (the record's add_ upcasts the bf16 O the same way).
        out = [o.astype(jnp.float32) * update_scale(o.shape) for o in orthogonal]
        new_state = MuonState(count=optax.safe_increment(state.count), momentum=jax.tree.unflatten(treedef, new_buffers))
        return jax.tree.unflatten(treedef, out), new_state

    return optax.GradientTransformation(init_fn, update_fn)


def muon(
    learning_rate: ScalarOrSchedule,
    momentum: ScalarOrSchedule = 0.95,
    nesterov: bool = True,
    ns_steps: int = 5,
    ns_dtype: Any = jnp.bfloat16,
    axis_name: str | None = None,
    *,
    collective: Collective = "all_gather",
    momentum_complement: ScalarOrSchedule | None = None,
    momentum_form: str = "ema",
    ns_iteration: str = "poly",
) -> optax.GradientTransformation:
    """The record's Muon: `scale_by_muon` then `optax.scale_by_learning_rate(learning_rate)`.

    Updates are -lr * scale * NS(u) in fp32; apply them with `optax.apply_updates`. Schedules
    (learning rate and momentum) are evaluated at the 0-based step of the update.
    """
    return optax.chain(
        scale_by_muon(
            momentum, nesterov, ns_steps, ns_dtype, axis_name,
            collective=collective, momentum_complement=momentum_complement,
            momentum_form=momentum_form, ns_iteration=ns_iteration,
        ),
        optax.scale_by_learning_rate(learning_rate),
    )
