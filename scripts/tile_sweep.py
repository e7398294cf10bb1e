"""Which launch settings make each Pallas attention kernel fastest on this GPU?

On a GPU (the sweep stops after --budget-s = 210 s; then the combination and the exit, within 5 minutes):
    JAX_PLATFORMS=cuda PYTHONPATH=. python3 scripts/tile_sweep.py --out $OUT/tile_sweep.jsonl
    JAX_PLATFORMS=cuda PYTHONPATH=. python3 scripts/tile_sweep.py --implementation mosaic --out $OUT/mosaic_sweep.jsonl
The Mosaic forward's 16 variants (step, stages, pingpong, query_blocks) alone, then the best against the default
(budgeted for 3 minutes, not yet run on a GPU; compile-only, 4 to 6 s a setting on this 2-core CPU):
    PYTHONPATH=. timeout 240 python3 scripts/tile_sweep.py --implementation mosaic --kernels forward \
        --budget-s 120 --out $OUT/mosaic_forward_sweep.jsonl
With no GPU, on a CPU with the jax CUDA plugin (which settings the compiler accepts for an H100;
no timings, "compiled without a GPU, no autotuning"):
    PYTHONPATH=. python scripts/tile_sweep.py --compile-only --out runs/tile_sweep_compile.jsonl

What is swept and timed: jaxgpt_tools/gpu/tile_sweep.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxgpt_tools.common import command
from jaxgpt_tools.gpu.tile_sweep import IMPLEMENTATIONS, KERNELS, sweep


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--implementation", choices=IMPLEMENTATIONS, default="pallas",
                        help="pallas: the Triton kernels (flash_attention); mosaic: the Mosaic GPU kernels (Hopper)")
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS), help="kernels to sweep")
    parser.add_argument("--windows", nargs="+", type=int, default=[4, 14], help="windows in 128-token blocks")
    parser.add_argument("--seq-len", type=int, default=65536)
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per median (after warm-up)")
    parser.add_argument("--limit", type=int, default=None, help="try only the first N settings per kernel")
    parser.add_argument("--budget-s", type=float, default=210.0,
                        help="start no new setting after this many seconds (the best-of combination still runs)")
    parser.add_argument("--compile-only", action="store_true",
                        help="no GPU: compile for a compile-only H100 (jax CUDA plugin); report which settings compile")
    parser.add_argument("--out", type=Path, default=None, help="JSON lines file for the results")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.compile_only:
        from jaxgpt_tools.gpu import compile_plan as gpu_plan

        gpu_plan.compile_only_environment()  # before jax initialises its backends
    return command.run("tile_sweep", lambda: sweep(
        kernels=args.kernels, windows=args.windows, seq_len=args.seq_len, repeats=args.repeats, limit=args.limit,
        budget_s=args.budget_s, compile_only=args.compile_only, out_path=args.out, implementation=args.implementation))


if __name__ == "__main__":
    sys.exit(main())
