"""Project jaxgpt's record step on 8 H100s from the compiled plans and the newest measured one-device step.

    python scripts/project_8gpu.py --json
    python scripts/project_8gpu.py --algorithm nvls --link-efficiency 0.7
    # refresh the plans' schedules (plugin venv; HLO from scripts/gpu_plan.py --devices 1 and --devices 8):
    python scripts/project_8gpu.py --from-hlo runs/gpu_plan/record_pallas_h100_x1_train_step.hlo.txt \\
        runs/gpu_plan/record_pallas_h100_x8_train_step.hlo.txt

A projection (jaxgpt_tools/gpu/projection.py states the model), never a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import fields
from pathlib import Path

from jaxgpt_tools.gpu import hlo_schedule, projection
from jaxgpt_tools.common.artifacts import REPO_ROOT

SCHEDULES = REPO_ROOT / "artifacts" / "gpu" / "h100_plan_schedules.json"
GPU_CHECKS = [str(REPO_ROOT / "artifacts" / "gpu" / "**" / "*gpu_check*.json"), str(REPO_ROOT / "runs" / "gpu_check" / "**" / "gpu_check.json")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=Path, default=SCHEDULES, help="the plans' schedules (written by --from-hlo)")
    parser.add_argument("--from-hlo", nargs=2, type=Path, metavar=("ONE_DEVICE_HLO", "EIGHT_DEVICE_HLO"),
                        help="read both plans' optimized HLO and rewrite --schedules first")
    parser.add_argument("--gpu-check", type=Path, help="gpu_check.json with the measured step (default: the newest found)")
    defaults = projection.Assumptions()
    for field in fields(projection.Assumptions):
        kind = type(getattr(defaults, field.name))
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=kind, default=getattr(defaults, field.name))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.from_hlo:
        schedules = {"caveat": "compiled without a GPU, no autotuning; compute in roofline ms",
                     "one_device": hlo_schedule.collective_schedule(args.from_hlo[0].read_text()),
                     "n_devices": hlo_schedule.collective_schedule(args.from_hlo[1].read_text()),
                     "hlo": [path.name for path in args.from_hlo],
                     "made_by": "scripts/gpu_plan.py --preset record --devices 1 and --devices 8 (their HLO), then "
                                "scripts/project_8gpu.py --from-hlo"}
        args.schedules.write_text(json.dumps(schedules, indent=1) + "\n")
    if not args.schedules.is_file():
        parser.error(f"no schedules at {args.schedules}: make them with --from-hlo")
    schedules = json.loads(args.schedules.read_text())
    if args.gpu_check:
        step_ms, source = projection.newest_measured_step([str(args.gpu_check)])
    else:
        step_ms, source = projection.newest_measured_step(GPU_CHECKS)
    assumptions = projection.Assumptions(**{f.name: getattr(args, f.name) for f in fields(projection.Assumptions)})
    result = projection.project(schedules["one_device"], schedules["n_devices"], step_ms, assumptions)
    result["measured_step_source"] = os.path.relpath(source, REPO_ROOT) if Path(source).is_file() else source
    result["schedules"] = os.path.relpath(args.schedules, REPO_ROOT)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            if key != "collectives":
                print(f"{key:>32}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
