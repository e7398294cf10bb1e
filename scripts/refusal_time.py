"""How fast a second run on a running run's folders is refused (docs/RELIABILITY.md).

    python scripts/refusal_time.py --trainer jaxgpt --repeats 5
    python scripts/refusal_time.py --trainer torch_ref --repeats 5

Starts a first run, stops it with SIGSTOP once it holds its folders, times the same command
`--repeats` times (each refused: exit 1, one line) and the import of the trainer's module alone;
prints one JSON object. How: jaxgpt_tools/bench/refusal_time.py.
"""

from __future__ import annotations

import argparse
import json
import sys

from jaxgpt_tools.bench.refusal_time import TRAINERS, measure
from jaxgpt_tools.common import command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainer", choices=sorted(TRAINERS), default="jaxgpt")
    parser.add_argument("--repeats", type=int, default=5, help="refused commands timed (default 5)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    return command.run("refusal_time", lambda: print(json.dumps(measure(args.trainer, args.repeats), indent=1)))


if __name__ == "__main__":
    sys.exit(main())
