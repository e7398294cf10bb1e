"""A long run that must not drift (`scripts/soak.py`): host memory, device memory and step time
over 1,000+ steps of the tiny preset, with validation and checkpoints every few steps.

The run is jaxgpt.train's own loop, in this process; a sampler thread records every
`sample_every_s` seconds the host's resident memory (VmRSS), the device's bytes in use (where the
backend reports them: not on the CPU) and the newest step in the run's metrics file. The
summary fits a straight line to each series against the step, from `warmup` steps on (compiling,
the first save and orbax's threads settle in the first steps), and reports its slope per 100
steps with the spread of the samples around the line (the noise a growth must exceed), and
the median step time of each tenth of the run from the train lines' clock.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np


def host_rss_mib() -> float:
    """This process's resident set size in MiB (Linux /proc; ru_maxrss elsewhere, a peak)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    import resource  # noqa: PLC0415 - the fallback only

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def device_mib() -> float | None:
    """Bytes in use on the first local device in MiB; None where the backend keeps no count."""
    import jax  # noqa: PLC0415

    stats = jax.local_devices()[0].memory_stats() or {}
    return stats["bytes_in_use"] / 2**20 if "bytes_in_use" in stats else None


def last_step(metrics: Path) -> int | None:
    """The step of the newest record in a run's metrics JSONL (None before the first)."""
    if not metrics.exists():
        return None
    with metrics.open("rb") as file:
        file.seek(0, 2)
        file.seek(max(0, file.tell() - 4096))
        lines = file.read().decode(errors="replace").strip().splitlines()
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError):
            continue
    return None


@dataclass(frozen=True)
class Sample:
    seconds: float  # since the run started
    step: int | None
    host_rss_mib: float
    device_mib: float | None


class Sampler:
    """A daemon thread that appends a Sample every `every_s` seconds until stopped."""

    def __init__(self, metrics: Path, every_s: float) -> None:
        self.samples: list[Sample] = []
        self._metrics, self._every_s = metrics, every_s
        self._stop = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _sample(self) -> None:
        self.samples.append(Sample(time.monotonic() - self._start, last_step(self._metrics), host_rss_mib(), device_mib()))

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self._sample()


def growth_per_100_steps(steps: np.ndarray, values: np.ndarray) -> dict[str, float]:
    """Least-squares slope of `values` against `steps`, per 100 steps, and the samples' spread
    around the line (their standard deviation) and the range of the values."""
    slope, intercept = np.polyfit(steps, values, 1)
    residual = values - (slope * steps + intercept)
    return {"per_100_steps": float(100 * slope), "noise_std": float(residual.std()),
            "first": float(values[0]), "last": float(values[-1]), "min": float(values.min()), "max": float(values.max())}


def step_times(metrics: Path, parts: int = 10) -> list[dict[str, float]]:
    """Median ms per step in each of `parts` equal spans of the run, from the train lines'
    clock (train_time_ms differences; validation and saves are outside that clock)."""
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    train = sorted((r["step"], r["train_time_ms"]) for r in records if r["kind"] == "train")
    steps = np.array([s for s, _ in train])
    times = np.diff(np.array([t for _, t in train]))  # a negative difference: the clock reset at step 10
    steps, times = steps[1:][times > 0], times[times > 0]
    spans = np.array_split(np.arange(len(steps)), parts)
    return [{"from_step": int(steps[s[0]]), "to_step": int(steps[s[-1]]), "median_ms": float(np.median(times[s]))}
            for s in spans if len(s)]


def summarize(samples: list[Sample], metrics: Path, warmup: int) -> dict[str, Any]:
    """The figures docs/RELIABILITY.md reports (this module's docstring)."""
    kept = [s for s in samples if s.step is not None and s.step >= warmup]
    steps = np.array([s.step for s in kept], dtype=np.float64)
    summary: dict[str, Any] = {"samples": len(samples), "samples_after_warmup": len(kept), "warmup_steps": warmup}
    if len(kept) >= 3:
        summary["host_rss_mib"] = growth_per_100_steps(steps, np.array([s.host_rss_mib for s in kept]))
        if all(s.device_mib is not None for s in kept):
            summary["device_mib"] = growth_per_100_steps(steps, np.array([s.device_mib for s in kept]))
    summary["step_time"] = step_times(metrics)
    return summary


def soak(args: list[str], out_dir: Path, run_id: str, sample_every_s: float, warmup: int) -> dict[str, Any]:
    """Train with `python -m jaxgpt.train ARGS` (in this process) while sampling; write
    OUT_DIR/soak-RUN_ID.json (samples and summary) and return the summary."""
    from jaxgpt import train as train_lib  # noqa: PLC0415 - jax starts here, after the flags are read

    metrics = out_dir / "logs" / f"{run_id}.jsonl"
    started = time.time()
    with Sampler(metrics, sample_every_s) as sampler:
        code = train_lib.main([*args, "--out-dir", str(out_dir), "--run-id", run_id, "--no-progress"])
    if code != 0:
        raise SystemExit(code)
    summary = summarize(sampler.samples, metrics, warmup)
    summary.update(wall_s=time.time() - started, command=args)
    (out_dir / f"soak-{run_id}.json").write_text(json.dumps(
        {"summary": summary, "samples": [asdict(s) for s in sampler.samples]}, indent=1))
    return summary
