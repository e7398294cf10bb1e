#!/usr/bin/env python
"""Loss curves of training runs: validation (and train) loss against step and against training time.

    python scripts/plot_runs.py RUN.jsonl [RUN2.jsonl ...] --out curves.png

Each RUN.jsonl is the metrics file a trainer writes (jaxgpt.train: `<out_dir>/logs/<run_id>.jsonl`;
torch_ref.train: `<log_dir>/<uuid>.jsonl`); the schema and the drawing: jaxgpt_tools/reports/plot_runs.py.
Needs matplotlib (`pip install -e ".[plot]"`).
"""

from __future__ import annotations

import argparse
import sys

from jaxgpt_tools.common import command
from jaxgpt_tools.reports.plot_runs import plot_runs, read_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="RUN.jsonl", help="metrics files of the runs to draw")
    parser.add_argument("--out", required=True, metavar="FILE.png", help="image to write")
    parser.add_argument("--title", help="figure title")
    args = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return command.fail("plot_runs", 'plotting needs matplotlib: pip install -e ".[plot]"')
    return command.run("plot_runs", lambda: print(
        f"wrote {plot_runs([read_run(path) for path in args.runs], args.out, title=args.title)}"))


if __name__ == "__main__":
    sys.exit(main())
