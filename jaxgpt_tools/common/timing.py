"""Wall-clock timing of calls: the one timer every benchmark and study uses."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """(seconds, result) of one call of fn, which must block until its result is ready."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def time_calls(fn: Callable[[], Any], repeats: int, *, warmup: int = 0) -> dict[str, Any]:
    """Call fn once (compile + run), `warmup` more times untimed, then `repeats` times (at least
    once); fn must block until its result is ready.

    Returns {"first_s": compile + first run, "median_ms": median of the timed runs, "min_ms",
    "runs_s": the timed runs' seconds in order}.
    """
    first, _ = timed(fn)
    for _ in range(warmup):
        fn()
    runs = [timed(fn)[0] for _ in range(max(repeats, 1))]
    return {"first_s": first, "median_ms": 1e3 * statistics.median(runs), "min_ms": 1e3 * min(runs), "runs_s": runs}
