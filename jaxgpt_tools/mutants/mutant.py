"""What a mutant is: one or more exact source edits, its meaning, its mode and its likely killers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["jaxgpt", "both"]


class StaleMutant(ValueError):
    """A mutant whose snippet no longer occurs exactly once in its file (the source moved on)."""


@dataclass(frozen=True)
class Edit:
    """Replace `snippet`, which must occur exactly once in `path` (relative to the repository), by `replacement`."""

    path: str
    snippet: str
    replacement: str


@dataclass(frozen=True)
class Mutant:
    """A semantic mutant: `edits` applied together.

    mode "jaxgpt" edits jaxgpt alone; "both" applies the same misreading to jaxgpt and torch_ref
    (a shared misreading of the spec, which only a check against the spec or the records' own code
    can kill). `targets` are pytest node ids or paths run first, for speed. `equivalent`, when set,
    says why the mutant is the same program as the original (a survivor that needs no new check).
    """

    id: str
    meaning: str
    mode: Mode
    edits: tuple[Edit, ...]
    targets: tuple[str, ...]
    equivalent: str = ""
    tags: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.edits:
            raise ValueError(f"mutant {self.id}: no edits")
        torch_edits = [e for e in self.edits if e.path.startswith("torch_ref/")]
        if self.mode == "both" and not torch_edits:
            raise ValueError(f"mutant {self.id}: mode 'both' needs an edit of torch_ref")
        if self.mode == "jaxgpt" and torch_edits:
            raise ValueError(f"mutant {self.id}: mode 'jaxgpt' must not edit torch_ref")
        if not self.targets:
            raise ValueError(f"mutant {self.id}: no targeted tests")


def jaxgpt_only(id: str, meaning: str, path: str, snippet: str, replacement: str, targets: tuple[str, ...],
                equivalent: str = "") -> Mutant:
    """A mutant of one jaxgpt file."""
    return Mutant(id, meaning, "jaxgpt", (Edit(path, snippet, replacement),), targets, equivalent)


def both(id: str, meaning: str, jax_edit: tuple[str, str, str], torch_edit: tuple[str, str, str],
         targets: tuple[str, ...], equivalent: str = "") -> Mutant:
    """The same misreading in jaxgpt and torch_ref: one (path, snippet, replacement) each."""
    return Mutant(id, meaning, "both", (Edit(*jax_edit), Edit(*torch_edit)), targets, equivalent)
