"""Training of the Sub3Min GPT on a data-parallel device mesh: `python -m jaxgpt.train`.

This is the command, kept light: it parses the flags (jaxgpt.run.cli) and, for a run of one
process, takes the locks on every place the run writes (jaxgpt.run.claim) before it imports
jax, flax and orbax, so that `--help`, a usage error and a second run on a live run's folders
answer in a fraction of a second (docs/RELIABILITY.md, "Two runs, one folder"). Then the loop
(jaxgpt.loop) runs the record's compiled step (jaxgpt.step). Docs: docs/TRAINING.md.

The loop's and the step's names (`train`, `RunResult`, `build_model`, ...) are still reachable
here for callers written before the split, imported on first use (`__getattr__`); new code
imports jaxgpt.loop or jaxgpt.step.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

from jaxgpt.run import claim as run_claim
from jaxgpt.run.cli import RunOptions, parse_args, print_error

__all__ = ["RunOptions", "main", "parse_args"]

# Names of jaxgpt.loop and jaxgpt.step that this module answered before they were split off.
_MOVED = {"loop": ("RunResult", "TrainLoop", "finish_run", "initial_state", "train", "train_from"),
          "step": ("AXIS", "CompiledSteps", "all_finite", "build_model", "compile_steps", "device_model_config",
                   "evaluate", "make_optimizer", "one_device_steps", "place_state", "prepare_steps", "replicate",
                   "stop_flags")}


def __getattr__(name: str) -> Any:
    for module, names in _MOVED.items():
        if name in names:
            return getattr(importlib.import_module(f"jaxgpt.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry. Exit codes (the same in torch_ref.train): 2 for a usage error (a bad flag or
    an invalid config value, one `PROG: error: ...` line), 1 for a runtime error (a folder
    another run holds, missing, bad or exhausted data, a mismatched or damaged checkpoint, an
    unwritable path, a failed save, a NaN or infinite loss, a lost process: one line, the
    traceback only with --debug), 128 + the signal for SIGINT (130) / SIGTERM (143)."""
    try:
        preset, options = parse_args(argv)
    except ValueError as error:
        print_error(error)
        return 2
    try:
        claim = run_claim.claim_one_process(preset, options)  # None: several processes (jaxgpt.run.claim)
    except (ValueError, OSError) as error:
        if options.debug:
            raise
        print_error(error)
        return 1
    try:
        from jaxgpt import loop  # noqa: PLC0415 - jax, flax and orbax only once the run holds its folders
    except BaseException:
        if claim is not None:
            claim.lock.release()
        raise
    return loop.run_command(preset, options, claim)


if __name__ == "__main__":
    sys.exit(main())
