"""The fusion study's compile-only H100 legs, each in a child process of its own venv, started
through `common.child` (`compile_only.run_child` calls `run_leg` there with the venv's python):

    python -m jaxgpt_tools.common.child jaxgpt_tools.fusion.child:run_leg   # keyword arguments as JSON on stdin

`run_leg` returns the leg's records (the child prints them as JSON on its last stdout line);
progress goes to stderr. The environment each leg needs is set up in `run_leg`, before jax or
torch is imported. The same legs by hand, from this command line:

    python -m jaxgpt_tools.fusion.child xla --shapes small,record_gpu --out DIR        # jax CUDA plugin venv
    python -m jaxgpt_tools.fusion.child inductor --shapes small,record_gpu --out DIR   # CUDA-torch venv
    python -m jaxgpt_tools.fusion.child sweep --out DIR                                # XLA's dot-merger sweep
    python -m jaxgpt_tools.fusion.child width_sweep --out DIR                          # ... across D and head dims
    python -m jaxgpt_tools.fusion.child debug_options --out DIR                        # XLA's DebugOptions, dumped
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def run_leg(leg: str, out: str, *, shapes: Sequence[str] = ("small",), parts: Sequence[str] = ("qkv", "block"),
            modes: Sequence[str] = ("fwd", "fwdbwd"), variant: str = "default", options: dict[str, Any] | None = None,
            layouts: Sequence[str] = ("merged", "separate"), flat: bool = False,
            seq_lens: Sequence[int] | None = None, widths: Sequence[int] | None = None,
            head_dims: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """One leg's records: "xla" (the programs at `shapes` (names of fusion_xla.SHAPES), `parts`,
    `modes`), "inductor" (the same with `layouts`, `flat`: the QKV input flattened to (T, D)) or
    "sweep" (XLA's dot-merger sweep at `seq_lens`, default fusion_sweep.SEQ_LENS), "width_sweep"
    (the same decision across `widths` and `head_dims`, default fusion_sweep's) or "debug_options" (XLA's DebugOptions read from a
    compile dump: one record); `options`: XLA
    compiler options or Inductor config entries; written under the folder `out`."""
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    if leg == "debug_options":  # XLA dumps the DebugOptions each module is compiled with
        import os

        os.environ["XLA_FLAGS"] = f"--xla_dump_to={Path(out) / 'dump'}"
    if leg in ("xla", "sweep", "width_sweep", "debug_options"):
        from jaxgpt_tools.gpu import compile_plan as gpu_plan

        gpu_plan.compile_only_environment()  # before jax is imported
    else:
        from jaxgpt_tools.fusion import fake_cuda as fusion_fake_cuda

        fusion_fake_cuda.install()  # before torch touches CUDA
    from jaxgpt_tools.fusion.xla import SHAPES

    chosen, parts, modes = [SHAPES[name] for name in shapes], list(parts), list(modes)
    if leg == "xla":
        from jaxgpt_tools.fusion import xla as fusion_xla

        return fusion_xla.run(chosen, device="h100", out_dir=Path(out), timing=None, parts=parts, modes=modes,
                              compiler_options=options or {}, variant=variant, log=log)
    if leg == "inductor":
        from jaxgpt_tools.fusion import inductor_aot as fusion_inductor_aot

        return fusion_inductor_aot.run(chosen, out_dir=Path(out), parts=parts, modes=modes, options=options or {},
                                       variant=variant, log=log, layouts=list(layouts), flat=flat)
    from jaxgpt_tools.fusion import sweep as fusion_sweep

    if leg == "width_sweep":
        return fusion_sweep.width_sweep(out_dir=Path(out), log=log, widths=tuple(widths or fusion_sweep.WIDTHS),
                                        head_dims=tuple(head_dims or fusion_sweep.HEAD_DIMS))
    if leg == "debug_options":
        return [fusion_sweep.debug_options(Path(out), log=log)]
    return fusion_sweep.sweep(list(seq_lens or fusion_sweep.SEQ_LENS), out_dir=Path(out), modes=modes, log=log)


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
    made.add_argument("leg", choices=("xla", "inductor", "sweep", "width_sweep", "debug_options"))
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
    records = run_leg(args.leg, str(args.out), shapes=args.shapes.split(","), parts=args.parts.split(","),
                      modes=args.modes.split(","), variant=args.variant, options=dict(args.option),
                      layouts=args.layouts.split(","), flat=args.flat,
                      seq_lens=[int(t) for t in args.seq_lens.split(",")] if args.seq_lens else None)
    print(json.dumps(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
