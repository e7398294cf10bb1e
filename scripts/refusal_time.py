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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainer", choices=sorted(TRAINERS), default="jaxgpt")
    parser.add_argument("--repeats", type=int, default=5, help="refused commands timed (default 5)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        print("refusal_time.py: error: --repeats must be >= 1", file=sys.stderr)
        return 2
    try:
        result = measure(args.trainer, args.repeats)
    except RuntimeError as error:
        print(f"refusal_time.py: error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
