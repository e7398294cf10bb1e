"""The flag types both trainers' command lines share: a switch (`parse_bool`) and the
`--profile START:STOP` window (`parse_profile_window`). Each trainer's run.cli declares its own
flags with them."""

from __future__ import annotations

import argparse


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_profile_window(text: str) -> tuple[int, int]:
    """"START:STOP" (or one step "S") -> (START, STOP), train-line step numbers, both included."""
    start, sep, stop = text.partition(":")
    try:
        window = (int(start), int(stop)) if sep else (int(text), int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP (train-line step numbers, e.g. 2:3), got {text!r}") from None
    if not 1 <= window[0] <= window[1]:
        raise argparse.ArgumentTypeError(f"need 1 <= START <= STOP (steps count from 1, as the train lines), got {text!r}")
    return window
