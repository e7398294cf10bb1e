"""A preset as JSON and back: the form a checkpoint stores its config in (jaxgpt.run.checkpoint)
and the run header prints; the older form with the lineage switches flat in each section is read
too. Imports no jax."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from jaxgpt.config import ModelConfig, ModelLineage, OptimConfig, OptimLineage, Preset, TrainConfig, TrainLineage


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


def config_to_json(preset: Preset) -> dict[str, Any]:
    """The preset as plain JSON data (tuples become lists), the form stored in checkpoints."""
    return json.loads(json.dumps(dataclasses.asdict(preset)))


def preset_from_json(data: dict[str, Any]) -> Preset:
    """Inverse of `config_to_json` (lists turn back into the tuples the dataclasses expect);
    reads the older form with flat switches too (`nest_lineage`)."""

    def build(cls, values: dict[str, Any]):
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        return cls(**kwargs)

    data = nest_lineage(data)

    def section(cls, lineage_cls, values: dict[str, Any]):
        return build(cls, {**values, "lineage": build(lineage_cls, values["lineage"])})

    return Preset(
        model=section(ModelConfig, ModelLineage, data["model"]),
        optim=section(OptimConfig, OptimLineage, data["optim"]),
        train=section(TrainConfig, TrainLineage, data["train"]),
    )
