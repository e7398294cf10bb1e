"""The torch APIs of the GPU-only code paths, checked against the torch this interpreter has.

    python scripts/torch_api_check.py --json artifacts/gpu/torch_2.11.0_api.json
    make torch-api-check            # the same under the GPU machine's torch, in .venv-torch211

Every torch API the record's training script and torch_ref's CUDA branches call, resolved and
its arguments bound to its signature; then the exercises a CPU allows (the record's FP8 custom
ops, torch_ref's _scaled_mm branch, BlockMask and flex_attention, compiled Newton-Schulz...).
Prints one line per row; exit 1 when a row failed. How: jaxgpt_tools/gpu/torch_api.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jaxgpt_tools.common import command
from jaxgpt_tools.common.artifacts import repo_relative_paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the environment and every row to this JSON file")
    parser.add_argument("--no-exercise", action="store_true", help="signatures only (no code run)")
    parser.add_argument("--quick", action="store_true", help="leave out the exercises that compile with Inductor")
    args = parser.parse_args(argv)
    invocation = " ".join(["scripts/torch_api_check.py", *(argv if argv is not None else sys.argv[1:])])

    def body() -> int:
        from jaxgpt_tools.gpu import torch_api, torch_exercises

        result = {"command": invocation, **torch_exercises.report(exercise=not args.no_exercise, slow=not args.quick)}
        print(f"python {result['python']}, torch {result['torch']} (CUDA {result['torch_cuda']}), "
              f"triton {result['triton']}")
        print(torch_api.table(result["rows"]))
        print(f"{len(result['rows'])} rows: {result['failed']} failed, {result['skipped']} skipped")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(repo_relative_paths(json.dumps(result, indent=1)) + "\n")
        return 1 if result["failed"] else 0

    return command.run("torch_api_check", body)


if __name__ == "__main__":
    sys.exit(main())
