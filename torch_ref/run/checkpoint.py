"""torch_ref's training checkpoints: one torch file per saved step, written atomically.

A checkpoint is the record's layout {"model": state_dict, "optimizers": [adam, muon], "step"}
plus what an exact resume needs: "schedulers" (the LambdaLR states), "data_position"
{"shard_index", "pos"} of the next batch, and "config" (the run's Preset as a dict). `step`
counts the updates already applied, so a run resumed from step s continues with iteration s.

A run's checkpoint folder (`<out_dir>/checkpoints/<run id>/`, or the `--resume` folder) holds
`<step>.pt` files; each is written to a hidden temporary file in the same folder and renamed
into place, so a file with a step name is always complete, and only the newest
`keep_checkpoints` are kept. Written from the spec and jaxgpt's conventions; imports no jaxgpt.
When a save is due and the config a resume must keep are both trainers' (runkit.checkpoint).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

import runkit.checkpoint
import runkit.full_disk
import torch_ref.config as cfg
from torch_ref import config_json
from torch_ref.muon import Muon
from torch_ref.run.claim import checkpoint_directory as checkpoint_directory  # where it is decided, before torch
from torch_ref.run.cli import RunOptions
from torch_ref.run.convert import read_checkpoint, strip_compile_prefix
from torch_ref.run.saved_state import RESTORE_ERRORS

STEP_FILE = re.compile(r"^(\d+)\.pt$")
TMP_MARKER = ".tmp-"  # `.<name>.tmp-<pid>`: a write that never finished (the process was killed)


def write_atomically(payload: dict[str, Any], path: str | os.PathLike) -> Path:
    """torch.save into a temporary file beside `path`, then rename it over `path`. A failed write
    is CheckpointSaveError naming the payload's step, its temporary file removed (or said why
    not). torch.save writes through a Python file object: given a path, its own writer reports a
    full disk as `unexpected pos 576 vs 534`, losing the OS error (runkit.full_disk reads it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{TMP_MARKER}{os.getpid()}")
    try:
        with open(tmp, "wb") as file:
            torch.save(payload, file)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as error:  # torch.save's C++ writer raises RuntimeError
        raise CheckpointSaveError(payload.get("step"), path, error,
                                  runkit.full_disk.remove_partial([tmp], "file")) from error
    finally:
        tmp.unlink(missing_ok=True)  # an interrupted write's file (already gone after a failure)
    return path


# ---------------------------------------------------------------------------------------------
# The folder of a run's step files


def step_files(directory: Path) -> dict[int, Path]:
    """{step: path} of the finished step files in `directory`."""
    return {int(m[1]): path for path in directory.iterdir() if (m := STEP_FILE.match(path.name))}


def leftover_tmp_files(directory: Path) -> list[Path]:
    """Temporary files of saves that never finished: never read, reported at resume."""
    return sorted(path for path in directory.iterdir() if TMP_MARKER in path.name)


class CheckpointSaveError(OSError):
    """A step file that could not be written (no space, permission lost): the run stops on it;
    the previous step files are untouched, the partial temporary file is removed (`partial` says
    so, or why not) and no partial file keeps a step name. A full disk is said in plain words
    (runkit.full_disk), with the size of one checkpoint."""

    def __init__(self, step: int | None, path: Path, cause: BaseException, partial: str = "") -> None:
        steps = step_files(path.parent) if path.parent.is_dir() else {}
        size = runkit.full_disk.size_on_disk(steps[max(steps)]) if steps else 0
        at_step = f"of step {step} " if step is not None else ""
        super().__init__(runkit.full_disk.save_failure(f"saving the checkpoint {at_step}to {path}", cause, partial=partial,
                                                       checkpoint_size=size, where=where_to_resume(path.parent)))


def where_to_resume(directory: Path | None) -> str:
    """One sentence naming the newest complete step file in `directory` (None: the run writes
    no step files), as the errors that stop a run end."""
    if directory is None:
        return "This run writes no step checkpoints."
    steps = step_files(directory) if directory.is_dir() else {}
    if not steps:
        return f"No checkpoint was completed in {directory}."
    return f"The newest complete checkpoint is step {max(steps)} in {directory} (continue with --resume {directory})."


def state_is_finite(model: nn.Module, optimizers: tuple[torch.optim.Optimizer, ...], group: Any | None) -> bool:
    """Whether the parameters and every floating-point optimizer state are free of NaN and inf on
    every rank (a finite loss does not prove finite gradients); one all-reduce over the CPU
    `group` when several ranks run. Called before a save, which waits for the device anyway."""
    tensors = [*model.parameters(), *(value for opt in optimizers for state in opt.state.values()
                                      for value in state.values() if torch.is_tensor(value) and value.is_floating_point())]
    finite = torch.stack([torch.isfinite(tensor).all() for tensor in tensors]).all().to("cpu", torch.int32)
    if group is not None:
        dist.all_reduce(finite, op=dist.ReduceOp.MIN, group=group)
    return bool(finite)


def all_saved(saved: bool, group: Any | None) -> bool:
    """Whether rank 0's write succeeded, known on every rank (one all-reduce over the CPU
    `group`), so that a failed save stops every rank at the same step."""
    if group is None:
        return saved
    flag = torch.tensor([int(saved)], dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
    return bool(flag)


def save_step(directory: Path, step: int, payload: dict[str, Any], keep: int) -> Path:
    """Write `<directory>/<step>.pt` atomically, then delete all but the newest `keep` steps;
    CheckpointSaveError (the older files kept) when the write fails."""
    path = write_atomically(payload, directory / f"{step}.pt")  # CheckpointSaveError naming payload["step"]
    steps = step_files(directory)
    for old in sorted(steps)[:-keep]:
        steps[old].unlink(missing_ok=True)
    return path


def resume_file(resume: str | os.PathLike) -> Path:
    """The checkpoint file `--resume` names: the file itself, or the newest `<step>.pt` of a
    folder (temporary files of unfinished saves are never candidates)."""
    path = Path(resume)
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"--resume checkpoint not found: {path}")
    steps = step_files(path)
    if not steps:
        raise FileNotFoundError(f"no checkpoint found in {path} (expected files named <step>.pt)")
    return steps[max(steps)]


def read_resume(options: RunOptions) -> tuple[dict[str, Any] | None, Path | None]:
    """(the --resume checkpoint, its file), or (None, None) without --resume."""
    if options.resume is None:
        return None, None
    path = resume_file(options.resume)
    return read_checkpoint(path, "--resume checkpoint"), path


# ---------------------------------------------------------------------------------------------
# What a checkpoint holds


def checkpoint_payload(model: nn.Module, optimizers: tuple[torch.optim.Optimizer, ...], schedulers: Sequence[Any],
                       step: int, position: tuple[int, int], preset: cfg.Preset, control: Any | None,
                       batches: int = 0) -> dict[str, Any]:
    """The record's {'model', 'optimizers', 'step'} and what resuming needs (this module's
    docstring). A collective when several ranks run (Muon's momentum buffers are gathered)."""
    return dict(
        step=step,
        model=model.state_dict(),
        optimizers=optimizer_states(optimizers, control),
        schedulers=[sched.state_dict() for sched in schedulers],
        data_position={"shard_index": position[0], "pos": position[1], "batches": batches},
        config=config_dict(preset),
    )


def config_dict(preset: cfg.Preset) -> dict[str, Any]:
    return dataclasses.asdict(preset)


def _flatten(data: dict[str, Any]) -> dict[str, Any]:
    return runkit.checkpoint.flatten(data, lists_as_tuples=True)  # a saved list is compared with a dataclass's tuple


def refuse_config_change(saved: dict[str, Any], current: dict[str, Any], path: Path) -> None:
    """ValueError listing `field: saved -> now` for every field that differs (the output-only
    fields of runkit.checkpoint.RESUME_IGNORED_FIELDS aside): a resumed run must be the run that
    was saved."""
    # A field the saved config lacks (added since) had its default then: compare that.
    old, new = {**_flatten(config_dict(cfg.Preset())), **_flatten(config_json.nest_lineage(saved))}, _flatten(current)
    runkit.checkpoint.refuse_config_change(runkit.checkpoint.config_differences(old, new), path)


def keep_saved_cadence(preset: cfg.Preset, saved: dict[str, Any], overridden: tuple[str, ...]) -> cfg.Preset:
    """A resumed run keeps the saved checkpoint_every / keep_checkpoints unless given again."""
    saved_train = saved["train"]
    kept = {name: saved_train[name] for name in ("checkpoint_every", "keep_checkpoints")
            if name not in overridden and name in saved_train}
    return dataclasses.replace(preset, train=cfg.replace(preset.train, **kept))


def _owned(muon: Muon) -> list[tuple[int, torch.Tensor]]:
    """(index in Muon's state_dict, param) of the parameters this rank updates: in each group,
    every world_size-th parameter starting at its rank (torch_ref.muon's chunking)."""
    owned, index = [], 0
    for group in muon.param_groups:
        for i, param in enumerate(group["params"]):
            if i % muon.world_size == muon.rank:
                owned.append((index, param))
            index += 1
    return owned


def optimizer_states(optimizers: tuple[torch.optim.Optimizer, ...], group: Any | None) -> list[dict[str, Any]]:
    """The optimizers' state dicts, whole on every rank. Adam's state is the same on all ranks;
    Muon's momentum buffers live on the rank that updates each matrix, so they are gathered
    (over the CPU `group`; None: one process)."""
    states = [opt.state_dict() for opt in optimizers]
    muon = next((opt for opt in optimizers if isinstance(opt, Muon)), None)
    if group is None or muon is None:
        return states
    muon_state = states[optimizers.index(muon)]
    mine = {index: {k: v.cpu() for k, v in muon_state["state"].get(index, {}).items()} for index, _ in _owned(muon)}
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, mine, group=group)
    muon_state["state"] = {index: state for part in gathered for index, state in part.items() if state}
    return states


def load_optimizer_states(optimizers: tuple[torch.optim.Optimizer, ...], states: list[dict[str, Any]]) -> None:
    """Inverse of `optimizer_states`; each rank keeps Muon state only for the matrices it updates."""
    if len(states) != len(optimizers):
        raise ValueError(f"the checkpoint holds {len(states)} optimizer states, the run has {len(optimizers)}")
    for opt, state in zip(optimizers, states, strict=True):
        opt.load_state_dict(state)
        if isinstance(opt, Muon) and opt.world_size > 1:
            owned = {id(param) for _, param in _owned(opt)}
            for param in [p for p in opt.state if id(p) not in owned]:
                del opt.state[param]


def restore(model: nn.Module, optimizers: tuple, schedulers: list, payload: dict[str, Any],
            path: Path | None) -> tuple[int, tuple[int, int], int]:
    """Load a --resume payload into the run's model, optimizers and LR schedulers; returns (step,
    (shard_index, pos), batches served). One ValueError naming `path` when it does not fit."""
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
