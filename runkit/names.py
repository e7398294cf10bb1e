"""Names that become paths are names: `--run-id` (and any other name a run writes under).

A run id names `<out_dir>/logs/<run id>.txt` / `.jsonl`,
`checkpoints/<run id>/`, `profile/<run id>/` and `<tensorboard>/<run id>/`, in both trainers. A
plain name keeps every one of them inside its folder: one path component, no separator, not `.`
or `..`, no leading dot (hidden, and `..`-like), no control characters, at most MAX_NAME_BYTES
bytes of UTF-8 (a file name of 255 bytes must still hold the name and its suffix). `plain_name`
says what is wrong (ValueError); `argparse_name` is the same check as an argparse type, so the
command line refuses a bad name at parse time (exit 2).
"""

from __future__ import annotations

import argparse
import os
import unicodedata
from collections.abc import Callable

MAX_NAME_BYTES = 200
SEPARATORS = frozenset({"/", "\\", os.sep, *([os.altsep] if os.altsep else [])})


def name_problem(text: str) -> str | None:
    """What makes `text` not a plain name, or None when it is one."""
    if not text:
        return "it is empty"
    if any(sep in text for sep in SEPARATORS):
        return "it holds a path separator"
    if text.startswith("."):
        return "it starts with a dot" + (" (a parent folder)" if text.startswith("..") else "")
    if any(unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp") for char in text):
        return "it holds a control character"
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode"
    if size > MAX_NAME_BYTES:
        return f"it is {size} bytes long (at most {MAX_NAME_BYTES})"
    return None


def plain_name(text: str, flag: str = "--run-id") -> str:
    """`text` when it is a plain name; ValueError naming the flag and the problem otherwise."""
    problem = name_problem(text)
    if problem is not None:
        raise ValueError(f"{flag} {text!r} is not a plain name: {problem}; use letters, digits, '-', '_' "
                         "and '.' (not first), with no path separator")
    return text


def argparse_name(flag: str) -> Callable[[str], str]:
    """`plain_name` as an argparse `type`: a bad name is a usage error (exit 2) naming it."""

    def parse(text: str) -> str:
        try:
            return plain_name(text, flag)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = "name"
    return parse
