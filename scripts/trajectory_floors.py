"""Measure the trajectory rows' noise floors (11 samples per row) and write
artifacts/parity/trajectory_floors.json, which the rows read.

    python scripts/trajectory_floors.py [--only ROW ...]

About 7 minutes on a 2-core CPU (jaxgpt_tools.parity.trajectory_floors).
"""

from __future__ import annotations

import os

# jaxgpt's 2-device runs need virtual CPU devices, set before jax loads.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse  # noqa: E402
import sys  # noqa: E402

from jaxgpt_tools.common import command  # noqa: E402
from jaxgpt_tools.parity.checks_trajectory import floor_samples  # noqa: E402
from jaxgpt_tools.parity.trajectory_floors import rows, write  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=rows(), help="these rows only (the file keeps the others)")
    args = parser.parse_args(argv)
    return command.run("trajectory_floors", lambda: write(list(args.only or rows()), floor_samples))


if __name__ == "__main__":
    sys.exit(main())
