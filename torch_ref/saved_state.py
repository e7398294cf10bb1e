"""What a `--resume` checkpoint must hold before a run reads it, and restoring it in one line.

torch_ref's statement of jaxgpt.saved_state for its `.pt` payloads (torch_ref.checkpoint's
docstring): `step`, `data_position` {shard_index, pos, batches}, `config` {model, optim, train},
`optimizers` and `schedulers`. `resume_problem` refuses a damaged or hand-edited one up front
with one line; `restore` loads model, optimizers and schedulers and turns whatever torch raises
on a payload that does not fit this run into one ValueError naming the file.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from torch import Tensor, nn

SECTIONS = ("model", "optim", "train")
CADENCE = {"checkpoint_every": 0, "keep_checkpoints": 1}  # the fields a resumed run keeps, each's least value
RESTORE_ERRORS = (KeyError, TypeError, ValueError, RuntimeError, IndexError, AttributeError)


def shown(value: Any) -> str:
    """A value as an error line shows it: a short repr of a scalar, else its type's name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)[:80]
    return f"a {type(value).__name__}"


def zip_damage(path: Path) -> str | None:
    """What is wrong with a torch file's zip container, or None (jaxgpt.convert.zip_damage's rule):
    every member is read once and its CRC-32 checked (torch.load does not check them, so a flipped
    bit in a tensor would load as a silently different weight); members written without a CRC
    (0) are not checked; a file that is not a zip is torch.load's to judge."""
    if not zipfile.is_zipfile(path):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            members = [info for info in archive.infolist() if info.CRC != 0 or info.file_size == 0]
            if any(info.compress_type != zipfile.ZIP_STORED for info in members):
                return "a compressed member: torch writes its members stored"
            for info in members:
                with archive.open(info) as member:  # the CRC is compared once the member is read
                    while member.read(1 << 24):
                        pass
    except Exception as error:  # noqa: BLE001 - zipfile raises BadZipFile, EOFError, ValueError, ... on damage
        return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:150]}"
    return None


def count_problem(value: Any, name: str, least: int = 0) -> str | None:
    """Why `value` is not a whole number >= `least` (bools are not counts), or None."""
    if type(value) is not int or value < least:
        return f"{name} is {shown(value)}, not a whole number >= {least}"
    return None


def plain(value: Any) -> bool:
    """A config value as a run saves one: None, a switch, a number, a name, or a list or tuple
    of them (no tensor: comparing one with the run's config has no single answer)."""
    if isinstance(value, (list, tuple)):
        return all(plain(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


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
                       if not plain(value)), None)) is not None:
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


def restore(model: nn.Module, optimizers: tuple, schedulers: list, payload: dict[str, Any],
            path: Path | None) -> tuple[int, tuple[int, int], int]:
    """Load a --resume payload into the run's model, optimizers and LR schedulers; returns (step,
    (shard_index, pos), batches served). One ValueError naming `path` when it does not fit."""
    from torch_ref.checkpoint import load_optimizer_states
    from torch_ref.model import strip_compile_prefix

    try:
        model.load_state_dict(strip_compile_prefix(payload["model"]))
        load_optimizer_states(optimizers, payload["optimizers"])
        if len(payload["schedulers"]) != len(schedulers):
            raise ValueError(f"{len(payload['schedulers'])} LR schedulers saved, the run has {len(schedulers)}")
        for scheduler, state in zip(schedulers, payload["schedulers"], strict=True):
            scheduler.load_state_dict(state)
    except RESTORE_ERRORS as error:
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        raise ValueError(f"--resume checkpoint {path} does not restore into this run ({type(error).__name__}: "
                         f"{first_line})") from None
    position = payload["data_position"]
    return int(payload["step"]), (int(position["shard_index"]), int(position["pos"])), int(position.get("batches", 0))
