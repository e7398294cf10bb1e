"""Train the record's GPT in PyTorch: `python -m torch_ref.train` (RECORD.md sections 7-9).

    torchrun --standalone --nproc_per_node 8 -m torch_ref.train            # the record, 8 GPUs
    python -m torch_ref.train --preset tiny --device cpu                   # one CPU process
    python -m torch_ref.train --preset tiny --device cpu --devices 2       # two gloo processes
    python -m torch_ref.train --preset tiny --checkpoint-every 20          # runs/checkpoints/<run id>/<step>.pt
    python -m torch_ref.train --preset tiny --resume runs/checkpoints/ID   # continue exactly where it stopped

This is the command, kept light: it parses the flags (torch_ref.run.cli) and takes the locks on
every place the run writes (torch_ref.run.claim) before it imports torch, so that `--help`, a
usage error and a second run on a live run's folders answer in a fraction of a second
(docs/RELIABILITY.md, "Two runs, one folder"). Then the loop (torch_ref.loop) runs.

The loop's names (`train`, `run`, `RunResult`, `forward_backward`, ...) are still reachable here
for callers written before the split, imported on first use (`__getattr__`); new code imports
torch_ref.loop.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

from torch_ref.run import claim
from torch_ref.run.cli import RunOptions, parse_args, parse_flags, print_error

__all__ = ["RunOptions", "main", "parse_args"]

# Names of torch_ref.loop that this module answered before the loop was split off.
_MOVED = ("RUNTIME_ERRORS", "RunResult", "average_gradients", "build_model", "evaluate", "forward_backward", "launch",
          "run", "train", "window_argument")


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        return getattr(importlib.import_module("torch_ref.loop"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry, with jaxgpt.train's convention: 2 for a usage error (bad flag or value),
    1 for a runtime error (a folder another run holds, data, checkpoint, devices, paths, a failed
    save, a NaN or infinite loss, a lost rank), 128 + the signal for SIGINT (130) and SIGTERM
    (143); one line each."""
    try:
        preset, options, device = parse_flags(argv)
    except ValueError as err:
        print_error(err)
        return 2
    try:
        options, held = claim.claim_run(preset, options)
    except (ValueError, OSError) as err:
        if options.debug:
            raise
        print_error(err)
        return 1
    try:
        from torch_ref import loop  # noqa: PLC0415 - torch only once the run holds its folders
    except BaseException:
        held.release()
        raise
    return loop.run_command(preset, options, device, held)


if __name__ == "__main__":
    sys.exit(main())
