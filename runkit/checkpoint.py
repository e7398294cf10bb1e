"""What both trainers' checkpoints share besides their format: when a save is due, and the
config a resumed run must keep.

A save is due after every `checkpoint_every` updates and after the last one, never for the state
a run started from (`is_due`). A resumed run must be the run that was saved: its config is
compared field by field with the saved one, the output-only fields of RESUME_IGNORED_FIELDS
aside, and a difference is refused with the list of fields (`config_differences`,
`refuse_config_change`). Where and how each framework writes its steps (orbax folders in jaxgpt,
`<step>.pt` files in torch_ref) is its own run.checkpoint's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

# Fields that may differ between the saved run and the resumed one: where and how often output
# is written, and how many devices share the global batch (the batches, the optimizer state and
# the schedules do not depend on it; only the order of the fp32 sums across devices does, so a
# run saved on 1 device continues on 2 within the parity suite's reordering noise, and back).
RESUME_IGNORED_FIELDS = frozenset({"train.out_dir", "train.checkpoint_every", "train.keep_checkpoints", "train.devices"})


class Cadence(Protocol):
    """What `is_due` reads of a run's train config (either framework's TrainConfig)."""

    @property
    def steps(self) -> int: ...

    @property
    def checkpoint_every(self) -> int: ...


def saves(train: Cadence, save_final: bool) -> bool:
    """Whether the run writes any checkpoint: every checkpoint_every updates, or its final state
    (--save-checkpoint)."""
    return train.checkpoint_every > 0 or save_final


def is_due(step: int, start_step: int, train: Cadence, save_final: bool) -> bool:
    """Save after every checkpoint_every updates and after the last one (never the state the
    run started from: it is already on disk or is the init)."""
    if step == start_step:
        return False
    if step == train.steps:
        return saves(train, save_final)
    return train.checkpoint_every > 0 and step % train.checkpoint_every == 0


def flatten(data: Mapping[str, Any], prefix: str = "", *, lists_as_tuples: bool = False) -> dict[str, Any]:
    """{"section.field": value} of a nested config dict; `lists_as_tuples`: a list value as a
    tuple (torch_ref compares a loaded payload's config with its dataclasses' tuples)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + ".", lists_as_tuples=lists_as_tuples))
        else:
            flat[name] = tuple(value) if lists_as_tuples and isinstance(value, list) else value
    return flat


def config_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable `field: saved -> current` lines for every field of two flat configs that
    differs, ignoring the output-only fields of RESUME_IGNORED_FIELDS (a field one of them lacks
    shows as `<absent>`). Empty when the configs agree."""
    lines = []
    for name in sorted(saved.keys() | current.keys()):
        if name in RESUME_IGNORED_FIELDS:
            continue
        before, after = saved.get(name, "<absent>"), current.get(name, "<absent>")
        if before != after:
            lines.append(f"{name}: {before!r} -> {after!r}")
    return lines


def refuse_config_change(differences: Sequence[str], where: object) -> None:
    """ValueError listing `differences` (config_differences') when there are any: the checkpoint
    at `where` was saved under another config."""
    if differences:
        raise ValueError(f"cannot resume from {where}: it was saved by a run with a different config; "
                         "differing fields (saved -> now):\n  " + "\n  ".join(differences))
