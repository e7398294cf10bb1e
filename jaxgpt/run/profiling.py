"""`--profile START:STOP`: a JAX profiler trace of chosen training steps.

Steps are numbered as the train lines show them: step S is the update whose line reads
`step:S/N` (the loop's update S - 1), so `--profile 2:3` traces the updates logged as step:2 and
step:3. The loop waits for the step before START so that the trace holds only the chosen
steps, and for step STOP before the trace is written; the traced steps' train_time includes
the profiler's overhead. The window is parsed and checked as torch_ref's is
(runkit.cli.parse_profile_window, runkit.profiling.check_window).

The trace goes to `<out_dir>/profile/<run_id>/plugins/profile/<time>/` (a `process<k>` folder
per process before `plugins` when there are several): `<host>.xplane.pb` for TensorBoard's
profile plugin or XProf (`--logdir <out_dir>/profile/<run_id>`), and `perfetto_trace.json.gz`
for ui.perfetto.dev. `python scripts/trace_kernels.py <out_dir>/profile/<run_id>` ranks its
kernels by total time.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import jax


def trace_folder(out_dir: str, run_id: str, process_index: int, process_count: int) -> Path:
    """<out_dir>/profile/<run_id>, with a folder per process when there are several."""
    folder = Path(out_dir) / "profile" / run_id
    return folder / f"process{process_index}" if process_count > 1 else folder


class StepTrace:
    """Starts and stops the JAX profiler around a window of steps: (START, STOP) in train-line
    numbering (runkit.cli.parse_profile_window), None for no trace."""

    def __init__(self, window: tuple[int, int] | None, directory: Path) -> None:
        self.window = window
        self.directory = directory
        self.running = False

    def starts_before(self, step: int) -> bool:
        """The trace begins before loop step `step` is dispatched."""
        return self.window is not None and step == self.window[0] - 1

    def ends_after(self, step: int) -> bool:
        """The trace ends once loop step `step` has finished."""
        return self.window is not None and step == self.window[1] - 1

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        jax.profiler.start_trace(str(self.directory), create_perfetto_trace=True)
        self.running = True

    def stop(self) -> Path:
        """Write the trace; returns its folder."""
        self.running = False
        jax.profiler.stop_trace()
        return self.directory

    def abandon(self) -> None:
        """Stop a trace left running by an error or a signal (writing what it holds)."""
        if self.running:
            with contextlib.suppress(Exception):
                self.stop()
