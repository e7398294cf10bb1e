"""Rank the kernels of a profiler trace by total time (`scripts/trace_kernels.py`).

Reads the Chrome/Perfetto JSON traces that the trainers' `--profile` writes: jaxgpt's
`perfetto_trace.json.gz` (or `<host>.trace.json.gz`) from jax.profiler, torch_ref's
`trace_rank<r>.json` from torch.profiler. Which events are kernels, by what the trace holds:
- "gpu": JAX's device processes (`/device:GPU:0`, ...) and torch's CUDA kernels and copies
  (`cat` kernel / gpu_memcpy / gpu_memset): the GPU's own work;
- "xla:cpu": on a CPU, XLA's compiled ops (events naming an `hlo_op`), which the host's
  threads run;
- "torch:cpu": on a CPU, torch's operators (`cat` cpu_op).
Each kernel's time is its own time: its duration less that of the events it encloses on its
thread (an XLA while loop keeps only its loop overhead beside its body's ops; aten::linear
only what aten::addmm inside it does not take), so no time is counted twice.
"""

from __future__ import annotations

import collections
import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRACE_PATTERNS = ("perfetto_trace.json.gz", "*.trace.json.gz", "*.pt.trace.json", "trace_rank*.json", "*.json.gz", "*.json")
TORCH_GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


@dataclass(frozen=True)
class KernelTime:
    name: str
    total_ms: float
    calls: int


@dataclass(frozen=True)
class Ranking:
    trace: Path
    kind: str  # "gpu", "xla:cpu" or "torch:cpu" (module docstring)
    kernels: list[KernelTime]  # largest total first

    @property
    def total_ms(self) -> float:
        return sum(kernel.total_ms for kernel in self.kernels)


def find_trace(path: Path) -> Path:
    """`path` itself, or the newest trace file below a folder (a `--profile` output folder)."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"no trace file or folder at {path}")
    for pattern in TRACE_PATTERNS:
        found = sorted(path.rglob(pattern), key=lambda candidate: candidate.stat().st_mtime)
        if found:
            return found[-1]
    raise FileNotFoundError(f"no trace file ({', '.join(TRACE_PATTERNS)}) below {path}")


def load_events(trace: Path) -> list[dict[str, Any]]:
    """The trace's events (Chrome trace format: a list, or an object with `traceEvents`)."""
    raw = trace.read_bytes()
    try:
        loaded = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError) as error:
        raise ValueError(f"{trace} is not a JSON trace (plain or gzipped): {error}") from None
    events = loaded.get("traceEvents") if isinstance(loaded, dict) else loaded
    if not isinstance(events, list):
        raise ValueError(f"{trace} holds no traceEvents list")
    return events


def kernel_events(events: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(kind, the complete events that are kernels), the first kind the trace holds (docstring)."""
    complete = [event for event in events if event.get("ph") == "X" and "dur" in event]
    process_names = {event.get("pid"): event.get("args", {}).get("name", "") for event in events
                     if event.get("ph") == "M" and event.get("name") == "process_name"}
    device_pids = {pid for pid, name in process_names.items() if "/device:" in name and "CPU" not in name}
    kinds = (
        ("gpu", lambda e: e.get("pid") in device_pids or e.get("cat") in TORCH_GPU_CATEGORIES),
        ("xla:cpu", lambda e: "hlo_op" in (e.get("args") or {})),
        ("torch:cpu", lambda e: e.get("cat") == "cpu_op"),
    )
    for kind, is_kernel in kinds:
        selected = [event for event in complete if is_kernel(event)]
        if selected:
            return kind, selected
    raise ValueError("the trace holds no kernel events (no GPU device, XLA op or torch operator events)")


def self_times_us(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """(event, its own time in us): its duration less that of the events it directly encloses
    on its thread (per pid, tid), so that nested events count once."""
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = collections.defaultdict(list)
    for event in events:
        by_thread[event.get("pid"), event.get("tid")].append(event)
    result = []
    for thread_events in by_thread.values():
        # Start ascending, longest first among equal starts: an enclosing event precedes what it holds.
        thread_events.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        open_events: list[list[Any]] = []  # [end, event, own time], innermost last
        for event in thread_events:
            start, duration = float(event["ts"]), float(event["dur"])
            while open_events and open_events[-1][0] <= start:
                _, done, own = open_events.pop()
                result.append((done, own))
            if open_events:
                open_events[-1][2] -= min(duration, open_events[-1][0] - start)
            open_events.append([start + duration, event, duration])
        result.extend((done, own) for _, done, own in open_events)
    return result


def rank(path: Path) -> Ranking:
    """The kernels of the trace at `path` (a file or a folder holding one), by total time."""
    trace = find_trace(path)
    kind, events = kernel_events(load_events(trace))
    totals: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    for event, own_us in self_times_us(events):
        totals[event["name"]] += own_us / 1e3
        calls[event["name"]] += 1
    kernels = sorted((KernelTime(name, total, calls[name]) for name, total in totals.items()),
                     key=lambda kernel: (-kernel.total_ms, kernel.name))
    return Ranking(trace=trace, kind=kind, kernels=kernels)


# Kernel classes by name, first match wins: a reading aid for comparing two frameworks' rankings,
# not a measurement (a fusion's name says its root op, not all it does; Newton-Schulz's GEMMs
# count as GEMMs). Names seen on an H100: XLA's `gemm_fusion_*`, cuBLAS's `nvjet_*` / `*xmma_gemm*`,
# jaxgpt's Pallas `block_sparse_attention_*`, torch's `triton_tem_fused_*flex*`, `_scaled_mm`.
KERNEL_CLASSES = (
    ("attention", re.compile(r"attention|attn|flex|flash", re.IGNORECASE)),
    ("fp8 head", re.compile(r"scaled_mm|f8|fp8|e4m3|e5m2", re.IGNORECASE)),
    ("gemm", re.compile(r"gemm|nvjet|cutlass|cublas|xmma|matmul|\bdot|_mm\b|addmm|\bmm\b|bmm", re.IGNORECASE)),
    ("copy", re.compile(r"memcpy|memset|copy|transpose", re.IGNORECASE)),
    ("reduction", re.compile(r"reduce|norm|sum|mean|softmax|cross_entropy", re.IGNORECASE)),
)


def kernel_class(name: str) -> str:
    """The class of a kernel by its name (KERNEL_CLASSES), "elementwise/other" when none matches."""
    return next((title for title, pattern in KERNEL_CLASSES if pattern.search(name)), "elementwise/other")


def class_totals(ranking: Ranking, *, steps: int | None = None) -> dict[str, float]:
    """ms (per step with `steps`) of each kernel class, largest first."""
    totals: dict[str, float] = collections.defaultdict(float)
    for kernel in ranking.kernels:
        totals[kernel_class(kernel.name)] += kernel.total_ms / (steps or 1)
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


KIND_TITLES = {"gpu": "GPU kernels", "xla:cpu": "XLA:CPU ops (the host runs them; no GPU in this trace)",
               "torch:cpu": "PyTorch CPU operators (no GPU in this trace)"}


def format_ranking(ranking: Ranking, *, top: int, steps: int | None = None) -> str:
    """A table: total ms (per step with `steps`), share, calls, name."""
    per = steps or 1
    unit = "ms/step" if steps else "ms"
    lines = [f"{ranking.trace}: {KIND_TITLES[ranking.kind]}",
             f"kernel time {ranking.total_ms / per:.2f} {unit} (summed over threads and streams) in "
             f"{sum(k.calls for k in ranking.kernels)} calls of {len(ranking.kernels)} kernels"
             + (f" over {steps} steps" if steps else ""),
             f"{unit:>10}  {'share':>6}  {'calls':>6}  name"]
    for kernel in ranking.kernels[:top]:
        share = kernel.total_ms / ranking.total_ms if ranking.total_ms else 0.0
        lines.append(f"{kernel.total_ms / per:10.2f}  {share:6.1%}  {kernel.calls:6d}  {kernel.name[:120]}")
    return "\n".join(lines)
