"""The fusion study's compile-only H100 legs, each in a child process of its own venv:

    python -m jaxgpt_tools.fusion.child xla --shapes small,record_gpu --out DIR        # jax CUDA plugin venv
    python -m jaxgpt_tools.fusion.child inductor --shapes small,record_gpu --out DIR   # CUDA-torch venv
    python -m jaxgpt_tools.fusion.child sweep --out DIR                                # XLA's dot-merger sweep

Prints the records as one JSON list on its last stdout line (fusion_report.run_child reads it);
progress on stderr. The environment each needs is set up here, before jax or torch is imported.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def option(text: str) -> tuple[str, object]:
    """KEY=VALUE, the value read as JSON where it parses (int, float, true/false, a dict), else text."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    made.add_argument("leg", choices=("xla", "inductor", "sweep"))
    made.add_argument("--shapes", default="small", help="comma-separated names of fusion_xla.SHAPES")
    made.add_argument("--parts", default="qkv,block")
    made.add_argument("--modes", default="fwd,fwdbwd")
    made.add_argument("--out", type=Path, required=True)
    made.add_argument("--variant", default="default")
    made.add_argument("--option", type=option, action="append", default=[], metavar="KEY=VALUE",
                      help="an XLA compiler option or Inductor config entry (JSON value), repeatable")
    made.add_argument("--layouts", default="merged,separate")
    made.add_argument("--flat", action="store_true", help="inductor: the QKV path with its input flattened to (T, D)")
    made.add_argument("--seq-lens", default=None, help="sweep: comma-separated T (default fusion_sweep.SEQ_LENS)")
    return made


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    options = dict(args.option)
    if args.leg in ("xla", "sweep"):
        from jaxgpt_tools.gpu import compile_plan as gpu_plan

        gpu_plan.compile_only_environment()  # before jax is imported
    else:
        from jaxgpt_tools.fusion import fake_cuda as fusion_fake_cuda

        fusion_fake_cuda.install()  # before torch touches CUDA
    from jaxgpt_tools.fusion.xla import SHAPES

    shapes = [SHAPES[name] for name in args.shapes.split(",")]
    parts, modes = args.parts.split(","), args.modes.split(",")
    if args.leg == "xla":
        from jaxgpt_tools.fusion import xla as fusion_xla

        records = fusion_xla.run(shapes, device="h100", out_dir=args.out, timing=None, parts=parts, modes=modes,
                                 compiler_options=options, variant=args.variant, log=log)
    elif args.leg == "inductor":
        from jaxgpt_tools.fusion import inductor_aot as fusion_inductor_aot

        records = fusion_inductor_aot.run(shapes, out_dir=args.out, parts=parts, modes=modes, options=options,
                                          variant=args.variant, log=log, layouts=args.layouts.split(","), flat=args.flat)
    else:
        from jaxgpt_tools.fusion import sweep as fusion_sweep

        seq_lens = [int(t) for t in args.seq_lens.split(",")] if args.seq_lens else list(fusion_sweep.SEQ_LENS)
        records = fusion_sweep.sweep(seq_lens, out_dir=args.out, modes=modes, log=log)
    print(json.dumps(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
