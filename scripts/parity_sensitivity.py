"""Why a record-init run moves with the implementation and the CPU it runs on (tiny preset, fp32
policy, the record's bf16 Newton-Schulz): step-1 scalar gradients, then 30 steps of val loss.

    python scripts/parity_sensitivity.py [--steps 30] [--gradients-only]

Prints markdown tables; what each part measures: jaxgpt_tools/parity/sensitivity.py.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # jaxgpt's 2 devices; before jax loads

import argparse  # noqa: E402
import sys  # noqa: E402

from jaxgpt_tools.common import command
from jaxgpt_tools.parity.sensitivity import sensitivity_report  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--gradients-only", action="store_true", help="only part 1 (well under a minute)")
    args = parser.parse_args(argv)
    return command.run("parity_sensitivity", lambda: sensitivity_report(args.steps, args.gradients_only))


if __name__ == "__main__":
    sys.exit(main())
