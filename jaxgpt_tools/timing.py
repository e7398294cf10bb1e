"""Wall-clock timing of a call: the one timer the benchmarks share."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable


def time_calls(fn: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Call fn once (compile + run), then `repeats` times; fn must block until its result is ready.

    Returns {"first_s": compile + first run, "median_ms": median of the later runs, "min_ms"}.
    """
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    runs = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return {"first_s": first, "median_ms": 1e3 * statistics.median(runs), "min_ms": 1e3 * min(runs)}
