"""The XLA side of the fusion study: jaxgpt's QKV path and one block, compiled and read.

    python scripts/fusion_xla.py --out runs/fusion/cpu/xla --shapes small      # this CPU, timed
    PYTHONPATH=$PWD .venv-gpu-aot/bin/python scripts/fusion_xla.py --device h100 \
        --out runs/fusion/h100-compile-only/xla --shapes record_gpu            # compile only
    ... --device h100 --parts qkv --variant dot_merger_256 \
        --xla-option xla_gpu_dot_merger_threshold_mb=256                       # an ablation

Prints the programs' records as one JSON list (scripts/fusion_report.py runs it in the venv with
the jax CUDA plugin for its H100 column). The programs: jaxgpt_tools/fusion/xla.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jaxgpt_tools.fusion.xla import MODES, PARTS, SHAPES, Timing, run


def xla_option(text: str) -> tuple[str, object]:
    """KEY=VALUE, the value read as an int, a float or true/false where it is one."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, {"true": True, "false": False}.get(value.lower(), value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="compile for this compile-only GPU (h100) instead of this machine")
    parser.add_argument("--shapes", default="small", help=f"comma-separated: {', '.join(SHAPES)}")
    parser.add_argument("--parts", default=",".join(PARTS), help="qkv and/or block")
    parser.add_argument("--modes", default=",".join(MODES), help="fwd and/or fwdbwd")
    parser.add_argument("--out", type=Path, required=True, help="folder for the optimized HLO texts")
    parser.add_argument("--time-s", type=float, default=3.0, help="seconds of timed calls per program (not compile-only)")
    parser.add_argument("--xla-option", type=xla_option, action="append", default=[], metavar="KEY=VALUE",
                        help="an XLA compiler option for every program (repeatable)")
    parser.add_argument("--variant", default="default", help="name of the option set (in file names and records)")
    args = parser.parse_args(argv)
    if args.device:
        from jaxgpt_tools.gpu import compile_plan as gpu_plan

        gpu_plan.compile_only_environment()  # before jax is imported (by run)
    unknown = [s for s in args.shapes.split(",") if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shape(s) {unknown}; choose from {', '.join(SHAPES)}")
    records = run([SHAPES[name] for name in args.shapes.split(",")], device=args.device, out_dir=args.out,
                  timing=None if args.device else Timing(target_s=args.time_s),
                  parts=args.parts.split(","), modes=args.modes.split(","), compiler_options=dict(args.xla_option),
                  variant=args.variant, log=lambda message: print(message, file=sys.stderr, flush=True))
    print(json.dumps(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
