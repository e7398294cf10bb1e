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
import sys
from dataclasses import fields
from pathlib import Path

from jaxgpt_tools.common import command
from jaxgpt_tools.gpu import projection


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=Path, default=projection.SCHEDULES, help="the plans' schedules (written by --from-hlo)")
    parser.add_argument("--from-hlo", nargs=2, type=Path, metavar=("ONE_DEVICE_HLO", "EIGHT_DEVICE_HLO"),
                        help="read both plans' optimized HLO and rewrite --schedules first")
    parser.add_argument("--gpu-check", type=Path,
                        help="a device plan's summary.json or a gpu_check.json with the measured step (default: the newest found)")
    defaults = projection.Assumptions()
    for field in fields(projection.Assumptions):
        kind = type(getattr(defaults, field.name))
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=kind, default=getattr(defaults, field.name))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    assumptions = projection.Assumptions(**{f.name: getattr(args, f.name) for f in fields(projection.Assumptions)})
    def project() -> None:
        if args.from_hlo:
            projection.write_schedules(*args.from_hlo, args.schedules)
        result = projection.project_from_files(args.schedules, [str(args.gpu_check)] if args.gpu_check
                                               else projection.MEASURED_STEPS, assumptions)
        print(json.dumps(result) if args.json else
              "\n".join(f"{key:>32}: {value}" for key, value in result.items() if key != "collectives"))

    return command.run("project_8gpu", project)


if __name__ == "__main__":
    sys.exit(main())
