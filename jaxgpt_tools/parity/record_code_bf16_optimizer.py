"""The bf16 column's optimizer row: #15, #18 and #20's own Muon and Adam over their bf16 models
(record_code_bf16.record_bf16: bf16 tables, #15's bf16 scalars, bf16 Newton-Schulz and Muon
buffer as written) against jaxgpt's and torch_ref's optimizers under the preset's dtype policy
(bf16 tables with bf16 Adam moments, #15's bf16 scalars, bf16 NS), given the same parameters
and the same gradients (each rounded to its parameter's dtype), UPDATES updates from FIRST_STEP
as the fp32 optimizer rows (jaxgpt_tools.parity.record_code_optimizer) take them.
"""

from __future__ import annotations

import functools

import numpy as np

from jaxgpt_tools.common.machine import torch_threads
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity import record_code_optimizer as fp32_rows
from jaxgpt_tools.parity.record_code_bf16 import record_bf16
from jaxgpt_tools.parity.record_code_checks import jax_params, label, torch_ref_model

FIRST_STEP, TOTAL_STEPS, UPDATES = fp32_rows.FIRST_STEP, fp32_rows.TOTAL_STEPS, fp32_rows.UPDATES
MUON, TABLES, SCALARS = fp32_rows.MUON, fp32_rows.TABLES, fp32_rows.SCALARS
# Bounds on ||update_framework - update_record|| / ||update_record|| per parameter: torch_ref runs
# the record's torch ops (torch.optim.Adam on bf16 tables, the same Newton-Schulz) and is held
# bitwise. jaxgpt's Muon matrices as the fp32 rows' bf16-NS bounds (a one-ulp flip redraws one
# matrix's NS rounding noise: worst 5e-2, median 2e-3; measured 1.1e-2 to 1.4e-2, median <= 1.2e-4).
# Its tables: Adam's elementwise math agrees, and an update rounded into a bf16 table entry that
# flips by one ulp (2^-8 of an entry near 1) is 5e-5 of a 64-wide table's update norm (measured
# 9e-6 to 4.9e-5: one or two flips); 1e-3 allows some twenty, where a missing bf16 rounding of the
# tables or their moments moves most entries. Scalars (fp32 for #18/#20, bf16 for #15): measured
# 2.8e-6 and bitwise; 1e-4 (a one-ulp flip of a bf16 scalar is ~0.2 of its update and would fail).
JAXGPT_BOUNDS = {MUON: 5e-2, TABLES: 1e-3, SCALARS: 1e-4}
JAXGPT_MEDIAN_MUON = 2e-3


def gradients(name: str) -> tuple[dict[str, np.ndarray], ...]:
    """The fp32 rows' gradients, each rounded to its parameter's dtype in the record's bf16 model
    (held as fp32 numpy), so that all three sides step on the same values."""
    import torch

    _, model, _ = record_bf16(name)
    names, dtypes = rc.project_names(model), dict(model.named_parameters())
    return tuple({project: torch.from_numpy(grads[project]).to(dtypes[record].dtype).float().numpy()
                  for project, record in names.items()} for grads in fp32_rows.gradients(name))


def initial_params(name: str) -> dict[str, np.ndarray]:
    """The bf16 column's shared state by project name (fp32 numpy of values each dtype holds)."""
    _, model, state = record_bf16(name)
    return {project: state[record].numpy().copy() for project, record in rc.project_names(model).items()}


@functools.cache
def record_updated(name: str) -> dict[str, np.ndarray]:
    """The record's own optimizers over its bf16 model after UPDATES updates: parameters by
    project name (fp32 numpy)."""
    import copy

    loaded, shared, state = record_bf16(name)
    model = copy.deepcopy(shared)  # the column's forward rows keep theirs
    rc.load_state(model, state)
    return fp32_rows.step_own_optimizers(loaded, model, name, gradients(name))


def _preset_optim(name: str):
    from jaxgpt import config as cfg
    from jaxgpt import presets

    return cfg.replace(presets.get_preset(name).optim, ns_dtype="bf16")


@functools.cache
def torch_ref_updated(name: str) -> dict[str, np.ndarray]:
    """torch_ref's optimizers (torch_ref.optim) over its model under the preset's dtype policy."""
    from torch_ref import optim as torch_optim

    optim = _preset_optim(name)
    gpt = torch_ref_model(name, record_bf16(name)[2], "preset_eager")
    optimizers = torch_optim.build_optimizers(gpt, optim)
    schedulers = torch_optim.build_lr_schedulers(optimizers, TOTAL_STEPS, optim)
    names = {key: key for key, _ in gpt.named_parameters()}
    with torch_threads(1):
        fp32_rows.advance_schedulers(schedulers, FIRST_STEP)
        for update, grads in enumerate(gradients(name)):
            fp32_rows.set_grads(gpt, grads, names)
            torch_optim.optimizer_step(gpt, optimizers, schedulers, FIRST_STEP + update, optim)
    return {key: p.detach().float().numpy().copy() for key, p in gpt.named_parameters()}


@functools.cache
def jaxgpt_updated(name: str) -> dict[str, np.ndarray]:
    """jaxgpt.optim.record_optimizer over the preset policy's parameters (bf16 tables with bf16
    Adam moments; #15's bf16 scalars), jitted, after the same updates."""
    import jax
    import jax.numpy as jnp
    import optax

    from jaxgpt import optim as jax_optim
    from jaxgpt import presets

    bf16_scalars = presets.get_preset(name).model.dtype_policy == "bf16_model"
    optimizer = jax_optim.record_optimizer(_preset_optim(name), TOTAL_STEPS, bf16_embeddings=True,
                                           bf16_scalars=bf16_scalars)
    params = jax_params(name, record_bf16(name)[2], "preset_eager")
    opt_state = fp32_rows.at_step(jax.jit(optimizer.init)(params), FIRST_STEP)

    @jax.jit
    def update(params, opt_state, grads):
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    for grads in gradients(name):
        params, opt_state = update(params, opt_state, {key: jnp.asarray(value).astype(params[key].dtype)
                                                       for key, value in grads.items()})
    return {key: np.asarray(value, np.float32) for key, value in params.items()}


@functools.cache
def bf16_optimizer_gaps(name: str) -> dict[str, fp32_rows.UpdateGaps]:
    """{"jaxgpt": ..., "torch_ref": ...}: each framework's updates against the record's own."""
    initial, reference = initial_params(name), record_updated(name)
    return {"jaxgpt": fp32_rows.update_gaps(jaxgpt_updated(name), reference, initial),
            "torch_ref": fp32_rows.update_gaps(torch_ref_updated(name), reference, initial)}


def check_record_bf16_optimizer(name: str):
    """parity.measures.Result: both frameworks' optimizers against record `name`'s own over its
    bf16 model: torch_ref bitwise, jaxgpt within JAXGPT_BOUNDS."""
    from jaxgpt_tools.parity.measures import Result

    found = bf16_optimizer_gaps(name)
    jax_gaps, torch_gaps = found["jaxgpt"], found["torch_ref"]
    torch_exact = torch_gaps.same_names and torch_gaps.max_abs == 0
    jax_ok = (jax_gaps.same_names and jax_gaps.muon_median <= JAXGPT_MEDIAN_MUON
              and all(rel <= JAXGPT_BOUNDS[k] for k, (rel, _) in jax_gaps.relative.items()))
    return Result(
        f"Record's code {label(name)} in bf16: its own Muon and Adam over its bf16 model, {UPDATES} updates "
        f"(steps {FIRST_STEP}, {FIRST_STEP + 1} of {TOTAL_STEPS}) on the same gradients",
        max(g.max_abs for g in found.values()), max(max(r for r, _ in g.relative.values()) for g in found.values()),
        "torch_ref bitwise; jaxgpt: " + ", ".join(f"{k} <= {b:g}" for k, b in JAXGPT_BOUNDS.items())
        + f", median Muon matrix <= {JAXGPT_MEDIAN_MUON:g} (relative norm of each parameter's update)",
        "bf16 tables with bf16 Adam moments, #15's bf16 scalars, bf16 Newton-Schulz into the record's bf16 update "
        "buffer; jaxgpt's bf16 matmuls accumulate in another order than torch's, so its NS noise is redrawn where "
        "a rounding flips (the fp32 optimizer rows' bf16-NS bounds)",
        torch_exact and jax_ok,
        f"torch_ref max|diff| {torch_gaps.max_abs:.1e}",
        record_code=f"jaxgpt: {jax_gaps.describe()}; torch_ref: {torch_gaps.describe()}",
    )
