"""`--profile START:STOP` in both trainers: the window names train-line steps (step S is the
update whose line reads `step:S/N`), parsed by runkit.cli.parse_profile_window and checked here
against the steps a run takes. The trace itself is each framework's (its run.profiling)."""

from __future__ import annotations


def check_window(window: tuple[int, int] | None, start_step: int, total_steps: int) -> None:
    """--profile names only steps this run takes (a resumed run starts after `start_step`)."""
    if window is not None and not start_step < window[0] <= window[1] <= total_steps:
        raise ValueError(f"--profile {window[0]}:{window[1]} names steps this run does not take "
                         f"(it logs step:{start_step + 1} .. step:{total_steps})")
