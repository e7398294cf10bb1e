"""A saved preset in today's form, as jaxgpt.config_json reads one: torch_ref's checkpoints keep
the config as `dataclasses.asdict(preset)` (torch_ref.run.checkpoint.config_dict), and one saved
before each section had its `lineage` object holds the switches flat (`nest_lineage`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from torch_ref.config import ModelLineage, OptimLineage, TrainLineage


def nest_lineage(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved preset's dict in today's form: lineage switches written flat in their section (the
    form before each section had its `lineage` object) moved under "<section>"/"lineage"."""
    nested = dict(saved)
    for section, lineage_class in (("model", ModelLineage), ("optim", OptimLineage), ("train", TrainLineage)):
        values = saved.get(section)
        if not isinstance(values, dict) or not isinstance(values.get("lineage", {}), dict):
            continue  # not a preset's shape: left as it is, for the caller's check to name
        names = {f.name for f in dataclasses.fields(lineage_class)}
        nested[section] = {k: v for k, v in values.items() if k not in names}
        nested[section]["lineage"] = {**{k: v for k, v in values.items() if k in names}, **values.get("lineage", {})}
    return nested
