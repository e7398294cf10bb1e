"""Where do jaxgpt's and torch_ref's trajectories part? Step by step, torch_ref driving.

    python scripts/step_bisect.py [--ns fp32|bf16] [--init record|signal] [--swap-step1-scalars]

What each printed line compares: jaxgpt_tools/parity/step_bisect.py.
"""

from __future__ import annotations

import argparse
import sys

from jaxgpt_tools.common import command
from jaxgpt_tools.parity.step_bisect import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--init", choices=("record", "signal"), default="record")
    parser.add_argument("--swap-step1-scalars", action="store_true",
                        help="give jaxgpt's own run torch_ref's step-1 gradients of the scalars, nothing else")
    args = parser.parse_args(argv)
    return command.run("step_bisect", lambda: run(args.ns, args.init, args.swap_step1_scalars))


if __name__ == "__main__":
    sys.exit(main())
