"""Rank the kernels of a `--profile` trace by total time.

    python scripts/trace_kernels.py runs/profile/RUN_ID [--top 30] [--steps 2]

PATH is a trace file or a folder holding one (the newest is read): jaxgpt's jax.profiler output
or torch_ref's torch.profiler Chrome trace. Which events count as kernels:
jaxgpt_tools/gpu/trace_kernels.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxgpt_tools.common import command
from jaxgpt_tools.gpu.trace_kernels import format_ranking, rank


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="trace file, or a folder holding one (e.g. OUT_DIR/profile/RUN_ID)")
    parser.add_argument("--top", type=int, default=30, help="kernels to list (default 30)")
    parser.add_argument("--steps", type=int, default=None, help="divide times by the traced steps' count (ms/step)")
    args = parser.parse_args(argv)
    return command.run("trace_kernels", lambda: print(format_ranking(rank(args.path), top=args.top, steps=args.steps)))


if __name__ == "__main__":
    sys.exit(main())
