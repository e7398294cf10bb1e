"""The fusion study: how XLA and TorchInductor compile the record's merged-QKV attention path.

    python scripts/fusion_report.py --quick                 # small shape, this CPU, both compilers
    python scripts/fusion_report.py --write-docs            # + the record's width (T 2048 on this CPU)
                                                            #   + XLA for an H100 at T 65,536 (compile only)
                                                            #   -> docs/FUSION.md, docs/fusion/

Prints one JSON object (the rows, which compiler merged the projections, the H100 column's
state); progress goes to stderr. The programs and what is counted: jaxgpt_tools/fusion_report.py.
The H100 column needs the venv with the jax CUDA plugin (--gpu-python, default the `make gpu-plan`
venv .venv-gpu-aot, or $JAXGPT_GPU_PYTHON); without it that column says why it is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from jaxgpt_tools.fusion_report import REPO_ROOT, docs_from_results, run_study
from jaxgpt_tools.fusion_xla import MODES, PARTS, SHAPES

# The venv `make gpu-plan` builds (jax with its CUDA plugin), unless the environment names another.
DEFAULT_GPU_PYTHON = os.environ.get("JAXGPT_GPU_PYTHON", str(REPO_ROOT / ".venv-gpu-aot" / "bin" / "python"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the small shape on this CPU only (a few minutes)")
    parser.add_argument("--shapes", default=None, help=f"CPU shapes, comma-separated out of {', '.join(SHAPES)} "
                        "(default: small, and record_cpu unless --quick)")
    parser.add_argument("--compilers", default="xla,inductor", help="xla and/or inductor (on this CPU)")
    parser.add_argument("--parts", default=",".join(PARTS), help="attn and/or block")
    parser.add_argument("--modes", default=",".join(MODES), help="fwd and/or fwdbwd")
    parser.add_argument("--gpu", action=argparse.BooleanOptionalAction, default=None,
                        help="XLA for an H100 at the record's shape, compile only (default: on unless --quick)")
    parser.add_argument("--gpu-python", default=DEFAULT_GPU_PYTHON, help="python of the venv with the jax CUDA plugin")
    parser.add_argument("--gpu-shapes", default="record_gpu", help="shapes for the H100 compiles")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per program after a warm-up (default 5, quick 2)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a loaded shared CPU, OpenMP spin-waits make 2 threads slower)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "runs" / "fusion", help="artifact root (per device below it)")
    parser.add_argument("--write-docs", action="store_true", help="write docs/FUSION.md, its plot and docs/fusion/")
    parser.add_argument("--from-results", type=Path, nargs="+", default=None, metavar="DIR",
                        help="compile nothing: write the docs from DIR/cpu/results.json (+ DIR/h100-compile-only/) "
                             "of each DIR, later DIRs' programs replacing earlier ones'")
    parser.add_argument("--docs-dir", type=Path, default=REPO_ROOT / "docs", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    shapes = args.shapes.split(",") if args.shapes else (["small"] if args.quick else ["small", "record_cpu"])
    unknown = [s for s in shapes + args.gpu_shapes.split(",") if s not in SHAPES]
    compilers = [c.strip() for c in args.compilers.split(",") if c.strip()]
    parts, modes = args.parts.split(","), args.modes.split(",")
    if (unknown or not compilers or any(c not in ("xla", "inductor") for c in compilers)
            or not set(parts) <= set(PARTS) or not set(modes) <= set(MODES)):
        raise SystemExit(f"fusion_report.py: unknown shape(s) {unknown}, compilers {args.compilers!r}, "
                         f"parts {args.parts!r} or modes {args.modes!r}")
    if args.from_results is not None:
        try:
            docs_from_results(args.from_results, args.docs_dir)
        except ValueError as err:
            raise SystemExit(f"fusion_report.py: {err}") from None
        return 0
    command = "python scripts/fusion_report.py " + " ".join(sys.argv[1:] if argv is None else argv)
    result = run_study(shapes=shapes, compilers=compilers, parts=parts, modes=modes,
                       repeats=args.repeats if args.repeats is not None else (2 if args.quick else 5),
                       threads=args.threads, gpu=args.gpu if args.gpu is not None else not args.quick,
                       gpu_python=args.gpu_python, gpu_shapes=args.gpu_shapes.split(","), out=args.out,
                       write_docs=args.write_docs, docs_dir=args.docs_dir, command=command)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
