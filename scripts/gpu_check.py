"""One command for a lent GPU: what jaxgpt and torch_ref do on it, written to gpu_check.{json,md}.

Run from the repository root on a CUDA machine (no installs needed there):

    PYTHONPATH=. python3 scripts/build_sample_data.py --out data/sample
    PYTHONPATH=. python3 scripts/gpu_check.py --quick --out runs/gpu_check/h100

The parts (environment, gpu-marked tests, parity, the two trainers' steps) are described in
jaxgpt_tools/gpu_check.py. `--dry-run` runs the same code on the CPU at tiny sizes and writes the
same files, so the command itself is tested in CI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxgpt_tools.gpu_check import run_check


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default runs/gpu_check/<device name>)")
    parser.add_argument("--quick", action="store_true", help="one run per trainer (under 8 minutes on one H100)")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU; writes the same files")
    parser.add_argument("--train-files", default="data/sample/sample_train_*.bin")
    parser.add_argument("--val-files", default="data/sample/sample_val_*.bin")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per subprocess")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])
    return run_check(out=args.out, quick=args.quick, dry_run=args.dry_run, train_files=args.train_files,
                     val_files=args.val_files, timeout_s=args.timeout, command=command)


if __name__ == "__main__":
    sys.exit(main())
