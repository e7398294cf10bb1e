"""Benchmarks of jaxgpt: attention backends, Newton-Schulz, the train step, and torch_ref.

    python scripts/bench.py --json                       # all default suites, one JSON object
    python scripts/bench.py --json --quick --only attention
    python scripts/bench.py --json --quick --only parity_step   # jaxgpt vs torch_ref, one step

`--json` prints {"machine": ..., "suites": ...} as one JSON object on stdout, and progress goes to
stderr. What each suite measures: jaxgpt_tools/bench/suites.py. Results and commands: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from jaxgpt_tools.bench.attention_gpu import require_gpu
from jaxgpt_tools.bench.suites import HIDDEN_SUITES, SUITES, BenchOptions, parse_suites, run_benchmarks
from jaxgpt_tools.common import command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--only", default=",".join(SUITES),
                        help=f"comma-separated suites out of {', '.join(SUITES)} (default: all); "
                             f"also, only when named: {', '.join(HIDDEN_SUITES)} (attention_gpu needs a CUDA GPU)")
    parser.add_argument("--quick", action="store_true", help="small sizes: the whole run takes a few minutes on 2 CPU cores")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs after the compiling one (default 3, quick 2)")
    parser.add_argument("--dtypes", default="fp32,bf16", help="attention suite dtypes: fp32, bf16 or both")
    parser.add_argument("--ns-split", type=int, default=0, metavar="N",
                        help="also time Newton-Schulz split over N virtual devices (child process)")
    parser.add_argument("--record-timeout", type=float, default=None, metavar="S",
                        help="limit for the record-size compile in train_step (default 300, quick: skipped; 0 skips)")
    parser.add_argument("--record-loss-chunk", type=int, default=None, metavar="TOKENS",
                        help="record_compile: CE chunk size (default: the record preset's; 0 for none)")
    parser.add_argument("--torch-compile", action=argparse.BooleanOptionalAction, default=None,
                        help="parity_step: also time torch_ref under torch.compile (default: on, off with --quick: "
                             "its CPU compile takes minutes)")
    parser.add_argument("--torch-threads", type=int, default=1, metavar="N",
                        help="parity_step: torch's threads (default 1: at 2 on this shared 2-core CPU, OpenMP "
                             "spin-waits made torch's step 3-4x slower; 0: torch's default)")
    parser.add_argument("--record-remat", choices=("none", "block", "block_dots"), default=None,
                        help="record_compile: per-block rematerialisation (default: the record preset's)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        suites = parse_suites(args.only)
        if "attention_gpu" in suites:
            require_gpu()  # before any other suite spends its minutes
        options = BenchOptions(
            quick=args.quick, repeats=args.repeats if args.repeats is not None else (2 if args.quick else 3),
            dtypes=tuple(name.strip() for name in args.dtypes.split(",") if name.strip()),
            ns_split=args.ns_split or None, record_timeout=args.record_timeout,
            record_loss_chunk=args.record_loss_chunk, record_remat=args.record_remat,
            torch_compile=args.torch_compile, torch_threads=args.torch_threads or None)
    except ValueError as error:
        command.usage_error(parser, error)
    return command.run("bench", lambda: print(json.dumps(run_benchmarks(suites, options), indent=None if args.json else 2)))


if __name__ == "__main__":
    sys.exit(main())
