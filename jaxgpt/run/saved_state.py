"""What a checkpoint's JSON item must hold before a run or the sampler reads it.

The `meta` item of an orbax step folder (jaxgpt.run.checkpoint) is the run's saved state besides its
arrays: `{"step": int, "data_position": {...}, "config": {"model", "optim", "train"}}`. A
damaged or hand-edited one is refused here with one line (`meta_problem`), rather than as a
KeyError or TypeError wherever a field is first used; `saved_preset` reads its config back into
a Preset with the same one-line refusal. The fields' own checks are runkit.saved_state's,
torch_ref's too (torch_ref.run.saved_state checks its `.pt` payloads likewise).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxgpt import config as cfg
from jaxgpt import config_json
from runkit.saved_state import CADENCE, SECTIONS, count_problem, shown


def meta_problem(meta: Any) -> str | None:
    """What makes a checkpoint's meta item unusable, or None: a dict with a count `step`, a
    `data_position` of counts (`shard_index`, `pos`, optional `batches`) and a `config` of the
    three sections, whose checkpoint cadence, kept by a resumed run, is counts too."""
    if not isinstance(meta, dict):
        return f"is a {type(meta).__name__}, not a JSON object"
    missing = [key for key in ("step", "data_position", "config") if key not in meta]
    if missing:
        return f"lacks {missing}"
    position = meta["data_position"]
    if not isinstance(position, dict):
        return f"data_position is {shown(position)}, not an object"
    config = meta["config"]
    if not isinstance(config, dict) or not all(isinstance(config.get(name), dict) for name in SECTIONS):
        return f"config is not an object of {list(SECTIONS)} objects"
    problems = [count_problem(meta["step"], "step"),
                *(count_problem(position.get(name, 0), f"data_position.{name}") for name in ("shard_index", "pos",
                                                                                           "batches")),
                *(count_problem(config["train"][name], f"config.train.{name}", least)
                  for name, least in CADENCE.items() if name in config["train"])]
    if "shard_index" not in position or "pos" not in position:
        problems.insert(0, "data_position lacks shard_index or pos")
    return next((problem for problem in problems if problem is not None), None)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    return {int: "number", float: "number", str: "str", list: "list", dict: "dict"}.get(type(value), "other")


def _optional_fields() -> set[tuple[str, str]]:
    """(section, field) of every config field that may be None (its annotation says so)."""
    classes = {"model": cfg.ModelConfig, "optim": cfg.OptimConfig, "train": cfg.TrainConfig}
    return {(section, field.name) for section, cls in classes.items() for field in dataclasses.fields(cls)
            if "None" in str(field.type)}


def config_type_problem(config: dict[str, Any]) -> str | None:
    """The first field of a saved config whose JSON kind is not its default's (a number for a
    number, a name for a name, a list for a per-layer tuple, true/false for a switch), or None;
    a field that may be None also takes null, and one whose default is None any scalar."""
    defaults, optional = config_json.config_to_json(cfg.Preset()), _optional_fields()
    config = config_json.nest_lineage(config)  # an older form's flat switches are checked where they now live
    groups = [(section, config[section], defaults[section]) for section in SECTIONS]
    groups += [(f"{section}.lineage", config[section]["lineage"], defaults[section]["lineage"]) for section in SECTIONS
               if isinstance(config[section].get("lineage"), dict)]
    for section, saved, default_values in groups:
        for name, value in saved.items():
            if name not in default_values:
                continue  # unknown to this version: preset_from_json names it
            default, kind = default_values[name], _json_kind(value)
            if kind == "NoneType" and (section, name) in optional:
                continue
            if default is None and kind in ("number", "str", "bool"):
                continue
            if kind != _json_kind(default) or (type(default) is int and type(value) is float):
                return f"config.{section}.{name} is {shown(value)}, not a {_json_kind(default)}"
    return None


def saved_preset(config: dict[str, Any], where: str) -> cfg.Preset:
    """The Preset a checkpoint's config item describes; ValueError naming `where` when it does
    not describe one (a field of another kind, a field unknown to this version, a value the
    config refuses)."""
    if (problem := config_type_problem(config)) is not None:
        raise ValueError(f"{where}: its saved config is not a config of this jaxgpt ({problem})")
    try:
        return config_json.preset_from_json(config)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise ValueError(f"{where}: its saved config is not a config of this jaxgpt "
                         f"({type(error).__name__}: {printable(str(error))[:200]})") from None


def printable(text: str) -> str:
    """`text` with every character that is not printable escaped (a field name read from a file
    may hold a line separator such as \x1e: the error stays one line)."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
