"""The records'-code optimizer rows: the record's own Muon and Adam(s), jaxgpt's optimizer and
torch_ref's, given the same parameters and the same gradients, take two updates; the updated
parameters are compared (every Muon matrix, the embeddings and head, the scalars). In the setting
of jaxgpt_tools.parity.record_code_checks (its perturbed initial state and miniature dims).

The updates are steps FIRST_STEP and FIRST_STEP + 1 of a TOTAL_STEPS run: there every record's
LR multiplier is inside its cooldown (#8/#9's warmdown, #15's cooldown_iters and #18/#20's
cooldown_frac, the first two at the preset's round(cooldown_frac x steps)) and #9-#20's Muon
momentum inside its warmup (0.85 -> 0.95), so both schedules are away from their flat values.
Every optimizer state starts fresh (Adam's first update, bias correction 1; Muon's buffers zero)
with the schedules placed at FIRST_STEP: the record's LambdaLRs advanced FIRST_STEP times and its
momentum set by its own loop statement; torch_ref's the same way through torch_ref.optim; jaxgpt's
schedule counters (Muon's and the LR schedules') set to FIRST_STEP, its Adam counters left at 0.

Newton-Schulz in two dtypes: "float32" (the harness's patch of the record's `X = G.bfloat16()`,
the only change for this mode) and "bfloat16", the record's own dtype as written. The harness's
fp32 Muon update buffer (record_changes) holds the bf16 NS outputs exactly, so the bf16 mode is the
record's arithmetic. Parameters stay fp32 in both modes (the harness's reading of #15's bf16
model and #18/#20's bf16 tables: its bf16 column is another row's).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxgpt_tools.common.machine import torch_threads
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity import record_optim
from jaxgpt_tools.parity.record_code_checks import EOT, dims, initial_state, jax_params, label, torch_ref_model
from jaxgpt_tools.parity.record_standins import torchrun_env

TOTAL_STEPS, FIRST_STEP, UPDATES = 400, 290, 2
GRADIENT_SEED = 11
NS_DTYPES = ("float32", "bfloat16")  # torch's names; the presets' ns_dtype "fp32" / "bf16"
MUON, TABLES, SCALARS = "Muon matrices", "embeddings and head", "scalars"
# Bounds on ||update_framework - update_record|| / ||update_record|| per parameter (the update:
# final minus initial value). fp32: every operation agrees to ~1e-7 and only summation order
# differs; Newton-Schulz's 5 quintic steps amplify it on small singular values (the NS rows:
# 6e-6 at 768 x 768), and the stored parameter's rounding adds ulp(p) / |update| (<= ~3e-6 for a
# scalar of ~1 moved by lr 0.04). bf16 Newton-Schulz: jaxgpt's bf16 matmuls accumulate in
# another order than torch's, and a one-ulp flip of one bf16 rounding redraws the iteration's
# rounding noise (parity_tests/test_optim_parity.py's module docstring: sqrt(2) x its 3.5% noise);
# the same map on the same input differs by 1.2e-2 (the NS 5-step row); torch_ref runs the same
# torch ops in the same order as the record.
BOUNDS = {"float32": {MUON: 1e-5, TABLES: 1e-5, SCALARS: 1e-5},
          "bfloat16": {MUON: 5e-2, TABLES: 1e-5, SCALARS: 1e-5}}
# The median over the Muon matrices: a flip redraws one matrix's noise, so most matrices stay at a
# few bf16 ulps of a handful of elements (1.2e-4 to 1.4e-4 measured), while a missing or extra
# bf16 cast moves every matrix by the whole bf16 NS noise (the record's own bf16 against its own
# fp32 updates: 2.5e-2 to 3e-2 on every matrix, `dtype_gap`): 2e-3 tells the two apart by 10x.
MEDIAN_BOUNDS = {"float32": 1e-5, "bfloat16": 2e-3}


def kind(name: str, ndim: int) -> str:
    """The comparison group of a parameter (project name, rank)."""
    if ndim < 2:
        return SCALARS
    return MUON if name.startswith("blocks.") else TABLES


@functools.cache
def gradients(name: str) -> tuple[dict[str, np.ndarray], ...]:
    """UPDATES gradients by project name, fp32 standard normal from GRADIENT_SEED (+ the update's
    index), in the shapes of record `name`'s parameters."""
    state = initial_state(name)
    names = rc.project_names(rc.build_model(rc.load(name, EOT), dims(name)))
    shapes = {project: tuple(state[record].shape) for project, record in sorted(names.items())}
    draws = []
    for update in range(UPDATES):
        rng = np.random.default_rng(GRADIENT_SEED + update)
        draws.append({project: rng.standard_normal(shape).astype(np.float32) for project, shape in shapes.items()})
    return tuple(draws)


def initial_params(name: str) -> dict[str, np.ndarray]:
    """The shared initial parameters by project name (fp32 numpy)."""
    state = initial_state(name)
    names = rc.project_names(rc.build_model(rc.load(name, EOT), dims(name)))
    return {project: state[record].float().numpy().copy() for project, record in names.items()}


def cooldown_steps(name: str) -> int:
    """#8-#15's warmdown / cooldown length of a TOTAL_STEPS run: the preset's round(cooldown_frac x
    steps), as OptimConfig.lineage.cooldown_whole_steps reads it."""
    from jaxgpt import presets

    return round(presets.get_preset(name).optim.cooldown_frac * TOTAL_STEPS)


@contextlib.contextmanager
def _quiet_schedulers() -> Iterator[None]:
    """LambdaLR.step before any optimizer step warns; here it only places the schedule."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)`")
        yield


def advance_schedulers(schedulers: list[Any], steps: int) -> None:
    """Place LR schedulers at `steps` (each scheduler stepped `steps` times, no optimizer step)."""
    with _quiet_schedulers():
        for scheduler in schedulers:
            for _ in range(steps):
                scheduler.step()


def set_grads(model, grads: dict[str, np.ndarray], names: dict[str, str]) -> None:
    """Fresh .grad tensors (copies: #15-#20's Muon lerps into p.grad in place) in each parameter's
    dtype (the bf16 rows' bf16 tables and scalars)."""
    import torch

    params = dict(model.named_parameters())
    for project, record in names.items():
        params[record].grad = torch.from_numpy(grads[project].copy()).to(params[record].dtype)


@functools.cache
def record_updated(name: str, ns_dtype: str) -> dict[str, np.ndarray]:
    """The record's own optimizers, built by its own statements over its own GPT, after UPDATES
    updates from step FIRST_STEP on `gradients(name)`: parameters by project name."""
    loaded = rc.load(name, EOT)
    model = rc.build_model(loaded, dims(name))
    rc.load_state(model, initial_state(name))
    with record_optim.newton_schulz_dtype(loaded, ns_dtype):
        return step_own_optimizers(loaded, model, name, gradients(name))


def step_own_optimizers(loaded, model, name: str, updates: tuple[dict[str, np.ndarray], ...]) -> dict[str, np.ndarray]:
    """The record's own optimizers, built by its own statements over `model`, its schedulers placed
    at FIRST_STEP, stepped once per gradient dict of `updates` (by project name) with the record's
    own loop statements: `model`'s parameters after them, by project name (fp32 numpy)."""
    names = rc.project_names(model)
    with torch_threads(1):
        env = record_optim.own_optimizers(loaded, model, TOTAL_STEPS, cooldown_steps(name))
        advance_schedulers(env["schedulers"], FIRST_STEP)
        for update, grads in enumerate(updates):
            env["step"] = FIRST_STEP + update
            set_grads(model, grads, names)
            with torchrun_env():
                for key in ("momentum", "step"):
                    if key in loaded.snippets:
                        exec(loaded.snippets[key], env)  # noqa: S102 - the record's loop statements
    params = dict(model.named_parameters())
    return {project: params[record].detach().float().numpy().copy() for project, record in names.items()}


def record_schedule_values(name: str) -> tuple[float, float]:
    """(the record's own LR multiplier, its Muon momentum) at FIRST_STEP, from its get_lr and its
    loop's momentum statement (0.95 for #8, which has none)."""
    loaded = rc.load(name, EOT)
    model = rc.build_model(loaded, dims(name))
    env = record_optim.own_optimizers(loaded, model, TOTAL_STEPS, cooldown_steps(name))
    env["step"] = FIRST_STEP
    if "momentum" in loaded.snippets:
        exec(loaded.snippets["momentum"], env)  # noqa: S102
    muon = next(opt for opt in env["optimizers"] if isinstance(opt, loaded.module.Muon))
    return float(env["get_lr"](FIRST_STEP)), float(muon.param_groups[0]["momentum"])


def _preset_optim(name: str, ns_dtype: str):
    from jaxgpt import config as cfg
    from jaxgpt import presets

    return cfg.replace(presets.get_preset(name).optim, ns_dtype={"float32": "fp32", "bfloat16": "bf16"}[ns_dtype])


@functools.cache
def torch_ref_updated(name: str, ns_dtype: str) -> dict[str, np.ndarray]:
    """torch_ref's optimizers and LR schedulers (torch_ref.optim) after the same updates."""
    from torch_ref import optim as torch_optim

    optim = _preset_optim(name, ns_dtype)
    gpt = torch_ref_model(name, initial_state(name))
    optimizers = torch_optim.build_optimizers(gpt, optim)
    schedulers = torch_optim.build_lr_schedulers(optimizers, TOTAL_STEPS, optim)
    names = {key: key for key, _ in gpt.named_parameters()}
    with torch_threads(1):
        advance_schedulers(schedulers, FIRST_STEP)
        for update, grads in enumerate(gradients(name)):
            set_grads(gpt, grads, names)
            torch_optim.optimizer_step(gpt, optimizers, schedulers, FIRST_STEP + update, optim)
    return {key: p.detach().float().numpy().copy() for key, p in gpt.named_parameters()}


def at_step(opt_state: Any, step: int) -> Any:
    """jaxgpt's optimizer state with its schedules at `step`: the Muon counter (momentum and LR)
    and every LR schedule's counter set, the Adam counters (bias correction) left as they are."""
    import jax
    import jax.numpy as jnp
    import optax

    from jaxgpt.muon import MuonState

    counted = (MuonState, optax.ScaleByScheduleState)

    def place(node: Any) -> Any:
        return node._replace(count=jnp.asarray(step, jnp.int32)) if isinstance(node, counted) else node

    return jax.tree.map(place, opt_state, is_leaf=lambda node: isinstance(node, counted))


@functools.cache
def jaxgpt_updated(name: str, ns_dtype: str) -> dict[str, np.ndarray]:
    """jaxgpt.optim.record_optimizer (jitted update, fp32 tables and scalars) after the same updates."""
    import jax
    import jax.numpy as jnp
    import optax

    from jaxgpt import optim as jax_optim

    optimizer = jax_optim.record_optimizer(_preset_optim(name, ns_dtype), TOTAL_STEPS, bf16_embeddings=False,
                                           bf16_scalars=False)
    params = jax_params(name, initial_state(name))
    opt_state = at_step(jax.jit(optimizer.init)(params), FIRST_STEP)  # one compile, not one per shape

    @jax.jit
    def update(params, opt_state, grads):
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    for grads in gradients(name):
        params, opt_state = update(params, opt_state, {key: jnp.asarray(value) for key, value in grads.items()})
    return {key: np.asarray(value, np.float32) for key, value in params.items()}


# ---------------------------------------------------------------------------------------------
# The rows


@dataclass(frozen=True)
class UpdateGaps:
    """One framework against the record in one NS dtype: per kind, the worst relative error of a
    parameter's update (with its name), and the largest |difference| of an updated parameter."""

    relative: dict[str, tuple[float, str]]
    muon_median: float
    max_abs: float
    same_names: bool

    def passed(self, ns_dtype: str) -> bool:
        return (self.same_names and self.muon_median <= MEDIAN_BOUNDS[ns_dtype]
                and all(rel <= BOUNDS[ns_dtype][k] for k, (rel, _) in self.relative.items()))

    def describe(self) -> str:
        return ", ".join(f"{k} {rel:.1e}" + (f" ({where})" if rel else "") for k, (rel, where) in self.relative.items()) \
            + f", median Muon matrix {self.muon_median:.1e}"


def update_gaps(updated: dict[str, np.ndarray], reference: dict[str, np.ndarray],
                initial: dict[str, np.ndarray]) -> UpdateGaps:
    """`updated` against `reference` (both by project name), each parameter's update measured
    from `initial`: ||(u - p0) - (r - p0)|| / ||r - p0|| (Frobenius, float64)."""
    from jaxgpt_tools.parity.measures import rel_norm

    worst: dict[str, tuple[float, str]] = {MUON: (0.0, ""), TABLES: (0.0, ""), SCALARS: (0.0, "")}
    muon, max_abs = [], 0.0
    for key, want in reference.items():
        if key not in updated:
            continue
        p0 = initial[key].astype(np.float64)
        group, rel = kind(key, want.ndim), rel_norm(updated[key] - p0, want - p0)
        worst[group] = max(worst[group], (rel, key))
        muon += [rel] if group == MUON else []
        max_abs = max(max_abs, float(np.abs(updated[key].astype(np.float64) - want).max()))
    return UpdateGaps(worst, float(np.median(muon)), max_abs, set(updated) == set(reference))


def dtype_gap(name: str) -> float:
    """The smallest relative difference of a Muon matrix's update between the record's own bf16
    and fp32 Newton-Schulz modes: what a missing or extra bf16 cast would show on every matrix."""
    from jaxgpt_tools.parity.measures import rel_norm

    initial, bf16, fp32 = initial_params(name), record_updated(name, "bfloat16"), record_updated(name, "float32")
    return min(rel_norm(bf16[key] - initial[key], fp32[key] - initial[key]) for key in bf16
               if kind(key, bf16[key].ndim) == MUON)


@functools.cache
def optimizer_gaps(name: str) -> dict[tuple[str, str], UpdateGaps]:
    """{(framework, NS dtype): its UpdateGaps against the record's own optimizers}."""
    initial = initial_params(name)
    found = {}
    for ns_dtype in NS_DTYPES:
        reference = record_updated(name, ns_dtype)
        found[("jaxgpt", ns_dtype)] = update_gaps(jaxgpt_updated(name, ns_dtype), reference, initial)
        found[("torch_ref", ns_dtype)] = update_gaps(torch_ref_updated(name, ns_dtype), reference, initial)
    return found


def check_record_optimizer(name: str):
    """parity.measures.Result: both frameworks' optimizers against record `name`'s own, on the
    same parameters and gradients, in fp32 and bf16 Newton-Schulz. FileNotFoundError when its log
    is absent."""
    from jaxgpt_tools.parity.measures import Result

    found = optimizer_gaps(name)
    lr, momentum = record_schedule_values(name)
    counts = {k: sum(kind(key, value.ndim) == k for key, value in initial_params(name).items())
              for k in (MUON, TABLES, SCALARS)}
    bounds = "; ".join(f"{dtype} NS: " + ", ".join(f"{k} <= {b:g}" for k, b in BOUNDS[dtype].items())
                       + f", median Muon matrix <= {MEDIAN_BOUNDS[dtype]:g}" for dtype in NS_DTYPES)
    separation = dtype_gap(name)
    return Result(
        f"Record's code {label(name)}: its own Muon and Adam, {UPDATES} updates (steps {FIRST_STEP}, {FIRST_STEP + 1} "
        f"of {TOTAL_STEPS}) from the same parameters with the same gradients, fp32 and bf16 Newton-Schulz",
        max(g.max_abs for g in found.values()),
        max(rel for g in found.values() for rel, _ in g.relative.values()),
        "each framework's update of every parameter against the record's, relative Frobenius: " + bounds,
        "fp32: every operation agrees to ~1e-7, summation order aside; Newton-Schulz's 5 quintic steps amplify it "
        "(6e-6 measured at 768 x 768) and the stored parameter's rounding adds ulp(p) / |update|. bf16 NS: jaxgpt's "
        "bf16 matmuls accumulate in another order than torch's and one flipped bf16 rounding redraws the iteration's "
        "rounding noise (1.2e-2 for the same map on the same input, the NS 5-step row), while most matrices see no "
        "flip (the median's bound: 10x under what a missing bf16 cast moves every matrix by); Adam is fp32 in both "
        "modes. The fp32 mode changes the record's NS dtype only (its `G.bfloat16()`); bf16 is its code as written, "
        "run eagerly where the record compiled it (the changes below)",
        all(g.passed(dtype) for (_, dtype), g in found.items()) and separation > 10 * MEDIAN_BOUNDS["bfloat16"],
        f"the record's own LR multiplier {lr:.6g} and Muon momentum {momentum:.6g} at step {FIRST_STEP}; optimizer "
        f"states fresh; gradients fp32 standard normal (seed {GRADIENT_SEED}); parameters compared: "
        + ", ".join(f"{count} {k}" for k, count in counts.items())
        + f"; the record's own bf16 vs fp32 NS updates: >= {separation:.1e} on every Muon matrix",
        record_code="; ".join(f"{framework} {dtype} NS: {g.describe()}" for (framework, dtype), g in found.items()),
    )
