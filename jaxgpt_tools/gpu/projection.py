"""The record step on 8 H100s, projected from the compiled plans and the measured one-device step.

A projection, not a measurement: no 8-GPU machine has run jaxgpt. Inputs:
- the one-device and 8-device compiled plans of the record step (compiled without a GPU, no
  autotuning), reduced by `hlo_schedule.collective_schedule` to each plan's compute estimate and,
  for the 8-device plan, each collective's bytes and the compute scheduled around it;
- the newest measured one-device step on an H100 (`jax_step_ms` of the newest H100 report that
  has one, a device plan's summary.json or a gpu_check.json; 195 ms when this was written, measured 2026-11-23 at f2ae30b);
- the link assumptions in `Assumptions`, each stated in the output.

Model: each device of the 8 runs the measured one-device step, minus the compute the 8-way
split removes (the difference of the two plans' roofline estimates: mostly Newton-Schulz, each
device orthogonalising an eighth of the matrices), plus the part of each collective the schedule
does not hide. A collective takes latency + bytes on the wire / (link bandwidth x efficiency);
the compute XLA placed between its start and its done hides it up to that compute's roofline
estimate (a lower bound on that compute's real time, so the hiding is counted conservatively);
collectives run one at a time, as the plan schedules them. Not modelled: contention between
NCCL's kernels and compute for SMs, host overheads, the record's own gradient-accumulation-free
step being shorter or longer than this one.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from jaxgpt.presets import get_preset
from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.gpu import hlo_schedule

RECORD_STEP_MS = 129.7  # the record's 8xH100 log: step_avg at its last steps (docs/spec/RECORD.md section 9)
RECORD_RUN_MINUTES = 2.992  # its train_time, 179,527 ms, for 1,393 steps (RECORD.md)
RECORD_STEPS = get_preset("record").train.steps  # 1,393
TIMED_STEPS = RECORD_STEPS - 10  # the record's clock restarts after step 10 and skips validation
LAST_MEASURED_STEP_MS = 195.0  # jaxgpt's one-device record step, H100, 2026-11-23 (artifacts/gpu/h100_gpu_check.json)


@dataclass(frozen=True)
class Assumptions:
    """What the projection takes as given; every field is printed with the result."""

    devices: int = 8
    # NVLink 4 on an H100 SXM: 18 links x 25 GB/s = 450 GB/s per direction per GPU, all GPUs of an
    # HGX board through NVSwitch (published figure).
    link_gb_per_s_per_direction: float = 450.0
    # Fraction of it a large NCCL collective reaches (its "bus bandwidth"); an assumption, not a
    # measurement of this step.
    link_efficiency: float = 0.8
    # ring: an all-reduce sends 2(n-1)/n of its bytes per device, an all-gather (n-1)/n of its
    # result. nvls (NVLink SHARP, reduction in the switch): an all-reduce sends its bytes once.
    algorithm: Literal["ring", "nvls"] = "ring"
    latency_us: float = 20.0  # fixed cost per collective
    overlap: Literal["schedule", "none"] = "schedule"  # hide behind the compute the plan places between start and done


def wire_bytes(kind: str, result_bytes: int, assumptions: Assumptions) -> float:
    """Bytes each device sends for one collective whose per-device result is `result_bytes`."""
    n = assumptions.devices
    if kind == "all-reduce":
        return result_bytes if assumptions.algorithm == "nvls" else 2 * (n - 1) / n * result_bytes
    if kind in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n * result_bytes
    return float(result_bytes)  # collective-permute: the whole buffer


def collective_ms(kind: str, result_bytes: int, assumptions: Assumptions) -> float:
    rate = assumptions.link_gb_per_s_per_direction * 1e9 * assumptions.link_efficiency
    return assumptions.latency_us / 1e3 + 1e3 * wire_bytes(kind, result_bytes, assumptions) / rate


def project(schedule_1: dict[str, Any], schedule_n: dict[str, Any], measured_step_ms: float,
            assumptions: Assumptions = Assumptions()) -> dict[str, Any]:
    """Projected per-step and whole-run times of the n-device step (see the module docstring)."""
    if schedule_n["collectives"] == []:
        raise ValueError("the n-device schedule has no collectives: is it the one-device plan?")
    split_saving_ms = schedule_1["compute_ms"] - schedule_n["compute_ms"]
    compute_ms = measured_step_ms - split_saving_ms
    rows, exposed_total, comm_total = [], 0.0, 0.0
    for c in schedule_n["collectives"]:
        link = collective_ms(c["kind"], c["bytes"], assumptions)
        hidden = min(link, c["compute_between_ms"]) if assumptions.overlap == "schedule" and c["asynchronous"] else 0.0
        exposed_total += link - hidden
        comm_total += link
        rows.append({"name": c["name"], "kind": c["kind"], "mib": round(c["bytes"] / 2**20, 2),
                     "link_ms": round(link, 3), "hidden_ms": round(hidden, 3),
                     "starts_after_compute_ms": round(c["compute_before_ms"], 3),
                     "compute_between_ms": round(c["compute_between_ms"], 3)})
    step_ms = compute_ms + exposed_total
    return {
        "label": "projection (compiled plans without a GPU, no autotuning; link figures assumed; not a measurement)",
        "step_ms": round(step_ms, 1),
        "run_minutes": round(step_ms * TIMED_STEPS / 60000, 2),
        "step_ms_no_overlap": round(compute_ms + comm_total, 1),
        "record_step_ms": RECORD_STEP_MS, "record_run_minutes": RECORD_RUN_MINUTES,
        "ratio_to_record": round(step_ms / RECORD_STEP_MS, 3),
        "measured_one_device_step_ms": measured_step_ms,
        "split_saving_ms": round(split_saving_ms, 2),
        "communication_ms": round(comm_total, 2), "exposed_communication_ms": round(exposed_total, 2),
        "run_minutes_counts": f"{TIMED_STEPS} steps: the record's clock skips the first 10 and validation",
        "assumptions": asdict(assumptions),
        "plan_compute_estimate_ms": {"one_device": round(schedule_1["compute_ms"], 2),
                                     f"{assumptions.devices}_devices": round(schedule_n["compute_ms"], 2)},
        "collectives": rows,
    }


MEASURED_STEPS = [str(REPO_ROOT / "artifacts" / "gpu" / "**" / "*.json"),
                  str(REPO_ROOT / "runs" / "gpu_check" / "**" / "gpu_check.json")]
SCHEDULES = REPO_ROOT / "artifacts" / "gpu" / "h100_plan_schedules.json"


def report_gpu(report: dict[str, Any]) -> str | None:
    """The GPU a report ran on: a device plan's preflight (`steps.preflight.results.gpu`) or a
    gpu_check's `environment.gpu`; None where the report does not say."""
    preflight = ((report.get("steps") or {}).get("preflight") or {}).get("results") or {}
    return preflight.get("gpu") or (report.get("environment") or {}).get("gpu")


def measured_step(report: dict[str, Any]) -> tuple[str, float] | None:
    """(when, jax_step_ms) of an H100 run's report: a device plan's summary.json (`jax_step_ms` at
    its top, `started_utc`) or a gpu_check.json (`train.jax_step_ms`, `started`); None for a
    dry run, CPU stand-ins, another GPU (an H200's step is not an H100's) or a report without
    the number. A report that names no GPU is taken as the H100 it was written for."""
    if report.get("dry_run") or report.get("cpu_stand_ins"):
        return None
    if "H100" not in (report_gpu(report) or "H100"):
        return None
    step = report.get("jax_step_ms") or (report.get("train") or {}).get("jax_step_ms")
    when = report.get("started_utc") or report.get("started") or ""
    return (str(when), float(step)) if step else None


def newest_measured_step(patterns: list[str]) -> tuple[float, str]:
    """(jax_step_ms, path) of the newest GPU report (`measured_step`) among the glob patterns;
    the last measured value with its source when none has one."""
    found = []
    for path in sorted({p for pattern in patterns for p in glob.glob(pattern, recursive=True)}):
        try:
            report = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            continue
        measured = measured_step(report) if isinstance(report, dict) else None
        if measured:
            found.append((*measured, path))
    if not found:
        return LAST_MEASURED_STEP_MS, "jaxgpt_tools.gpu.projection.LAST_MEASURED_STEP_MS (no GPU report with jax_step_ms found)"
    _, step, path = max(found)
    return step, path


def write_schedules(one_device_hlo: Path, n_device_hlo: Path, path: Path = SCHEDULES) -> Path:
    """Where the collectives sit among the compute of both plans (their optimized HLO), as JSON."""
    schedules = {"caveat": "compiled without a GPU, no autotuning; compute in roofline ms",
                 "one_device": hlo_schedule.collective_schedule(one_device_hlo.read_text()),
                 "n_devices": hlo_schedule.collective_schedule(n_device_hlo.read_text()),
                 "hlo": [one_device_hlo.name, n_device_hlo.name],
                 "made_by": "scripts/gpu_plan.py --preset record --devices 1 and --devices 8 (their HLO), then "
                            "scripts/project_8gpu.py --from-hlo"}
    path.write_text(json.dumps(schedules, indent=1) + "\n")
    return path


def project_from_files(schedules_path: Path, measured: list[str], assumptions: Assumptions) -> dict[str, Any]:
    """`project` from a schedules file and the newest measured step among `measured` (globs);
    FileNotFoundError without the schedules."""
    if not schedules_path.is_file():
        raise FileNotFoundError(f"no schedules at {schedules_path}: make them with --from-hlo")
    schedules = json.loads(schedules_path.read_text())
    step_ms, source = newest_measured_step(measured)
    result = project(schedules["one_device"], schedules["n_devices"], step_ms, assumptions)
    result["measured_step_source"] = os.path.relpath(source, REPO_ROOT) if Path(source).is_file() else source
    result["schedules"] = os.path.relpath(schedules_path, REPO_ROOT)
    return result
