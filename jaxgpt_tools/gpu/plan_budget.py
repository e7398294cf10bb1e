"""The device plan's time, checked before anything runs: the plan's deadline against the device
tool's limit on one command, and the selected steps' caps against the deadline.

The steps run in priority order and each gets min(its cap, the time left), so a step late in the
order runs on whatever the steps before it leave. What the worst case (every earlier step using
its whole cap) guarantees each step is said before the lease's minutes are spent: a cap the
deadline cannot hold is shrunk in priority order (the later steps lose first) and reported, or,
with `strict`, refused with one line.
"""

from __future__ import annotations

from dataclasses import dataclass

# The device tool ends one command at 600 s; the plan's Python start before its clock and the
# copy of $OUT after it need the rest (a start of python3 with the repository: ~1 s; $OUT's 8
# files of at most 16 MiB: seconds).
TOOL_COMMAND_LIMIT_S = 600.0
TOOL_START_AND_COPY_S = 20.0


class PlanRefused(ValueError):
    """The plan cannot keep its promises in the time given (the message says which and why)."""


@dataclass(frozen=True)
class Budget:
    """`usable_s`: the deadline less the margin kept for the last publish; per step (in order) its
    cap and the seconds the worst case still leaves it (`sure`); `notes`: one line per step
    whose cap the worst case does not hold."""

    usable_s: float
    caps: dict[str, float]
    sure: dict[str, float]
    notes: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"usable_s": self.usable_s, "caps_s": self.caps, "sure_s": self.sure, "notes": list(self.notes),
                "caps_sum_s": sum(self.caps.values())}


def check_deadline(deadline_s: float, margin_s: float) -> None:
    """PlanRefused when the deadline cannot fit one device command, or leaves nothing after the margin."""
    most = TOOL_COMMAND_LIMIT_S - TOOL_START_AND_COPY_S
    if deadline_s > most:
        raise PlanRefused(f"--deadline {deadline_s:.0f} s is past the {most:.0f} s one device command can hold "
                          f"(the tool ends a command at {TOOL_COMMAND_LIMIT_S:.0f} s; {TOOL_START_AND_COPY_S:.0f} s "
                          "go to the plan's start and the copy of $OUT)")
    if deadline_s <= margin_s:
        raise PlanRefused(f"--deadline {deadline_s:.0f} s leaves nothing after the {margin_s:.0f} s kept for the "
                          "last publish")


def fit(caps: dict[str, float], deadline_s: float, margin_s: float, strict: bool = False) -> Budget:
    """The worst case of `caps` (steps in run order) under the deadline; PlanRefused when the
    deadline itself is refused (`check_deadline`), or when `strict` and a cap is not held."""
    check_deadline(deadline_s, margin_s)
    usable = deadline_s - margin_s
    sure, notes, before = {}, [], 0.0
    for name, cap in caps.items():
        sure[name] = max(0.0, min(cap, usable - before))
        if sure[name] <= 0:
            notes.append(f"{name}: cap {cap:.0f} s, runs only on the time the steps before it leave "
                         f"(their caps take all {usable:.0f} s)")
        elif sure[name] < cap:
            notes.append(f"{name}: cap {cap:.0f} s shrunk to {sure[name]:.0f} s in the worst case (the steps "
                         f"before it may take {before:.0f} s of {usable:.0f}); more if they end early")
        before += cap
    if strict and notes:
        raise PlanRefused(f"the caps sum to {before:.0f} s against {usable:.0f} s before the deadline: "
                          + "; ".join(notes) + ". Lower a --cap, drop a step from --only, or leave out "
                          "--strict-caps to let the later steps run on the time left")
    return Budget(usable, dict(caps), sure, tuple(notes))
