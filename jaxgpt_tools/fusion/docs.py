"""docs/FUSION.md and its plot, from the fusion study's records (never edited by hand).

Called by `python scripts/fusion_report.py --write-docs` or `--from-results DIR...`. Every
number and every sentence of the page comes from the records through fusion_claims (the
sentences) or the tables below; tests/tools/fusion/test_claims.py regenerates the page from the
committed results and compares.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jaxgpt_tools.fusion import claims as claims_lib
from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.fusion.claims import MODE_NAMES, PART_NAMES, find, label, rows

LAYOUTS = ("merged", "separate")


def mb(value: float | None) -> str:
    """Megabytes, three significant digits below 100 MB."""
    if value is None:
        return "-"
    if value < 1e4:
        return "<0.01"
    return f"{value / 1e6:.3g}" if value < 1e8 else f"{value / 1e6:,.0f}"


def ms(time: dict[str, Any] | None) -> str:
    """median [p25-p75] (n) of a timing, in ms."""
    if not time:
        return "-"
    return f"{time['median_ms']:.3g} [{time['p25_ms']:.3g}-{time['p75_ms']:.3g}] ({time['repeats']})"


def shape_text(row: dict[str, Any]) -> str:
    return f"D {row['D']}, T {row['T']:,}"


def columns(table: list[dict[str, Any]], shape: str, part: str = "qkv") -> list[tuple[str, str]]:
    """(compiler, device) pairs with programs of `part` at `shape`, XLA first."""
    found = {(r["compiler"], r["device"]) for r in table if r["shape"] == shape and r["part"] == part and r["variant"] == "default"}
    return sorted(found, key=lambda c: (c[0] != "xla", c[1]))


def shapes_of(table: list[dict[str, Any]], part: str = "qkv") -> list[str]:
    """Shapes with programs of `part`, smallest first."""
    found = {(r["T"] * r["D"], r["shape"]) for r in table if r["part"] == part}
    return [name for _, name in sorted(found)]


def program_table(table: list[dict[str, Any]], shape: str, part: str) -> list[str]:
    """Per compiler, device, mode and layout: kernels (GEMMs), MB moved (x the minimum), scratch, time."""
    lines = ["| compiler | program | layout | kernels (GEMMs) | MB moved (x minimum) | XLA scratch MB | time, ms: median [IQR] (n) |",
             "|---|---|---|---|---|---|---|"]
    for compiler, device in columns(table, shape, part):
        for mode in MODE_NAMES:
            for layout in LAYOUTS:
                row = find(table, compiler=compiler, device=device, part=part, mode=mode, layout=layout, shape=shape)
                if row is None:
                    continue
                over = f" ({row['over_min']:.1f}x)" if row["over_min"] else ""
                time = ms(row["time"]) if row["time"] else ("not run (compile only)" if device == "h100-compile-only" else "not timed")
                loops = f", {row['loop_kernels']} in loops" if row["loop_kernels"] else ""
                lines.append(f"| {label(compiler, device)} | {PART_NAMES[part]} {MODE_NAMES[mode]} | {layout} | "
                             f"{row['kernels']} ({row['gemm_kernels']}){loops} | {mb(row['bytes'])}{over} | {mb(row['temp_bytes'])} | {time} |")
    return lines + [""]


def kernel_rows(record: dict[str, Any], minimum: float | None) -> list[str]:
    """The per-kernel table of one QKV program: what each kernel fuses, the bytes it moves
    (totals against the program's `minimum`) and, where a profile names it, its time per call."""
    profiled = {k["name"]: k["ms_per_call"] for k in (record.get("kernel_times") or {}).get("kernels", [])}
    timed = any(k["name"] in profiled for k in record["kernel_table"])
    head = "| # | kernel | kind | stages | fuses | MB read | MB written |" + (" ms per call (profile) |" if timed else "")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for i, kernel in enumerate(record["kernel_table"], 1):
        stages = ", ".join(claims_lib.kernel_stages(record, kernel)) or "-"
        runs = f" x{kernel['runs']}" if kernel.get("runs", 1) != 1 else ""
        time = (f" {profiled[kernel['name']]:.3g} |" if kernel["name"] in profiled else " - |") if timed else ""
        lines.append(f"| {i} | `{kernel['name']}`{runs} | {kernel['kind']} | {stages} | {claims_lib.fused_text(record, kernel)} | "
                     f"{mb(kernel['read'])} | {mb(kernel['written'])} |{time}")
    total_read = sum(k["read"] * k.get("runs", 1) for k in record["kernel_table"])
    total_written = sum(k["written"] * k.get("runs", 1) for k in record["kernel_table"])
    lines.append(f"| | **total** | | | | **{mb(total_read)}** | **{mb(total_written)}** |" + (" |" if timed else ""))
    if minimum:
        lines.append(f"| | minimum (arguments read, results written once): {mb(minimum)} MB; the kernels move "
                     f"{(total_read + total_written) / minimum:.1f}x | | | | | |" + (" |" if timed else ""))
    return lines + [""]


def relative(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path, start)).as_posix()


def page(runs: list[dict[str, Any]], records: list[dict[str, Any]], *, command: str, artifacts_dir: Path,
         docs_dir: Path) -> str:
    """The whole of docs/FUSION.md."""
    table = rows(records)
    made = claims_lib.claims(records, runs)
    artifacts = relative(artifacts_dir, docs_dir)
    out = ["# Fusion study: how XLA and TorchInductor fuse the record's merged-QKV path, and what merging buys", ""]
    out += [" ".join(c.text for c in made if c.key.startswith("answer")), ""]
    out += ["## How these numbers were made", "",
            f"Generated by `{command}`; do not edit by hand (tests/tools/fusion/test_claims.py regenerates it from "
            f"`{relative(artifacts_dir, REPO_ROOT)}/results.json` and runs the check behind every sentence).", ""]
    out += [f"- {c.text}" for c in made if c.key.startswith("method")] + [""]
    out += [f"![QKV path: kernels, bytes and CPU time per compiler and layout]({artifacts}/fusion.png)", ""]
    out += ["## Why each compiler fuses the QKV path as it does", ""]
    out += [f"- {c.text}" for c in made if c.key.startswith("why")] + [""]
    out += ["## The QKV path, program by program", "",
            "Kernels launched per call (GEMMs among them); bytes every kernel reads and writes once, against the "
            "minimum (arguments read once, results written once); XLA's scratch buffer (memory_analysis temp); "
            "time per call on this machine.", ""]
    for shape in shapes_of(table):
        row = find(table, shape=shape, part="qkv")
        out += [f"### {shape_text(row)}", ""] + program_table(table, shape, "qkv")
    ablations = [r for r in table if r["variant"] != "default"]
    if ablations:
        out += ["## Ablation: the flags that decide the merge", ""]
        out += [f"- {c.text}" for c in made if c.key.startswith("ablation")] + [""]
        out += ["| compiler | program | layout | flags | kernels (GEMMs) | MB moved | XLA scratch MB |", "|---|---|---|---|---|---|---|"]
        for ablated in ablations:
            base = find(table, **{k: ablated[k] for k in ("compiler", "device", "part", "mode", "layout", "shape")})
            for row, name in ((base, "default"), (ablated, ablated["variant"])):
                if row is not None:
                    out.append(f"| {label(row['compiler'], row['device'])} | {PART_NAMES[row['part']]} {MODE_NAMES[row['mode']]}, "
                               f"{shape_text(row)} | {row['layout']} | {name} | "
                               f"{row['kernels']} ({row['gemm_kernels']}) | {mb(row['bytes'])} | {mb(row['temp_bytes'])} |")
        out.append("")
    out += ["## What each kernel fuses", "",
            "Per kernel of the QKV path at each compiler's largest shape: its kind, the model stages it computes "
            "(XLA: the jaxgpt functions its instructions were traced from; Inductor: the aten ops it is named after), "
            "the operations it fuses (data movement left out; for a GEMM, before / after the dot) and the bytes it "
            "reads and writes.", ""]
    for record in claims_lib.committed_qkv(records):
        title = (f"{label(record['compiler'], record['device'])}, {MODE_NAMES[record['mode']]}, {record['layout']}, "
                 f"D {record['shape']['model_dim']}, T {record['shape']['seq_len']:,}"
                 + ("" if record.get("variant", "default") == "default" else f", {record['variant']}"))
        body = kernel_rows(record, claims_lib.minimum_bytes(records).get(
            (record["part"], record["mode"], record["layout"], record["shape"]["name"])))
        if record["mode"] == "fwdbwd":
            out += ["<details>", f"<summary>{title}</summary>", ""] + body + ["</details>", ""]
        else:
            out += [f"**{title}**", ""] + body
    out += ["## The whole block, for context", ""]
    out += [f"- {c.text}" for c in made if c.key.startswith("block")] + [""]
    for shape in shapes_of(table, "block"):
        row = find(table, shape=shape, part="block")
        out += [f"### {shape_text(row)}", ""] + program_table(table, shape, "block")
    out += ["## Files", "",
            f"In `{relative(artifacts_dir, REPO_ROOT)}/` (merged beside separate; the other programs are "
            "regenerated by the command above into `runs/fusion/`):", ""]
    out += [f"- [`{name}`]({artifacts}/{name})" for record in claims_lib.committed_qkv(records) for name in record.get("files", [])]
    out += [f"- [`results.json`]({artifacts}/results.json): every program's record (counts, per-kernel tables, times, "
            "versions, commit, machine)", ""]
    return "\n".join(out)


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """One panel per shape (columns) for kernels, MB moved and, where measured, time (rows): per
    compiler and device, merged and separate (and ablations) of the QKV path, forward and
    forward+backward; linear scales."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = [r for r in rows(records) if r["part"] == "qkv"]
    shapes = shapes_of(table)
    metrics = [("kernels", "kernels per call", lambda r: r["kernels"]), ("bytes", "MB moved", lambda r: r["bytes"] / 1e6)]
    if any(r["time"] for r in table):
        metrics.append(("time", "ms per call (median, IQR)", lambda r: r["time"]["median_ms"] if r["time"] else None))
    fig, axes = plt.subplots(len(metrics), len(shapes), figsize=(4.6 * len(shapes), 2.9 * len(metrics)), squeeze=False)
    for col, shape in enumerate(shapes):
        series = [(c, d, layout, "default") for c, d in columns(table, shape) for layout in LAYOUTS]
        series += sorted({(r["compiler"], r["device"], r["layout"], r["variant"]) for r in table
                          if r["shape"] == shape and r["variant"] != "default"})
        groups = sorted({(c, d) for c, d, _, _ in series}, key=lambda c: (c[0] != "xla", c[1]))
        width = 0.8 / max(1, max(sum(1 for s in series if s[:2] == g) for g in groups) * 2)
        for row_index, (key, ylabel, value) in enumerate(metrics):
            ax = axes[row_index][col]
            ticks, tick_labels = [], []
            for g, group in enumerate(groups):
                members = [s for s in series if s[:2] == group]
                for m, mode in enumerate(MODE_NAMES):
                    center = g * 2 + m
                    ticks.append(center)
                    tick_labels.append(f"{label(*group)}\n{MODE_NAMES[mode]}".replace(" (compile only)", "\n(compile only)"))
                    for i, (compiler, device, layout, variant) in enumerate(members):
                        row = find(table, compiler=compiler, device=device, mode=mode, layout=layout, shape=shape, variant=variant)
                        height = value(row) if row else None
                        if height is None:
                            continue
                        x = center + (i - (len(members) - 1) / 2) * width
                        name = layout if variant == "default" else f"{layout}, {variant}"
                        style = {"merged": ("C0", None), "separate": ("C1", "//")}[layout]
                        ax.bar(x, height, width, color=style[0] if variant == "default" else "C2", hatch=style[1],
                               label=name, edgecolor="black", linewidth=0.4)
                        if key == "time" and row["time"]:
                            ax.errorbar(x, height, yerr=[[height - row["time"]["p25_ms"]], [row["time"]["p75_ms"] - height]],
                                        color="black", capsize=2, linewidth=0.8)
            if not ax.patches:
                ax.set_yticks([])
                ax.text(0.5, 0.5, "not timed: compiled without a GPU", transform=ax.transAxes, ha="center", fontsize=8)
            ax.set_xticks(ticks)
            ax.set_xticklabels(tick_labels, fontsize=6)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.grid(axis="y", alpha=0.3)
            if row_index == 0:
                row = find(table, shape=shape)
                missing = "" if any(c == "inductor" for c, _ in groups) else " (Inductor: needs a GPU, not run)"
                ax.set_title(f"QKV path, {shape_text(row)}{missing}", fontsize=9)
            handles, names = ax.get_legend_handles_labels()
            if handles:
                unique = dict(zip(names, handles))
                ax.legend(unique.values(), unique.keys(), fontsize=6)
    fig.suptitle("The QKV path merged vs separate: CPU compiled and timed here; H100 compiled without a GPU (no timing)",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
