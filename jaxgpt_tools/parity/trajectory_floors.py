"""The trajectory rows' noise floors (the record miniature's record-init and signal-init rows, each
lineage preset's row; the record-init row again with the record's bf16 Newton-Schulz), measured once from several samples and kept in
artifacts/parity/trajectory_floors.json (scripts/trajectory_floors.py writes it; the rows read it):
11 samples per row (12 from the record's init) take ~7 minutes over the six rows on a 2-core CPU,
too long for every test run.

A sample (checks_trajectory.floor_samples measures them) is the row's run against itself under a
perturbation of rounding size: jaxgpt on 1 vs 2 devices (a row's live sample, which checks the
stored spread still describes the code; from the record's init torch_ref with float64 RMSNorm
internals is), and jaxgpt's and torch_ref's runs from initial states
one ulp apart (floors.ulp_perturbed, seeds floors.ULP_SEEDS), each against the same framework's
unperturbed run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.parity import floors

ARTIFACT = REPO_ROOT / "artifacts" / "parity" / "trajectory_floors.json"
DEVICES_SAMPLE = "jaxgpt 1 vs 2 devices"
NORM_SAMPLE = "torch_ref float64 norm"  # the record-init row's live sample (its RMSNorm more accurate)
# checks_trajectory's record-init rows (fp32 and the record's bf16 Newton-Schulz) and signal-init
# row; the others are lineage presets.
RECORD_INIT_ROW, SIGNAL_ROW = "record, record init", "record, signal init"
BF16_NS_ROW = "record, record init, bf16 Newton-Schulz"


def rows() -> tuple[str, ...]:
    """Every row with a stored floor: RECORD_INIT_ROW, SIGNAL_ROW, BF16_NS_ROW, then the lineage presets."""
    from jaxgpt_tools.parity.checks_forward import LINEAGE_CHECKED

    return (RECORD_INIT_ROW, SIGNAL_ROW, BF16_NS_ROW, *LINEAGE_CHECKED)


def write(names: list[str], measure: Callable[[str], dict[str, list[float]]], out: Path = ARTIFACT) -> dict:
    """Measure every row in `names` (`measure`: checks_trajectory.floor_samples) and write them into
    `out` (JSON; rows stored before and not measured now are kept), with the machine it ran on."""
    from jaxgpt_tools.common.machine import summary

    stored = json.loads(out.read_text())["rows"] if out.is_file() else {}
    measured = {name: measure(name) for name in names}
    data = {"machine": list(summary()), "command": "python scripts/trajectory_floors.py",
            "rows": {name: measured.get(name, stored.get(name)) for name in rows() if name in measured or name in stored}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    return data


def spreads(name: str, path: Path = ARTIFACT) -> tuple[floors.Spread, floors.Spread, dict[str, list[float]]]:
    """(the loss's spread, the final matrices' spread, every stored sample and the stored "gap") of
    row `name`; FileNotFoundError naming the command when the artifact or the row is missing."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: run python scripts/trajectory_floors.py")
    stored = json.loads(path.read_text())["rows"]
    if name not in stored:
        raise FileNotFoundError(f"{path} has no floors for {name!r}: run python scripts/trajectory_floors.py")
    samples = {key: value for key, value in stored[name].items() if key != "gap"}
    return (floors.Spread(tuple(v[0] for v in samples.values()), 2.4e-7),
            floors.Spread(tuple(v[1] for v in samples.values()), 1e-6), stored[name])


def describe(path: Path = ARTIFACT) -> list[str]:
    """PARITY.md's "Noise floors" section (markdown lines): each stored row's spread of losses and
    final matrices and its gap as measured alongside; [] without the artifact."""
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    lines = ["## Noise floors", "",
             "A trajectory row's bound is a multiple of the upper quantile (q90) of its floor's samples: each run against "
             "itself under a perturbation of rounding size (jaxgpt on 1 vs 2 devices; jaxgpt's and torch_ref's runs "
             f"from {len(floors.ULP_SEEDS)} initial states one ulp apart, `jaxgpt_tools.parity.floors.ulp_perturbed`). "
             "The rows below are stored in `artifacts/parity/trajectory_floors.json` (`python scripts/trajectory_floors.py`, "
             f"on {data['machine'][0]}); each row's run checks its live sample against it (1 vs 2 devices; from the "
             "record's init: torch_ref with float64 RMSNorm internals, also a sample there). The records'-code "
             "training rows measure their 7 samples live (their details column).", "",
             "| row | samples | val loss: min / median / q90 | final matrices: min / median / q90 "
             "| jaxgpt vs torch_ref then (matrices) | gap / q90 |",
             "|---|---|---|---|---|---|"]
    for name in data["rows"]:
        loss, matrices, stored = spreads(name, path)
        lines.append(f"| {name} | {len(matrices.samples)} | {loss.low:.2e} / {loss.median:.2e} / {loss.upper:.2e} | "
                     f"{matrices.low:.2e} / {matrices.median:.2e} / {matrices.upper:.2e} | {stored['gap'][1]:.2e} | "
                     f"{stored['gap'][1] / matrices.upper:.1f}x |")
    return lines
