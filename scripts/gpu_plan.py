"""Compile jaxgpt's full training step for a GPU that is not here and print XLA's plan.

    python scripts/gpu_plan.py [--preset record] [--device h100|h200|a100] [--devices 1|8] [--json]
        [--attention blocked|pallas|mosaic|dense] [--part step|block|attention|head] [--hlo-dir runs/gpu_plan]
        [--muon-collective all_gather|psum]

Needs the jax CUDA plugin (`make gpu-plan` installs the `gpu-aot` extra). Numbers are "compiled
without a GPU, no autotuning": memory and kernel counts of XLA's plan, not timings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import get_args

from jaxgpt import presets
from jaxgpt.muon import Collective
from jaxgpt_tools.common import command
from jaxgpt_tools.gpu import compile_plan as gpu_plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="record", choices=sorted(presets.PRESETS))
    parser.add_argument("--device", default="h100", choices=gpu_plan.device_names())
    parser.add_argument("--devices", type=int, default=1, help="compile-only devices in the mesh; each holds batch_tokens / devices tokens")
    parser.add_argument("--batch-tokens", type=int,
                        help="global tokens per step (default: each device gets the preset's batch_tokens / 8, at least one sequence)")
    parser.add_argument("--attention", choices=("blocked", "pallas", "mosaic", "dense"), default=None,
                        help="attention backend (default: the preset's; its 'auto' compiles the Pallas kernel for a GPU)")
    parser.add_argument("--part", choices=gpu_plan.PARTS, default="step",
                        help="the whole training step (default) or one part, forward + backward, on one device")
    parser.add_argument("--muon-collective", choices=get_args(Collective), default="all_gather",
                        help="how Muon shares its Newton-Schulz results between devices (step only; "
                             "all_gather is the record's, psum the earlier default, for before/after plans)")
    parser.add_argument("--hlo-dir", type=Path, default=Path("runs/gpu_plan"), help="where the optimized HLO text is written")
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    args = parser.parse_args(argv)
    def plan() -> None:
        summary = gpu_plan.plan_preset(args.preset, args.device, args.devices, part=args.part, attention=args.attention,
                                       batch_tokens=args.batch_tokens, muon_collective=args.muon_collective,
                                       hlo_dir=args.hlo_dir)
        print(json.dumps(summary) if args.json else "\n".join(f"{key:>14}: {value}" for key, value in summary.items()))

    return command.run("gpu_plan", plan)


if __name__ == "__main__":
    sys.exit(main())
