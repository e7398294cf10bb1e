"""The XLA side of the fusion study: jaxgpt's attention layer and one block, compiled and read.

    python scripts/fusion_xla.py --out runs/fusion/cpu/xla --shapes small      # this CPU, timed
    PYTHONPATH=$PWD .venv-gpu-aot/bin/python scripts/fusion_xla.py --device h100 \
        --out runs/fusion/h100-compile-only/xla --shapes record_gpu            # compile only

Prints the programs' records as one JSON list (scripts/fusion_report.py runs it in the venv with
the jax CUDA plugin for its H100 column). The programs: jaxgpt_tools/fusion_xla.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jaxgpt_tools.fusion_xla import SHAPES, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="compile for this compile-only GPU (h100) instead of the CPU")
    parser.add_argument("--shapes", default="small", help=f"comma-separated: {', '.join(SHAPES)}")
    parser.add_argument("--out", type=Path, required=True, help="folder for the optimized HLO texts")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs after a warm-up (CPU only)")
    args = parser.parse_args(argv)
    if args.device:
        from jaxgpt import gpu_plan

        gpu_plan.compile_only_environment()  # before jax is imported (by run)
    shapes = [SHAPES[name] for name in args.shapes.split(",")]
    records = run(shapes, device=args.device, out_dir=args.out, repeats=args.repeats,
                  log=lambda message: print(message, file=sys.stderr, flush=True))
    print(json.dumps(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
