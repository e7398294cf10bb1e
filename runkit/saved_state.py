"""The fields of a run's saved state, checked alike by both trainers before either reads one.

jaxgpt's orbax `meta` item (jaxgpt.run.saved_state.meta_problem) and torch_ref's `--resume`
payload (torch_ref.run.saved_state.resume_problem) hold the same state besides their arrays: a
`step`, a `data_position` of counts and a `config` of three SECTIONS whose checkpoint CADENCE a
resumed run keeps. A damaged or hand-edited one is refused with one line naming the first field
that is not what a run wrote (`count_problem`, the value as `shown`).
"""

from __future__ import annotations

from typing import Any

SECTIONS = ("model", "optim", "train")
CADENCE = {"checkpoint_every": 0, "keep_checkpoints": 1}  # the fields a resumed run keeps, each's least value


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
