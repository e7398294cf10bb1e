"""`python scripts/mutants.py` (`make mutants`): run the catalogue, print the kill matrix, write it into PARITY.md."""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from jaxgpt_tools.mutants.apply import check_mutants, export_tracked
from jaxgpt_tools.mutants.catalogue import CATALOGUE, select
from jaxgpt_tools.mutants.matrix import (
    RunInfo,
    load_results,
    matrix_rows,
    save_results,
    section,
    summary,
    write_section,
)
from jaxgpt_tools.mutants.mutant import Mutant
from jaxgpt_tools.mutants.run import Limits, Outcome, run_mutant

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path("runs/mutants/results.json")  # ignored: a run's results, merged by id across runs
DOC = Path("docs/PARITY.md")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mutants", default="", help="comma-separated ids (default: the whole catalogue)")
    parser.add_argument("--ref", default="HEAD", help="the commit whose tracked files are mutated")
    parser.add_argument("--check", action="store_true", help="only check that every snippet applies once")
    parser.add_argument("--docs-only", action="store_true", help="write the matrix from the stored results, run nothing")
    parser.add_argument("--write-docs", action="store_true", help="write the matrix into docs/PARITY.md's section")
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON of results, merged by id")
    parser.add_argument("--targeted-timeout", type=float, default=Limits.targeted_s)
    parser.add_argument("--suite-timeout", type=float, default=Limits.suite_s)
    parser.add_argument("--suite-marker", default=Limits.suite_marker, help="pytest -m of the fallback suite")
    parser.add_argument("--no-suite", action="store_true", help="targeted tests only (a survivor is not run further)")
    parser.add_argument("--note", action="append", default=[], help="a line for the section (how this matrix was made)")
    return parser.parse_args(argv)


def short_hash(ref: str) -> str:
    """`ref` as a short commit hash (what a mutant was run on)."""
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", ref],
                          check=True, capture_output=True, text=True).stdout.strip()


def run_all(mutants: Sequence[Mutant], ref: str, limits: Limits, results_path: Path) -> dict[str, Outcome]:
    """Each mutant in its own copy of the tree at `ref`; results saved after every mutant (a stopped
    run keeps what it finished)."""
    results, tree = load_results(results_path), short_hash(ref)
    with tempfile.TemporaryDirectory(prefix="jaxgpt-mutants-") as scratch:
        base = export_tracked(REPO, Path(scratch) / "base", ref)
        check_mutants(base, mutants)  # every stale snippet refused before any test runs
        for mutant in mutants:
            outcome = replace(run_mutant(mutant, base, Path(scratch) / "work", limits, REPO.parent / "shared" / "upstream"),
                              tree=tree)
            results[mutant.id] = outcome
            save_results(results_path, results)
            print(f"{outcome.id:28s} {outcome.status:10s} {outcome.seconds:6.0f} s  {outcome.killed_by}", flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    mutants = select(args.mutants)
    results_path = args.results if args.results.is_absolute() else REPO / args.results
    if args.check:
        with tempfile.TemporaryDirectory(prefix="jaxgpt-mutants-") as scratch:
            check_mutants(export_tracked(REPO, Path(scratch), args.ref), mutants)
        print(f"{len(mutants)} mutants apply to {args.ref}")
        return 0
    limits = Limits(args.targeted_timeout, args.suite_timeout, args.suite_marker, not args.no_suite)
    started = time.monotonic()
    results = load_results(results_path) if args.docs_only else run_all(mutants, args.ref, limits, results_path)
    shown = [m for m in CATALOGUE if m.id in results] if args.docs_only else list(mutants)
    print("\n".join(matrix_rows(shown, results)))
    print(summary(shown, results), f"in {time.monotonic() - started:.0f} s")
    if args.write_docs:
        total = sum(results[m.id].seconds for m in CATALOGUE if m.id in results)
        trees = sorted({results[m.id].tree or "unrecorded" for m in CATALOGUE if m.id in results})
        info = RunInfo("make mutants", limits.suite_marker, total, ", ".join(trees), tuple(args.note))
        write_section(REPO / DOC, section(CATALOGUE, results, info))
    survivors = [m.id for m in shown if m.id in results and results[m.id].status in ("survived", "timeout", "error")]
    return 1 if survivors else 0
