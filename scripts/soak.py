"""A long run that must not drift: host RSS, device memory and step time over 1,000+ steps.

    nice python scripts/soak.py --steps 1000 --out runs/soak            # the tiny preset, ~1 h here
    nice python scripts/soak.py --steps 1000 --out runs/soak -- --model-dim 64 --batch-tokens 1024

Trains the tiny preset on the built-in sample (cycled) with validation and a checkpoint every
`--every` steps (2 kept), samples memory every few seconds, and prints the growth per 100 steps
after `--warmup` steps with the samples' noise, and the step time over the run; everything is
also written to OUT/soak-RUN_ID.json. Flags after `--` go to `python -m jaxgpt.train`. Not
part of `make test`; the figures are in docs/RELIABILITY.md. How: jaxgpt_tools/bench/soak.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jaxgpt_tools.bench.soak import soak
from jaxgpt_tools.common import command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="training steps (default 1000)")
    parser.add_argument("--every", type=int, default=10, help="validate and save every K steps (default 10)")
    parser.add_argument("--warmup", type=int, default=100, help="steps left out of the growth fit (default 100)")
    parser.add_argument("--sample-every", type=float, default=5.0, metavar="S", help="seconds between samples (default 5)")
    parser.add_argument("--out", default="runs/soak", help="where logs, checkpoints and the report go")
    parser.add_argument("--run-id", default="soak")
    parser.add_argument("train_args", nargs="*", help="more flags for jaxgpt.train (after --)")
    args = parser.parse_args(argv)
    train_args = ["--preset", "tiny", "--cycle-data", "--devices", "1", "--steps", str(args.steps),
                  "--val-every", str(args.every), "--val-tokens", "2048", "--checkpoint-every", str(args.every),
                  "--keep-checkpoints", "2", *args.train_args]
    return command.run("soak", lambda: print(json.dumps(
        soak(train_args, Path(args.out), args.run_id, args.sample_every, args.warmup), indent=1)))


if __name__ == "__main__":
    sys.exit(main())
