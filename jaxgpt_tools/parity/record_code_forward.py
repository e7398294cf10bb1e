"""The records'-code forward rows: both frameworks' fp32 logits, loss and gradients against each
record's own code (jaxgpt_tools.parity.record_code) in the setting of
jaxgpt_tools.parity.record_code_checks."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from jaxgpt_tools.common.machine import torch_threads
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity.record_code_checks import (
    EOT,
    FORWARD_DOCUMENT_STARTS,
    LAYERS,
    SEQ_LEN,
    WINDOWS,
    dims,
    documents_tokens,
    framework_window,
    initial_state,
    jax_loss_logits_grads,
    jax_params,
    label,
    record_batch,
    torch_ref_model,
)

# Bounds as the lineage rows of parity_checks (fp32: summation order and libm ulps only).
LOGITS_REL, LOSS_REL, MATRIX_REL, SCALAR_REL = 1e-5, 1e-6, 1e-4, 1e-3


@dataclass(frozen=True)
class Gaps:
    """One framework against the record's code, worst over the windows: logits max|diff| (and
    over the record's max|logit|), loss relative, worst matrix and scalar gradient max|diff| over
    the record's max|grad| (with the parameter), exact zeros zero in both, same names."""

    logits_abs: float
    logits_rel: float
    loss_rel: float
    matrix_rel: tuple[float, str]
    scalar_rel: tuple[float, str]
    zeros_agree: bool
    same_names: bool

    @property
    def passed(self) -> bool:
        return (self.same_names and self.zeros_agree and self.logits_rel < LOGITS_REL and self.loss_rel < LOSS_REL
                and self.matrix_rel[0] < MATRIX_REL and self.scalar_rel[0] < SCALAR_REL)

    def describe(self) -> str:
        return (f"logits {self.logits_rel:.1e} of max|logit|, loss {self.loss_rel:.1e}, gradients {self.matrix_rel[0]:.1e} "
                f"({self.matrix_rel[1]}) / scalars {self.scalar_rel[0]:.1e} ({self.scalar_rel[1] or '-'})")


def gaps(reference: rc.Output, names: dict[str, str], loss: float, logits: np.ndarray, grads: dict) -> Gaps:
    """A framework's (loss, logits, grads by project name) against the record's Output (grads by
    record name; `names`: project name -> record name)."""
    from jaxgpt_tools.parity.measures import gradient_gaps

    assert reference.grads is not None, "the record's forward ran without its backward"
    theirs = {project: reference.grads[record] for project, record in names.items()}
    same_names, zeros_agree, worst = gradient_gaps(theirs, {key: np.asarray(value) for key, value in grads.items()})
    logits_abs = float(np.abs(np.asarray(logits, np.float32) - reference.logits).max())
    return Gaps(logits_abs, logits_abs / float(np.abs(reference.logits).max()),
                abs(loss - reference.loss) / abs(reference.loss), worst["matrix"], worst["scalar"], zeros_agree, same_names)


def worst(many: list[Gaps]) -> Gaps:
    """The worst of each measure over several windows."""
    return Gaps(max(g.logits_abs for g in many), max(g.logits_rel for g in many), max(g.loss_rel for g in many),
                max(g.matrix_rel for g in many), max(g.scalar_rel for g in many),
                all(g.zeros_agree for g in many), all(g.same_names for g in many))


def torch_ref_output(gpt, inputs: np.ndarray, targets: np.ndarray, window: int) -> tuple[float, np.ndarray, dict]:
    """torch_ref's (loss, logits (T, Vp), grads by name) on one (T,) sequence."""
    from jaxgpt_tools.parity.measures import torch_forward

    gpt.zero_grad(set_to_none=True)
    return torch_forward(gpt, inputs, targets, window, backward=True)


@functools.cache
def forward_gaps(name: str) -> dict[str, Gaps]:
    """{"jaxgpt": ..., "torch_ref": ...}: each framework's worst gaps to the record's own code over
    WINDOWS[name] and the FORWARD_DOCUMENT_STARTS sequences (each one row for #8/#9), from
    initial_state(name)."""
    import jax.numpy as jnp

    loaded, state = rc.load(name, EOT), initial_state(name)
    record_model = rc.build_model(loaded, dims(name))
    rc.load_state(record_model, state)
    names = rc.project_names(record_model)
    gpt, params, run = torch_ref_model(name, state), jax_params(name, state), jax_loss_logits_grads(name)
    found: dict[str, list[Gaps]] = {"jaxgpt": [], "torch_ref": []}
    sequences = [documents_tokens(starts, seed) for seed, starts in enumerate(FORWARD_DOCUMENT_STARTS.values(), 3)]
    for (inputs, targets), window in itertools.product(sequences, WINDOWS[name]):
        with torch_threads(1):
            reference = rc.forward(loaded, record_model, *record_batch(name, inputs[None], targets[None]), window)
            torch_out = torch_ref_output(gpt, inputs, targets, framework_window(name, window))
        found["torch_ref"].append(gaps(reference, names, *torch_out))
        loss, logits, grads = run(params, jnp.asarray(inputs)[None], jnp.asarray(targets)[None],
                                  jnp.int32(framework_window(name, window)))
        found["jaxgpt"].append(gaps(reference, names, float(loss), np.asarray(logits), grads))
    return {framework: worst(measured) for framework, measured in found.items()}


def check_record_forward(name: str):
    """parity.measures.Result: both frameworks' fp32 logits, loss and gradients against record
    `name`'s own code at WINDOWS[name] on the FORWARD_DOCUMENT_STARTS sequences. FileNotFoundError
    when its log is absent."""
    from jaxgpt_tools.parity.measures import Result

    found = forward_gaps(name)
    jax_gaps, torch_gaps = found["jaxgpt"], found["torch_ref"]
    windows = ", ".join("none" if w is None else str(w) for w in WINDOWS[name])
    unit = {"unet-value-embeds": " tokens", "softcap": " blocks", "record": " blocks (W_long)"}.get(name, "")
    return Result(
        f"Record's code {label(name)}: fp32 logits, loss, gradients at windows {windows}{unit} "
        f"on {len(FORWARD_DOCUMENT_STARTS)} multi-document sequences ({LAYERS[name]} layers, D 64, T {SEQ_LEN})",
        max(jax_gaps.logits_abs, torch_gaps.logits_abs),
        max(g.logits_rel for g in (jax_gaps, torch_gaps)),
        f"each framework against the record's code: logits < {LOGITS_REL:g} of max|logit|, loss rel < {LOSS_REL:g}, "
        f"gradients < {MATRIX_REL:g} (matrices) / {SCALAR_REL:g} (scalars) of max|grad|, exact zeros zero in both",
        "fp32 on both sides: summation order and libm ulps only (the lineage rows' bounds); the record's "
        "explicit bf16 roundings (NUMERICS.md) are in all three. Documents start at "
        + "; ".join(", ".join(map(str, starts)) for starts in FORWARD_DOCUMENT_STARTS.values())
        + " (full blocks, documents starting and ending inside a block, on its edges, one token long)",
        jax_gaps.passed and torch_gaps.passed,
        f"jaxgpt vs torch_ref in the record's-code column; changes to the script: {len(rc.load(name, EOT).applied)} "
        "(record_code.changes)",
        record_code=f"jaxgpt: {jax_gaps.describe()}; torch_ref: {torch_gaps.describe()}",
    )
