"""Run every parity check and write docs/PARITY.md and docs/parity_trajectories.png.

    python scripts/parity_report.py [--only NAME ...] [--out docs/PARITY.md]

The checks are jaxgpt_tools/parity/checks.py's (the same list `pytest parity_tests/test_checks.py`
runs); exit 1 when one fails.
"""

from __future__ import annotations

import os

# jaxgpt's 2-device run of the noise floor needs virtual CPU devices, set before jax loads.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from jaxgpt_tools.common import command
from jaxgpt_tools.common.artifacts import REPO_ROOT  # noqa: E402
from jaxgpt_tools.parity.checks import CHECKS  # noqa: E402
from jaxgpt_tools.parity.report import run_report  # noqa: E402

DOCS = REPO_ROOT / "docs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DOCS / "PARITY.md")
    parser.add_argument("--only", nargs="*", choices=sorted(CHECKS), help="run these checks only")
    args = parser.parse_args(argv)
    # 1 when a check failed: the page is written either way and says which.
    return command.run("parity_report", lambda: 0 if run_report(args.only or list(CHECKS), args.out) else 1)


if __name__ == "__main__":
    sys.exit(main())
