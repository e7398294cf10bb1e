"""What a `--resume` checkpoint must hold before a run reads it.

jaxgpt.run.saved_state's concept for torch_ref's `.pt` payloads (torch_ref.run.checkpoint's
docstring): `step`, `data_position` {shard_index, pos, batches}, `config` {model, optim, train},
`optimizers` and `schedulers`. `resume_problem` refuses a damaged or hand-edited one up front
with one line, its fields checked by runkit.saved_state as jaxgpt's are
(torch_ref.run.checkpoint.restore then turns whatever torch raises on a payload that does not
fit this run into one ValueError naming the file).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from runkit.saved_state import CADENCE, SECTIONS, count_problem, shown

RESTORE_ERRORS = (KeyError, TypeError, ValueError, RuntimeError, IndexError, AttributeError)


def plain(value: Any) -> bool:
    """A config value as a run saves one: None, a switch, a number, a name, or a list or tuple
    of them (no tensor: comparing one with the run's config has no single answer)."""
    if isinstance(value, (list, tuple)):
        return all(plain(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def plain_field(name: str, value: Any) -> bool:
    """A saved section's field: `plain`, or its `lineage`, a dict of plain named switches."""
    if name == "lineage" and isinstance(value, dict):
        return all(isinstance(key, str) and plain(item) for key, item in value.items())
    return plain(value)


def resume_problem(payload: dict[str, Any]) -> str | None:
    """What makes a checkpoint dict (its 'model' already checked) unusable for --resume, or None."""
    missing = [key for key in ("config", "step", "optimizers", "schedulers", "data_position") if key not in payload]
    if missing:
        return f"holds no {missing[0]!r}: it has weights only (written by the record or an older torch_ref)"
    position, config = payload["data_position"], payload["config"]
    if not isinstance(position, dict) or "shard_index" not in position or "pos" not in position:
        return f"has a data_position ({shown(position)}) without shard_index and pos"
    if not isinstance(config, dict) or not all(isinstance(config.get(name), dict) for name in SECTIONS):
        return f"has a config that is not a dict of {list(SECTIONS)} dicts"
    if not all(isinstance(key, str) for name in SECTIONS for key in config[name]):
        return "has a config whose field names are not all names"
    if (field := next((f"{section}.{key}" for section in SECTIONS for key, value in config[section].items()
                       if not plain_field(key, value)), None)) is not None:
        return f"has a config whose {field} is not a number, a name, a switch or a list of them"
    if not isinstance(payload["optimizers"], list) or not isinstance(payload["schedulers"], list):
        return "has optimizers or schedulers that are not lists"
    problems = [count_problem(payload["step"], "step"),
                *(count_problem(position.get(name, 0), f"data_position.{name}") for name in ("shard_index", "pos",
                                                                                           "batches")),
                *(count_problem(config["train"][name], f"config.train.{name}", least)
                  for name, least in CADENCE.items() if name in config["train"])]
    problems.append(expanded_tensor_problem(payload))
    return next((problem for problem in problems if problem is not None), None)


def expanded_tensor_problem(node: Any, where: str = "") -> str | None:
    """The first tensor anywhere in `node` (dicts, lists, tuples) that claims more elements than
    its storage holds (an expanded tensor: loading it into an optimizer copies it whole), or None."""
    if isinstance(node, Tensor):
        if node.numel() * node.element_size() > node.untyped_storage().nbytes():
            return f"holds at {where or 'the top'} a tensor of shape {tuple(node.shape)} over a storage of " \
                   f"{node.untyped_storage().nbytes()} bytes (an expanded tensor)"
        return None
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, (list, tuple)) else ()
    for key, value in items:
        if (problem := expanded_tensor_problem(value, f"{where}.{key}" if where else str(key))) is not None:
            return problem
    return None
