"""Loss curves of training runs: validation (and train) loss against step and against training time
(the library of `scripts/plot_runs.py`).

Each RUN.jsonl is the metrics file a trainer writes (jaxgpt.train: `<out_dir>/logs/<run_id>.jsonl`;
torch_ref.train: `<log_dir>/<uuid>.jsonl`), one JSON object per line with `framework`, `run_id`,
`kind` ("train" or "val"), `step`, `train_loss` or `val_loss`, and `train_time_ms` (the record's
training clock: compilation before step 10 and validation excluded). One colour per run,
labelled "framework run_id" (a uuid shortened to its first 8 digits); validation loss is drawn with markers, train loss as a thin line.
Needs matplotlib (`pip install -e ".[plot]"`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Run:
    """One run's curves: (step, loss, train time in s) per kind."""

    label: str
    val: list[tuple[int, float, float]] = field(default_factory=list)
    train: list[tuple[int, float, float]] = field(default_factory=list)


def read_run(path: str | Path) -> Run:
    """The curves in one metrics file. ValueError naming the file and line for a record that
    is not of the schema, or a file with no records."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such metrics file: {path}")
    run = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            kind = record["kind"]
            point = (int(record["step"]), float(record[f"{kind}_loss"]), float(record["train_time_ms"]) / 1000)
            run_id = str(record["run_id"])
            label = f"{record['framework']} {run_id[:8] if len(run_id) > 16 else run_id}"  # uuids: 8 hex digits
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}:{number}: not a metrics record ({type(error).__name__}: {error})") from error
        if kind not in ("train", "val"):
            raise ValueError(f"{path}:{number}: unknown kind {kind!r}")
        run = run or Run(label)
        getattr(run, kind).append(point)
    if run is None:
        raise ValueError(f"{path}: no metrics records")
    return run


def plot_runs(runs: list[Run], out: str | Path, *, title: str | None = None) -> Path:
    """Two panels, loss against step and against training time, written to `out` (PNG, SVG, PDF
    by suffix)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    figure, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for index, run in enumerate(runs):
        colour = f"C{index}"
        for axis, x in ((by_step, 0), (by_time, 2)):
            # Steps 0..9 run while the step compiles and the clock is reset at step 10: their
            # times are not training time, so the time panel starts at step 10.
            train = [p for p in run.train if x == 0 or p[0] > 10]
            val = [p for p in run.val if x == 0 or p[0] >= 10]
            if train:
                axis.plot([p[x] for p in train], [p[1] for p in train], color=colour, alpha=0.35, linewidth=0.8,
                          label=f"{run.label} train")
            if val:
                axis.plot([p[x] for p in val], [p[1] for p in val], color=colour, marker="o", linewidth=1.8,
                          label=f"{run.label} val")
    for axis, name in ((by_step, "step"), (by_time, "training time (s, from step 10)")):
        axis.set_xlabel(name)
        axis.set_ylabel("loss (nats per token)")
        axis.grid(alpha=0.3)
    by_step.legend(fontsize=8)
    if title:
        figure.suptitle(title)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out
