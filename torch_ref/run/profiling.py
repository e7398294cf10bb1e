"""`--profile START:STOP`: a torch.profiler trace of chosen training steps.

Steps are numbered as the train lines show them (`step:S/N` is the update made at loop step
S - 1), as in jaxgpt.run.profiling. Each rank writes the Chrome trace of its own process to
`<out_dir>/profile/<run_id>/trace_rank<r>.json` once step STOP has finished (CUDA synchronised
first); every traced step is marked by a `train_step_<S>` range. Open it in ui.perfetto.dev or
chrome://tracing; `python scripts/trace_kernels.py <out_dir>/profile/<run_id>` ranks its
kernels. The traced steps' train_time includes the profiler's overhead. The window is parsed
and checked as jaxgpt's is (runkit.cli.parse_profile_window, runkit.profiling.check_window).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def trace_path(out_dir: str, run_id: str, rank: int) -> Path:
    return Path(out_dir) / "profile" / run_id / f"trace_rank{rank}.json"


class StepTrace:
    """torch.profiler around a window of steps: (START, STOP) in train-line numbering, None for none."""

    def __init__(self, window: tuple[int, int] | None, path: Path, device: torch.device) -> None:
        self.window, self.path, self.device = window, path, device
        self._profiler: profile | None = None
        self._mark: record_function | None = None  # the traced step's range, open

    def before(self, step: int) -> None:
        """Before loop step `step`: start the trace at the window's first step, open its mark."""
        if self.window is None or not self.window[0] - 1 <= step <= self.window[1] - 1:
            return
        if self._profiler is None:
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
            self._profiler = profile(activities=activities)
            self._profiler.start()
        self._mark = record_function(f"train_step_{step + 1}")
        self._mark.__enter__()

    def after(self, step: int) -> Path | None:
        """After loop step `step`: close its mark; after the window's last step write the trace
        and return its path."""
        if self._mark is not None:
            mark, self._mark = self._mark, None
            mark.__exit__(None, None, None)
        if self.window is None or step != self.window[1] - 1:
            return None
        self.stop()
        return self.path

    def stop(self) -> None:
        """Stop the profiler and write the trace."""
        if self._profiler is None:
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        profiler, self._profiler = self._profiler, None
        profiler.stop()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(self.path))
