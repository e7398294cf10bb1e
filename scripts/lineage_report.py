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
import json
import sys
import tempfile
import time
from pathlib import Path

from jaxgpt_tools.reports import lineage as report

PARTS = ("steps", "plans", "study")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="what to measure (default: all)")
    parser.add_argument("--presets", nargs="+", choices=report.PRESETS, default=list(report.PRESETS))
    parser.add_argument("--out", type=Path, default=report.REPO_ROOT / "docs" / "LINEAGE.md")
    parser.add_argument("--results", type=Path, default=report.REPO_ROOT / "artifacts" / "lineage" / "results.json",
                        help="measured numbers, merged across runs; the page is rendered from it")
    parser.add_argument("--sample-dir", type=Path, default=report.REPO_ROOT / "data" / "sample")
    parser.add_argument("--study-steps", type=int, default=30)
    parser.add_argument("--study-val-every", type=int, default=10)
    parser.add_argument("--study-val-tokens", type=int, default=4096)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--step-warmup", type=int, default=2, help="untimed steps before the timed ones (the first compiles)")
    parser.add_argument("--step-repeats", type=int, default=3)
    parser.add_argument("--gpu-python", type=Path, default=report.REPO_ROOT / ".venv-gpu-aot" / "bin" / "python",
                        help="python of the environment with the jax CUDA plugin (make gpu-plan builds it)")
    parser.add_argument("--compile-cache", default=None,
                        help="JAX's compilation cache for the study (default: a fresh temporary folder)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = report.log_to_stderr
    results = json.loads(args.results.read_text()) if args.results.is_file() else {}
    machine, versions = report.machine_and_versions()
    results.update(machine=machine, versions=versions, facts=report.facts_json(report.record_facts()),
                   parameters={name: report.parameter_count(name) for name in report.PRESETS})
    names = tuple(args.presets)
    if "steps" in args.parts:
        results.setdefault("step_times", {}).update(report.step_times(
            names, warmup=args.step_warmup, repeats=args.step_repeats, sample_dir=args.sample_dir, log=log))
        results["step_time_steps"] = f"{args.step_repeats} after {args.step_warmup} warm-up"
    if "plans" in args.parts:
        if not args.gpu_python.is_file():
            print(f"lineage_report: error: {args.gpu_python} not found; build it with `make gpu-plan` or pass "
                  "--gpu-python", file=sys.stderr)
            return 1
        results.setdefault("plans", {}).update({name: report.plan_memory(name, args.gpu_python, log) for name in names})
    if "study" in args.parts:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as cache:
            runs = report.run_study(names, tuple(args.seeds), steps=args.study_steps, val_every=args.study_val_every,
                                    val_tokens=args.study_val_tokens, sample_dir=args.sample_dir,
                                    compile_cache=args.compile_cache or cache, log=log)
        plot = args.out.parent / "lineage_study.png"
        report.write_plot(runs, plot)
        results["study"] = {"steps": args.study_steps, "seeds": args.seeds, "val_tokens": args.study_val_tokens,
                            "table": report.study_table(runs, args.study_steps), "plot": plot.name,
                            "runs": [run.__dict__ | {"val_losses": {str(k): v for k, v in run.val_losses.items()}}
                                     for run in runs],
                            "seconds": time.perf_counter() - start}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=1) + "\n")
    args.out.write_text(report.render(results, "python scripts/lineage_report.py"))
    log(f"wrote {args.out} and {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
