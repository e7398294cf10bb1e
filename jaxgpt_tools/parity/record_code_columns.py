"""The record's-code column of the other rows (jaxgpt_tools.parity.checks): filled where the row's
own setting runs in the record's code (jaxgpt_tools.parity.record_code), else why not."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from jaxgpt_tools.common.machine import torch_threads
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity import record_optim
from jaxgpt_tools.parity.record_code_checks import EOT, record_batch
from jaxgpt_tools.parity.record_code_forward import gaps
from jaxgpt_tools.parity.record_logs import check_logs, logs_required

NOT_FILLED = {
    "ns_one_iteration": "not filled: one iteration from a given bf16 iterate has no counterpart in the record's code "
                        "(its function always starts from G); the 5-step rows carry the column",
    "record_shape": "not filled: the record's code at these shapes would hold another 1.1 GB model and its gradients; "
                    "the #20 rows \"Record's code #20 record\" compare its code at the miniature",
    "trajectory": "not filled: the row runs the two trainers on their own data streams (the records' loaders need "
                  "their shards and process groups) and a 4-layer miniature that #18's and #20's code cannot build; the "
                  "\"Record's code ... training\" rows run each record's own optimizers and schedules",
}


def ns_column(steps: int, fp32: bool, seed: int, outputs: dict[str, dict[str, np.ndarray]]) -> tuple[str, bool]:
    """(text, within the row's bound) of both frameworks' `steps`-step Newton-Schulz `outputs`
    ({framework: {NS_SHAPES name: result}}, each from the fp32 standard normal matrix of `seed`)
    against #20's own zeropower_via_newtonschulz5 (run eagerly where the record compiled it; bf16
    as written or fp32) on the same
    matrices; the bound is the row's own (relative Frobenius 2e-2 in bf16, 1e-5 in fp32)."""
    import torch

    from jaxgpt_tools.parity.measures import NS_SHAPES, rel_norm

    loaded = rc.load("record", EOT)
    worst = dict.fromkeys(outputs, 0.0)
    with record_optim.newton_schulz_dtype(loaded, "float32" if fp32 else "bfloat16"), torch_threads(1):
        for name, shape in NS_SHAPES.items():
            g = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
            own = loaded.module.zeropower_via_newtonschulz5(torch.from_numpy(g), steps).float().numpy()
            for framework, results in outputs.items():
                worst[framework] = max(worst[framework], rel_norm(results[name], own))
    bound = 1e-5 if fp32 else 2e-2
    text = "against #20's own function (eager; the record compiled it): " + ", ".join(f"{fw} {rel:.2e}" for fw, rel in worst.items())
    return text, max(worst.values()) <= bound


def lineage_column(name: str, state: dict, inputs: np.ndarray, targets: np.ndarray, window: int | None,
                   outputs: dict[str, tuple[float, np.ndarray, dict]]) -> tuple[str, bool]:
    """(text, within the row's fp32 bounds) of the frameworks' fp32 `outputs` ({framework: (loss,
    logits, grads by project name)}) against record `name`'s own code on the same weights (`state`:
    torch_ref's state dict), one (T,) sequence, at `window` (the record's form: None for #8/#9)."""
    from jaxgpt_tools.parity.measures import lineage_model_config

    config = lineage_model_config(name, "fp32")
    loaded = rc.load(name, config.eot_id)
    model = rc.build_model(loaded, rc.Dims(config.vocab_size, config.num_layers, config.num_heads, config.model_dim))
    names = rc.project_names(model)
    rc.load_state(model, {record: state[project] for project, record in names.items()})
    with torch_threads(1):
        reference = rc.forward(loaded, model, *record_batch(name, inputs[None], targets[None]), window)
    found = {framework: gaps(reference, names, *out) for framework, out in outputs.items()}
    text = f"against #{rc.RECORD_LOGS[name].number}'s own code: " + "; ".join(
        f"{framework}: {g.describe()}" for framework, g in found.items())
    return text, all(g.passed for g in found.values())


def column(fill: Callable[[], tuple[str, bool]]) -> tuple[str, bool]:
    """`fill()`, or ("not run: <why>", True) when a record's log is absent (the row then stands on
    its two-framework comparison alone); with $JAXGPT_REQUIRE_UPSTREAM_LOGS=1 the absent log raises
    record_logs.RequiredLogsMissing instead, naming every missing log (record_logs.check_logs)."""
    try:
        return fill()
    except FileNotFoundError as missing:
        if check_logs() is None and logs_required():  # the logs are there: another file is missing
            raise
        return f"not run: {missing}", True


def not_filled(row: str) -> str:
    """The column's text of a row that cannot have it (NOT_FILLED[row])."""
    return NOT_FILLED[row]


def record_column(fill: Callable[..., tuple[str, bool]], *args) -> tuple[str, bool]:
    """The record's-code column of a row, `fill(*args)` (`ns_column`, `lineage_column`); "not run"
    and True when a record's log is absent, an error when the logs are required (`column`)."""
    return column(functools.partial(fill, *args))
