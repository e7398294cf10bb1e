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

from jaxgpt_tools.common.artifacts import REPO_ROOT, generated_header
from jaxgpt_tools.fusion import autotune, gemm_choice, provenance, related, roofline_claims, width_claims
from jaxgpt_tools.fusion import claims as claims_lib
from jaxgpt_tools.fusion import reasons as reasons_lib
from jaxgpt_tools.fusion import records as records_lib
from jaxgpt_tools.fusion.records import MODE_NAMES, PART_NAMES, find, label, need, rows

LAYOUTS = ("merged", "separate")


def page_claims(study: dict[str, Any]) -> list[claims_lib.Claim]:
    """Every sentence the page states, in page order within each section."""
    records, runs = study["records"], study["runs"]
    sweep = study.get("sweep", [])
    return (claims_lib.answer_claims(records, sweep) + claims_lib.method_claims(records, runs, study.get("equality", []))
            + provenance.provenance_claim(runs, records, sweep + study.get("width_sweep", []))
            + reasons_lib.reasons(records) + claims_lib.gap_claims(records, "qkv") + reasons_lib.sweep_claims(sweep)
            + reasons_lib.sweep_backward(sweep) + width_claims.threshold_claims(sweep, study.get("debug_options") or {})
            + width_claims.width_claims(study.get("width_sweep", []), sweep) + roofline_claims.roofline_claims(records, sweep)
            + gemm_choice.gemm_choice_claims(records, runs) + autotune.autotune_claims(records)
            + claims_lib.ablation_claims(records, runs) + claims_lib.block_claims(records)
            + [related.related_claim(records, sweep)])


def mb(value: float | None) -> str:
    """Megabytes, three significant digits below 100 MB."""
    if value is None:
        return "-"
    if value < 1e4:
        return "<0.01"
    return f"{value / 1e6:.3g}" if value < 1e8 else f"{value / 1e6:,.0f}"


def ms(time: dict[str, Any] | None) -> str:
    """median [p25-p75] (n) of an idle timing, in ms; a loaded one is not shown."""
    if not time:
        return "-"
    if not time.get("idle"):
        return f"loaded (load {max(time['load_1m']):.1f}): not shown"
    return f"{time['median_ms']:.3g} [{time['p25_ms']:.3g}-{time['p75_ms']:.3g}] ({time['repeats']})"


def empty_panel_text(panel_rows: list[dict[str, Any]]) -> str:
    """Why a time panel has no bar: its programs were timed on a loaded machine (times hidden), or
    compiled without a GPU, or not timed at all."""
    if any(r["time"] for r in panel_rows):
        return "timed, not shown: the machine was not idle"
    if panel_rows and all(r["device"] == "h100-compile-only" for r in panel_rows):
        return "not timed: compiled without a GPU"
    return "not timed"


def time_cell(row: dict[str, Any]) -> str:
    if row["time"]:
        return ms(row["time"])
    return "not timed (compiled without a GPU)" if row["device"] == "h100-compile-only" else "not timed"


def answer_table(records: list[dict[str, Any]]) -> list[str]:
    """Target x layout: forward and forward+backward kernels (GEMMs), MB moved and time."""
    lines = ["| target | layout | forward: kernels (GEMMs) | forward: MB moved | forward: ms, median [IQR] (n) | "
             "forward+backward: kernels (GEMMs) | forward+backward: MB moved | forward+backward: ms, median [IQR] (n) |",
             "|---|---|---|---|---|---|---|---|"]
    table = rows(records)
    for (compiler, device), programs in claims_lib.answer_programs(records).items():
        for layout in LAYOUTS:
            cells = []
            for mode in MODE_NAMES:
                row = need(table, compiler=compiler, device=device, part="qkv", mode=mode, layout=layout,
                           shape=programs[f"{mode}_{layout}"]["shape"])
                cells += [f"{row['kernels']} ({row['gemm_kernels']})", mb(row["bytes"]), time_cell(row)]
            shape = programs[f"fwd_{layout}"]["shape"]
            lines.append(f"| {label(compiler, device)}, D {shape['model_dim']}, T {shape['seq_len']:,} | {layout} | "
                         + " | ".join(cells) + " |")
    return lines + [""]


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
                time = time_cell(row)
                loops = f", {row['loop_kernels']} in loops" if row["loop_kernels"] else ""
                lines.append(f"| {label(compiler, device)} | {PART_NAMES[part]} {MODE_NAMES[mode]} | {layout} | "
                             f"{row['kernels']} ({row['gemm_kernels']}){loops} | {mb(row['bytes'])}{over} | "
                             f"{mb(row['temp_bytes'])} | {time} |")
    return lines + [""]


def kernel_rows(record: dict[str, Any], minimum: float | None) -> list[str]:
    """The per-kernel table of one QKV program: what each kernel fuses, the bytes it moves
    (totals against the program's `minimum`) and, where a profile names it, its time per call."""
    profiled = {k["name"]: k["ms_per_call"] for k in (record.get("kernel_times") or {}).get("kernels", [])}
    timed = any(k["name"] in profiled for k in record["kernel_table"])
    head = "| # | kernel | kind | stages | fuses | MB read | MB written |" + (" ms per call (profile) |" if timed else "")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for i, kernel in enumerate(record["kernel_table"], 1):
        stages = ", ".join(records_lib.kernel_stages(record, kernel)) or "-"
        runs = f" x{kernel['runs']}" if kernel.get("runs", 1) != 1 else ""
        time = (f" {profiled[kernel['name']]:.3g} |" if kernel["name"] in profiled else " - |") if timed else ""
        lines.append(f"| {i} | `{kernel['name']}`{runs} | {kernel['kind']} | {stages} | {records_lib.fused_text(record, kernel)} | "
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


WHY_SECTIONS = (("XLA for the H100 (compiled without a GPU, no autotuning)", ("why.xla_h100", "why.backward_xla_h100")),
                ("XLA on this CPU", ("why.xla_cpu", "why.backward_xla_cpu", "why.gap_qkv")),
                ("Inductor on this CPU", ("why.inductor_cpu", "why.inductor_backward_cpu")),
                ("Inductor for the H100 (compiled without a GPU, no autotuning)",
                 ("why.inductor_h100", "why.inductor_backward_h100")))


def bullets(made: list, prefixes: tuple[str, ...]) -> list[str]:
    return [f"- {c.text}" for c in made if c.key.startswith(prefixes)]


def sweep_table(sweep: list[dict[str, Any]]) -> list[str]:
    """T x (layout, threshold): GEMMs and MB moved, forward and forward+backward."""
    columns = sorted({(r["layout"], r["threshold_mb"]) for r in sweep},
                     key=lambda c: (c[0] != "separate", -1 if c[1] is None else c[1]))
    name = lambda c: f"{c[0]}, {'default' if c[1] is None else str(c[1]) + ' MiB'}"  # noqa: E731
    lines = ["| T | mode | " + " | ".join(name(c) for c in columns) + " |", "|---|---|" + "---|" * len(columns)]
    for seq_len in sorted({r["T"] for r in sweep}):
        for mode in MODE_NAMES:
            found = {(r["layout"], r["threshold_mb"]): r for r in sweep if r["T"] == seq_len and r["mode"] == mode}
            if found:
                lines.append(f"| {seq_len:,} | {MODE_NAMES[mode]} | " + " | ".join(
                    f"{found[c]['gemm_kernels']} GEMM{'' if found[c]['gemm_kernels'] == 1 else 's'}, "
                    f"{mb(found[c]['kernel_traffic_bytes'])} MB" if c in found else "-"
                    for c in columns) + " |")
    return lines + [""]


def ablation_table(table: list[dict[str, Any]]) -> list[str]:
    from jaxgpt_tools.fusion.compile_only import GEMM_CHOICE_VARIANTS

    lines = ["| compiler | program | layout | flags | kernels (GEMMs) | MB moved | XLA scratch MB |", "|---|---|---|---|---|---|---|"]
    for ablated in [r for r in table if r["variant"] not in ("default", *GEMM_CHOICE_VARIANTS)]:
        base = find(table, **{k: ablated[k] for k in ("compiler", "device", "part", "mode", "layout", "shape")})
        for row, name in ((base, "default"), (ablated, ablated["variant"])):
            if row is not None:
                lines.append(f"| {label(row['compiler'], row['device'])} | {PART_NAMES[row['part']]} {MODE_NAMES[row['mode']]}, "
                             f"{shape_text(row)} | {row['layout']} | {name} | {row['kernels']} ({row['gemm_kernels']}) | "
                             f"{mb(row['bytes'])} | {mb(row['temp_bytes'])} |")
    return lines + [""]


def kernel_sections(records: list[dict[str, Any]]) -> list[str]:
    out = ["## What each kernel fuses", "",
           "Per kernel of the QKV path at each compiler's largest shape: its kind, the model stages it computes "
           "(XLA: the jaxgpt functions its instructions were traced from; Inductor: the aten ops it is named after), "
           "the operations it fuses (data movement left out; for a GEMM, before / after the dot) and the bytes it "
           "reads and writes.", ""]
    for record in records_lib.committed_qkv(records):
        title = (f"{label(record['compiler'], record['device'])}, {MODE_NAMES[record['mode']]}, {record['layout']}, "
                 f"D {record['shape']['model_dim']}, T {record['shape']['seq_len']:,}"
                 + ("" if record.get("variant", "default") == "default" else f", {record['variant']}"))
        body = kernel_rows(record, records_lib.minimum_bytes(records).get(
            (record["part"], record["mode"], record["layout"], record["shape"]["name"])))
        if record["mode"] == "fwdbwd" or record.get("variant", "default") != "default":
            out += ["<details>", f"<summary>{title}</summary>", ""] + body + ["</details>", ""]
        else:
            out += [f"**{title}**", ""] + body
    return out


def roofline_section(study: dict[str, Any], made: list) -> list[str]:
    """The H100 roofline of the QKV path: its sentences, the bounds per program, across T, per kernel."""
    found = bullets(made, ("roofline",))
    if not found:
        return []
    records = study["records"]
    out = ["## A roofline on the H100: what merging could change (an estimate, not a timing)", ""] + found + [""]
    out += roofline_claims.summary_table(records)
    sweep = roofline_claims.sweep_table(study.get("sweep", []))
    if sweep:
        out += ["Across T, XLA for the H100 at D 768 (the dot-merger sweep, default threshold):", ""] + sweep
    return out + ["Per kernel, at the record's shape:", ""] + roofline_claims.kernel_tables(records)


def gemm_choice_section(records: list[dict[str, Any]], made: list) -> list[str]:
    """What compiling without a GPU cannot see, bounded: the GEMM choices' sentences and table."""
    found = bullets(made, ("gemm_choice",))
    if not found:
        return []
    return (["## What compiling without a GPU cannot see, bounded: the GEMM choices an H100 autotunes", ""] + found + [""]
            + gemm_choice.gemm_choice_table(records))


def autotune_section(records: list[dict[str, Any]], made: list) -> list[str]:
    """Inductor's max_autotune where the machine that timed it ran it: sentences and table."""
    found = bullets(made, ("autotune",))
    if not found:
        return []
    return ["## Inductor with its GEMMs autotuned, where it ran", ""] + found + [""] + autotune.autotune_table(records)


def page(study: dict[str, Any], *, command: str, artifacts_dir: Path, docs_dir: Path) -> str:
    """The whole of docs/FUSION.md."""
    from jaxgpt_tools.fusion.compile_only import GEMM_CHOICE_VARIANTS

    records = study["records"]
    table = rows(records)
    made = page_claims(study)
    artifacts = relative(artifacts_dir, docs_dir)
    out = [generated_header(command),
           "# Fusion study: how XLA and TorchInductor fuse the record's merged-QKV path, and what merging buys", ""]
    out += answer_table(records) + [" ".join(c.text for c in made if c.key.startswith("answer")), ""]
    out += ["## How these numbers were made", "",
            f"Generated by `{command}` (`make fusion`); do not edit by hand (tests/tools/fusion/test_claims.py regenerates it "
            f"from `{relative(artifacts_dir, REPO_ROOT)}/results.json` and runs the check behind every sentence; "
            "tests/tools/fusion/test_drift.py recompiles the small shape and compares its kernels).", ""]
    out += bullets(made, ("method",))
    out += ["", f"![QKV path: kernels, bytes and idle CPU time per target and layout]({artifacts}/fusion.png)", ""]
    out += ["## Why each compiler fuses the QKV path as it does", ""]
    for title, prefixes in WHY_SECTIONS:
        found = bullets(made, prefixes)
        out += ([f"### {title}", ""] + found + [""]) if found else []
    if study.get("sweep"):
        out += ["## The merge decision swept: XLA's dot merger on the H100 (compiled without a GPU, no autotuning)", "",
                f"![GEMMs and MB moved against T, separate under each threshold and merged]({artifacts}/sweep.png)", ""]
        out += bullets(made, ("sweep.rule", "sweep.backward", "sweep.threshold")) + [""] + sweep_table(study["sweep"])
    if study.get("width_sweep"):
        out += ["### Across widths and head dims", "",
                f"![The rule's switch T against D, merged or not per swept program; separate's byte change against merged]"
                f"({artifacts}/width_sweep.png)", ""]
        out += bullets(made, ("sweep.widths",)) + [""] + width_claims.width_table(study["width_sweep"], study["sweep"])
    out += roofline_section(study, made)
    out += gemm_choice_section(records, made)
    out += autotune_section(records, made)
    if any(r["variant"] not in ("default", *GEMM_CHOICE_VARIANTS) for r in table) or any(c.key.startswith("ablation") for c in made):
        out += ["## The passes and flags that decide the merge", ""] + bullets(made, ("ablation",)) + [""] + ablation_table(table)
    out += ["## The QKV path, program by program", "",
            "Kernels launched per call (GEMMs among them); bytes every kernel reads and writes once, against the "
            "minimum (arguments read once, results written once); XLA's scratch buffer (memory_analysis temp); "
            "time per call on this machine, idle timings only.", ""]
    for shape in shapes_of(table):
        out += [f"### {shape_text(need(table, shape=shape, part='qkv'))}", ""] + program_table(table, shape, "qkv")
    out += kernel_sections(records)
    out += ["## The whole block, for context", ""] + bullets(made, ("block",)) + [""]
    for shape in shapes_of(table, "block"):
        out += [f"### {shape_text(need(table, shape=shape, part='block'))}", ""] + program_table(table, shape, "block")
    out += ["## Related work", ""] + [c.text for c in made if c.key.startswith("related")] + [""]
    out += ["## Files", "", f"In `{relative(artifacts_dir, REPO_ROOT)}/` (merged beside separate; the other programs are "
            "regenerated by the command above into `runs/fusion/`):", ""]
    out += [f"- [`{name}`]({artifacts}/{name})" for record in records_lib.committed_qkv(records) for name in record.get("files", [])]
    out += [f"- [`results.json`]({artifacts}/results.json): every program's record (counts, per-kernel tables, times, "
            "versions, commit, machine), the sweep and the equality checks", ""]
    return "\n".join(out)


def plot_sweep(sweep: list[dict[str, Any]], path: Path) -> None:
    """GEMMs (top) and MB moved (bottom) against T, log2 axis: separate under each dot-merger
    threshold and merged, forward (solid) and forward+backward (dashed); the rule's switch T
    for each numeric threshold as a vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxgpt_tools.fusion import sweep as fusion_sweep

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    series = sorted({(r["layout"], r["threshold_mb"]) for r in sweep}, key=lambda c: (c[0], -1 if c[1] is None else c[1]))
    for i, (layout, threshold) in enumerate(series):
        for mode, style in (("fwd", "-"), ("fwdbwd", "--")):
            pts = sorted((r["T"], r["gemm_kernels"], r["kernel_traffic_bytes"] / 1e6) for r in sweep
                         if (r["layout"], r["threshold_mb"], r["mode"]) == (layout, threshold, mode))
            if not pts:
                continue
            name = f"{layout}, {'default' if threshold is None else f'{threshold} MiB'}, {MODE_NAMES[mode]}"
            top.plot([p[0] for p in pts], [p[1] + 0.04 * i for p in pts], style, marker="o", ms=3, color=f"C{i}", label=name)
            bottom.plot([p[0] for p in pts], [p[2] for p in pts], style, marker="o", ms=3, color=f"C{i}")
    fit, guess = fusion_sweep.dot_bytes_fit(sweep), fusion_sweep.default_threshold(sweep)
    lines = {mb_value: f"{mb_value} MiB" for mb_value in {r["threshold_mb"] for r in sweep if r["threshold_mb"]}}
    if len(guess) == 1:
        lines[guess[0]] = f"{guess[0]} MiB (the default's)"
    for mb_value, name in sorted(lines.items()):
        crossing = (mb_value * 2**20 - fit["fixed_bytes"]) / fit["bytes_per_token"]
        for ax in (top, bottom):
            ax.axvline(crossing, color="grey", linewidth=0.6, linestyle=":")
        top.text(crossing, 9.3, f" rule: {name} at T {crossing:,.0f}", fontsize=6, rotation=90, va="top")
    top.set_ylabel("GEMMs per call (offset per series)", fontsize=8)
    bottom.set_ylabel("MB moved per call", fontsize=8)
    bottom.set_yscale("log")
    bottom.set_xscale("log", base=2)
    bottom.set_xlabel("T (tokens), D 768", fontsize=8)
    top.legend(fontsize=6, ncol=2)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    fig.suptitle("XLA's dot merger on the QKV path, H100 compiled without a GPU, no autotuning", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """One panel per shape (columns) for kernels, MB moved and, where measured, time (rows): per
    compiler and device, merged and separate (and ablations) of the QKV path, forward and
    forward+backward; linear scales."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxgpt_tools.fusion.compile_only import GEMM_CHOICE_VARIANTS

    table = [r for r in rows(records) if r["part"] == "qkv"]
    shapes = shapes_of(table)
    metrics = [("kernels", "kernels per call", lambda r: r["kernels"]), ("bytes", "MB moved", lambda r: r["bytes"] / 1e6)]
    if any(r["time"] and r["time"].get("idle") for r in table):
        metrics.append(("time", "ms per call, idle (median, IQR)",
                        lambda r: r["time"]["median_ms"] if r["time"] and r["time"].get("idle") else None))
    # Each shape's panel as wide as its compiler groups need (two modes each), so labels do not overlap.
    widths = [max(2, 2 * len(columns(table, shape))) for shape in shapes]
    fig, axes = plt.subplots(len(metrics), len(shapes), figsize=(1.3 * sum(widths) + 1, 3.2 * len(metrics)), squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    for col, shape in enumerate(shapes):
        series = [(c, d, layout, "default") for c, d in columns(table, shape) for layout in LAYOUTS]
        series += sorted({(r["compiler"], r["device"], r["layout"], r["variant"]) for r in table
                          if r["shape"] == shape and r["variant"] not in ("default", *GEMM_CHOICE_VARIANTS)})
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
                    tick_labels.append(f"{label(*group)}\n{MODE_NAMES[mode]}".replace(
                        " (compiled without a GPU, no autotuning)", "\n(compiled without a GPU,\nno autotuning)"))
                    for i, (compiler, device, layout, variant) in enumerate(members):
                        row = find(table, compiler=compiler, device=device, mode=mode, layout=layout, shape=shape, variant=variant)
                        height = value(row) if row else None
                        if row is None or height is None:
                            continue
                        x = center + (i - (len(members) - 1) / 2) * width
                        name = layout if variant == "default" else f"{layout}, {variant}"
                        style = {"merged": ("C0", None), "separate": ("C1", "//")}[layout]
                        ax.bar(x, height, width, color=style[0] if variant == "default" else "C2", hatch=style[1],
                               label=name, edgecolor="black", linewidth=0.4)
                        if key == "time" and row["time"] and row["time"].get("idle"):
                            ax.errorbar(x, height, yerr=[[height - row["time"]["p25_ms"]], [row["time"]["p75_ms"] - height]],
                                        color="black", capsize=2, linewidth=0.8)
            if not ax.patches:
                ax.set_yticks([])
                ax.text(0.5, 0.5, empty_panel_text([r for r in table if r["shape"] == shape]), transform=ax.transAxes,
                        ha="center", fontsize=8)
            ax.set_xticks(ticks)
            ax.set_xticklabels(tick_labels, fontsize=5.5)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.grid(axis="y", alpha=0.3)
            if row_index == 0:
                row = need(table, shape=shape)
                missing = ""
                ax.set_title(f"QKV path, {shape_text(row)}{missing}", fontsize=9)
            handles, names = ax.get_legend_handles_labels()
            if handles:
                unique = dict(zip(names, handles, strict=True))
                ax.legend(unique.values(), unique.keys(), fontsize=5, framealpha=0.6)
    fig.suptitle("The QKV path merged vs separate: CPU compiled here (idle times only); H100 compiled without a GPU, no autotuning",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
