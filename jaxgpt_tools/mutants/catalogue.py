"""The whole catalogue, in the order the matrix lists it, and a selection of it by ids."""

from __future__ import annotations

from jaxgpt_tools.mutants.catalogue_model import MODEL_MUTANTS
from jaxgpt_tools.mutants.catalogue_optim import OPTIM_MUTANTS
from jaxgpt_tools.mutants.mutant import Mutant

CATALOGUE: tuple[Mutant, ...] = MODEL_MUTANTS + OPTIM_MUTANTS


def check_unique(mutants: tuple[Mutant, ...]) -> None:
    """Every id once (results are kept by id)."""
    seen: set[str] = set()
    for mutant in mutants:
        if mutant.id in seen:
            raise ValueError(f"mutant id {mutant.id} is used twice in the catalogue")
        seen.add(mutant.id)


def select(ids: str, catalogue: tuple[Mutant, ...] = CATALOGUE) -> tuple[Mutant, ...]:
    """The mutants named in the comma-separated `ids` (all when empty), in catalogue order; an
    unknown id is refused with the known ones' names."""
    wanted = [name.strip() for name in ids.split(",") if name.strip()]
    known = {mutant.id for mutant in catalogue}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ValueError(f"unknown mutant ids {unknown}; known: {sorted(known)}")
    return tuple(m for m in catalogue if not wanted or m.id in wanted)


check_unique(CATALOGUE)
