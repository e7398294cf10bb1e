"""Every GPU number from one lease: one command of at most 10 minutes on the GPU machine.

    # from a checkout holding data/sample (the GPT-2 sample shards) and runs/upstream (the record's
    # script: python scripts/fetch_record.py --log ../shared/upstream/2025-01-16_Sub3Min/<log>.txt):
    python scripts/device_plan.py --check --caches artifacts/gpu/compile_caches.tar.gz   # here, a second
    run(timeout_s=600, carry=["data/sample", "runs/upstream"],
        command="PYTHONPATH=. python3 scripts/device_plan.py --caches artifacts/gpu/compile_caches.tar.gz --out $OUT")

    python scripts/device_plan.py --cpu --out runs/device_plan   # the same plan with CPU stand-ins

Steps and caps: jaxgpt_tools/gpu/plan_steps.py; the deadline and the files it leaves (7 at most, flat):
jaxgpt_tools/gpu/device_plan.py;
artifacts/gpu/README.md gives the lease's commands with their arithmetic.
Exit status: 0 when every step ran to its end, 1 when one failed, timed out or was skipped, 2 for
a plan refused before it ran (a deadline past one device command, caps over it with --strict-caps).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from types import FrameType

from jaxgpt_tools.common import command
from jaxgpt_tools.common.log import progress
from jaxgpt_tools.gpu import device_plan, plan_budget, plan_steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="where the (at most 7) flat result files go ($OUT); not with --check")
    parser.add_argument("--work", type=Path, help="the steps' own folders (default: a temporary folder)")
    parser.add_argument("--deadline", type=float, default=plan_steps.PlanOptions.deadline_s,
                        help="seconds for the whole plan (default %(default)s: the tool's 600 less a margin)")
    parser.add_argument("--only", help="comma-separated steps to run, in the plan's order (default: all)")
    parser.add_argument("--attention", default=plan_steps.PlanOptions.jax_attention,
                        help="jaxgpt's attention backend in its step (default %(default)s)")
    parser.add_argument("--jaxgpt-args", default="", metavar="FLAGS",
                        help="more flags for jaxgpt's run, one string (e.g. '--remat block'): an A/B test of one change")
    parser.add_argument("--record-script", type=Path, default=plan_steps.PlanOptions.record_script,
                        help="the record's own script (default: where scripts/fetch_record.py writes it)")
    parser.add_argument("--cap", action="append", default=[], metavar="STEP=SECONDS",
                        help="another cap for one step (repeatable; defaults: jaxgpt_tools/gpu/plan_steps.py DEFAULT_CAPS)")
    parser.add_argument("--strict-caps", action="store_true",
                        help="refuse caps the deadline cannot hold in the worst case (default: the later steps' shrink)")
    parser.add_argument("--caches", type=Path, metavar="ARCHIVE",
                        help="compile caches of an earlier lease (its caches.tar.gz), unpacked before the first step")
    parser.add_argument("--check", action="store_true",
                        help="check the inputs, the caches' archive and the caps here, in a second, and run nothing")
    parser.add_argument("--cpu", action="store_true", help="CPU stand-ins of the GPU commands, to test the plan here")
    args = parser.parse_args(argv)
    if args.out is None and not args.check:
        parser.error("--out is required (or --check)")
    # --check writes nothing: its options name no folders.
    work = Path() if args.check else args.work or Path(tempfile.mkdtemp(prefix="device_plan_"))
    options = plan_steps.PlanOptions(out=args.out or Path(), work=work, deadline_s=args.deadline,
                                      jax_attention=args.attention, record_script=args.record_script,
                                      jaxgpt_args=tuple(shlex.split(args.jaxgpt_args)), caches_archive=args.caches,
                                      strict_caps=args.strict_caps)
    if args.cpu:
        options = plan_steps.cpu_stand_ins(options)
    try:
        options = replace(options, caps={**options.caps, **plan_steps.parse_caps(args.cap, options.caps)})
    except ValueError as error:
        parser.error(str(error))
    steps = plan_steps.record_steps(options)
    if args.only:
        wanted = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = sorted(set(wanted) - {step.name for step in steps})
        if unknown:
            parser.error(f"unknown steps {unknown}; choose from {[step.name for step in steps]}")
        steps = [step for step in steps if step.name in wanted]
    if args.check:
        lines, problems = device_plan.local_check(steps, options)
        print("\n".join(lines + [f"PROBLEM: {problem}" for problem in problems] or ["nothing to check"]))
        return 1 if problems else 0
    try:
        plan_time = device_plan.budget(steps, options)
    except plan_budget.PlanRefused as error:
        parser.error(str(error))
    for note in plan_time.notes:
        progress("device_plan", note)

    def run() -> int:
        # The running step's group is ended and the summary published; the caller's handler is put
        # back after (main is also called in-process, by tests).
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            summary = device_plan.run_plan(steps, options, on_publish=lambda name, step: progress(
                "device_plan", f"{name}: {step['status']} in {step.get('seconds')} s {step.get('reason') or ''}"))
        finally:
            signal.signal(signal.SIGTERM, previous)
        print((options.work / device_plan.SUMMARY_MD).read_text())
        # 1 when a step failed, timed out or was skipped: the summary says which and why.
        return 0 if all(step["status"] == "ok" for step in summary["steps"].values()) else 1

    return command.run("device_plan", run)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
