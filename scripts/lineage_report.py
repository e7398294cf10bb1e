"""Write docs/LINEAGE.md (and docs/lineage_study.png): the lineage presets in numbers.

    python scripts/lineage_report.py                       # every part (the plans need the plugin venv)
    python scripts/lineage_report.py --parts study         # the CPU lineage study only (< 30 minutes)
    python scripts/lineage_report.py --parts steps plans   # step times, H100 plans

Each run measures the parts asked for, merges them into artifacts/lineage/results.json (the parts
measured before are kept) and renders the page from that file. What each part measures:
jaxgpt_tools/reports/lineage.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxgpt_tools.common import command
from jaxgpt_tools.reports import lineage as report


def parse_args(argv: list[str] | None = None) -> report.ReportOptions:
    defaults = report.ReportOptions()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=report.PARTS, default=list(report.PARTS), help="what to measure (default: all)")
    parser.add_argument("--presets", nargs="+", choices=report.PRESETS, default=list(report.PRESETS))
    parser.add_argument("--out", type=Path, default=defaults.out)
    parser.add_argument("--results", type=Path, default=defaults.results,
                        help="measured numbers, merged across runs; the page is rendered from it")
    parser.add_argument("--sample-dir", type=Path, default=defaults.sample_dir)
    parser.add_argument("--study-steps", type=int, default=defaults.study_steps)
    parser.add_argument("--study-val-every", type=int, default=defaults.study_val_every)
    parser.add_argument("--study-val-tokens", type=int, default=defaults.study_val_tokens)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(defaults.seeds))
    parser.add_argument("--step-warmup", type=int, default=defaults.step_warmup,
                        help="untimed steps before the timed ones (the first compiles)")
    parser.add_argument("--step-repeats", type=int, default=defaults.step_repeats)
    parser.add_argument("--gpu-python", type=Path, default=defaults.gpu_python,
                        help="python of the environment with the jax CUDA plugin (make gpu-plan builds it)")
    parser.add_argument("--compile-cache", default=None,
                        help="JAX's compilation cache for the study (default: a fresh temporary folder)")
    args = vars(parser.parse_args(argv))
    return report.ReportOptions(**{key: tuple(value) if isinstance(value, list) else value for key, value in args.items()})


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    return command.run("lineage_report", lambda: report.build_report(options))


if __name__ == "__main__":
    sys.exit(main())
