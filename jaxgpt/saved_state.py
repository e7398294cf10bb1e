"""What a checkpoint's JSON item must hold before a run or the sampler reads it.

The `meta` item of an orbax step folder (jaxgpt.checkpoint) is the run's saved state besides its
arrays: `{"step": int, "data_position": {...}, "config": {"model", "optim", "train"}}`. A
damaged or hand-edited one is refused here with one line (`meta_problem`), rather than as a
KeyError or TypeError wherever a field is first used; `saved_preset` reads its config back into
a Preset with the same one-line refusal. torch_ref checks its own `.pt` payloads likewise
(torch_ref.saved_state).
"""

from __future__ import annotations

from typing import Any

from jaxgpt import config as cfg

SECTIONS = ("model", "optim", "train")
CADENCE = {"checkpoint_every": 0, "keep_checkpoints": 1}  # the kept fields, each's least value


def shown(value: Any) -> str:
    """A value as an error line shows it: a short repr of a scalar, else its type's name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)[:80]
    return f"a {type(value).__name__}"


def count_problem(value: Any, name: str, least: int = 0) -> str | None:
    """Why `value` is not a whole number >= `least` (bools are not counts), or None."""
    if type(value) is not int or value < least:
        return f"{name} is {shown(value)}, not a whole number >= {least}"
    return None


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


def saved_preset(config: dict[str, Any], where: str) -> cfg.Preset:
    """The Preset a checkpoint's config item describes; ValueError naming `where` when it does
    not describe one (a field unknown to this version, a value the config refuses)."""
    try:
        return cfg.preset_from_json(config)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise ValueError(f"{where}: its saved config is not a config of this jaxgpt "
                         f"({type(error).__name__}: {str(error)[:200]})") from None
