"""Every GPU number from one lease: one command of at most 10 minutes on the GPU machine.

    # from a checkout holding data/sample (the GPT-2 sample shards) and runs/upstream (the record's
    # script: python scripts/fetch_record.py --log ../shared/upstream/2025-01-16_Sub3Min/<log>.txt):
    run(timeout_s=600, carry=["data/sample", "runs/upstream"],
        command="PYTHONPATH=. python3 scripts/device_plan.py --out $OUT")

    python scripts/device_plan.py --cpu --out runs/device_plan   # the same plan with CPU stand-ins

Steps, caps, the deadline and the files it leaves (8 at most, flat): jaxgpt_tools/gpu/device_plan.py.
Exit status: 0 when every step ran to its end, 1 when one failed, timed out or was skipped.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from jaxgpt_tools.common import command
from jaxgpt_tools.common.log import progress
from jaxgpt_tools.gpu import device_plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where the (at most 8) flat result files go ($OUT)")
    parser.add_argument("--work", type=Path, help="the steps' own folders (default: a temporary folder)")
    parser.add_argument("--deadline", type=float, default=device_plan.PlanOptions.deadline_s,
                        help="seconds for the whole plan (default %(default)s: the tool's 600 less a margin)")
    parser.add_argument("--only", help="comma-separated steps to run (default: all, in priority order)")
    parser.add_argument("--attention", default=device_plan.PlanOptions.jax_attention,
                        help="jaxgpt's attention backend in its step (default %(default)s)")
    parser.add_argument("--jaxgpt-args", default="", metavar="FLAGS",
                        help="more flags for jaxgpt's run, one string (e.g. '--remat block'): an A/B test of one change")
    parser.add_argument("--record-script", type=Path, default=device_plan.PlanOptions.record_script,
                        help="the record's own script (default: where scripts/fetch_record.py writes it)")
    parser.add_argument("--cap", action="append", default=[], metavar="STEP=SECONDS",
                        help="another cap for one step (repeatable; defaults: jaxgpt_tools/gpu/device_plan.py DEFAULT_CAPS)")
    parser.add_argument("--cpu", action="store_true", help="CPU stand-ins of the GPU commands, to test the plan here")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="device_plan_"))
    options = device_plan.PlanOptions(out=args.out, work=work, deadline_s=args.deadline, jax_attention=args.attention,
                                          record_script=args.record_script, jaxgpt_args=tuple(shlex.split(args.jaxgpt_args)))
    if args.cpu:
        options = device_plan.cpu_stand_ins(options)
    try:
        options = replace(options, caps={**options.caps, **device_plan.parse_caps(args.cap, options.caps)})
    except ValueError as error:
        parser.error(str(error))
    steps = device_plan.record_steps(options)
    if args.only:
        wanted = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = sorted(set(wanted) - {step.name for step in steps})
        if unknown:
            parser.error(f"unknown steps {unknown}; choose from {[step.name for step in steps]}")
        steps = [step for step in steps if step.name in wanted]
    def run() -> int:
        summary = device_plan.run_plan(steps, options, on_publish=lambda name, step: progress(
            "device_plan", f"{name}: {step['status']} in {step.get('seconds')} s {step.get('reason') or ''}"))
        print((args.out / device_plan.SUMMARY_MD).read_text())
        # 1 when a step failed, timed out or was skipped: the summary says which and why.
        return 0 if all(step["status"] == "ok" for step in summary["steps"].values()) else 1

    return command.run("device_plan", run)


if __name__ == "__main__":
    sys.exit(main())
