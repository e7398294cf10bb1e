"""docs/FUSION.md, its plot and the curated docs/fusion/ artifacts, from fusion_report's results.

Called by `python scripts/fusion_report.py --write-docs` (or `--from-results runs/fusion`); the
page is generated, never edited by hand: the reading's numbers are filled in from the rows.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from jaxgpt.gpu_plan import CAVEAT

PROGRAM_ORDER = [(part, mode) for part in ("attn", "block") for mode in ("fwd", "fwdbwd")]
PART_NAMES = {"attn": "attention layer", "block": "block"}
MODE_NAMES = {"fwd": "fwd", "fwdbwd": "fwd+bwd"}
COMMAND = "python scripts/fusion_report.py --write-docs"


def _columns(rows: list[dict[str, Any]], shape: str) -> list[tuple[str, str]]:
    """(compiler, device) pairs present at a shape, XLA first."""
    seen = sorted({(r["compiler"], r["device"]) for r in rows if r["shape"] == shape}, key=lambda c: (c[0] != "xla", c[1]))
    return seen


def _label(compiler: str, device: str) -> str:
    name = {"xla": "XLA", "inductor": "Inductor"}[compiler]
    return f"{name} {device.upper() if device != 'cpu' else 'CPU'}" + (" (compile only)" if device == "h100" else "")


def _find(rows, **keys) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in keys.items()):
            return row
    return None


def _fmt_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def _table(rows, shape: str, cell, title: str) -> list[str]:
    columns = _columns(rows, shape)
    head = ["program"] + [f"{_label(*c)} {layout}" for c in columns for layout in ("merged", "separate")]
    lines = [f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for part, mode in PROGRAM_ORDER:
        cells = [f"{PART_NAMES[part]} {MODE_NAMES[mode]}"]
        for compiler, device in columns:
            for layout in ("merged", "separate"):
                row = _find(rows, compiler=compiler, device=device, part=part, mode=mode, layout=layout, shape=shape)
                cells.append(cell(row) if row else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def _shape_text(rows, shape: str) -> str:
    row = _find(rows, shape=shape)
    return f"D {row['D']}, T {row['T']:,}" if row else shape


def gemm_epilogues(records: list[dict[str, Any]], device: str, shape: str, layout: str) -> dict[str, Counter]:
    """Per (part, mode): the elementwise opcodes XLA fused into GEMM prologues and epilogues."""
    out = {}
    for r in records:
        if r["compiler"] == "xla" and r["device"] == device and r["shape"]["name"] == shape and r["layout"] == layout:
            pro, epi = Counter(), Counter()
            for fusion in r.get("gemm_fusions", []):
                pro.update(fusion["prologue"])
                epi.update(fusion["epilogue"])
            out[(r["part"], r["mode"])] = {"gemms": len(r.get("gemm_fusions", [])), "prologue": pro, "epilogue": epi,
                                           "with_any": sum(1 for f in r.get("gemm_fusions", []) if f["prologue"] or f["epilogue"])}
    return out


def inductor_kernels(records: list[dict[str, Any]], shape: str, part: str, mode: str, layout: str) -> list[str]:
    for r in records:
        if (r["compiler"], r["shape"]["name"], r["part"], r["mode"], r["layout"]) == ("inductor", shape, part, mode, layout):
            return r["fused_kernel_names"]
    return []


def plot(rows: list[dict[str, Any]], path: Path, shapes: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = list(dict.fromkeys((c, d, s) for s in shapes for c, d in _columns(rows, s)))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    programs = [(p, m) for p, m in PROGRAM_ORDER if p == "block"]
    width = 0.8 / (2 * len(series))
    for ax, key, ylabel in ((axes[0], "kernels", "kernels launched"),
                            (axes[1], "traffic_over_min", "bytes moved / minimum")):
        for i, (compiler, device, shape) in enumerate(series):
            for j, layout in enumerate(("merged", "separate")):
                values = []
                for part, mode in programs:
                    row = _find(rows, compiler=compiler, device=device, part=part, mode=mode, layout=layout, shape=shape)
                    values.append(row.get(key) or 0 if row else 0)
                offset = (2 * i + j) * width
                ax.bar([k + offset for k in range(len(programs))], values, width,
                       label=f"{_label(compiler, device)} T={_find(rows, shape=shape)['T']} {layout}",
                       hatch="//" if layout == "separate" else None, color=f"C{i}", alpha=0.9 if j == 0 else 0.55)
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(programs))])
        ax.set_xticklabels([f"block {MODE_NAMES[m]}" for _, m in programs])
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_yscale("log")  # Inductor's tens next to XLA's thousands at T = 65,536
    axes[0].set_title("kernels per block (log scale)")
    axes[1].set_title("per-kernel traffic over arguments + results")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle("One record block: XLA and Inductor, merged vs separate QKV (CPU measured; H100 compiled without a GPU)",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def curate(records: list[dict[str, Any]], rows: list[dict[str, Any]], merged: dict, dest: Path, shape_cpu: str, shape_gpu: str) -> list[str]:
    """Copy the few artifacts the page cites into docs/fusion/ and write its rows there."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    written = []
    wanted_xla = {("cpu", "attn", "fwd", "separate", shape_cpu), ("h100", "attn", "fwd", "separate", shape_gpu),
                  ("h100", "block", "fwdbwd", "merged", shape_gpu)}
    for r in records:
        key = (r["device"], r["part"], r["mode"], r["layout"], r["shape"]["name"])
        if r["compiler"] == "xla" and key in wanted_xla and Path(r["hlo"]).exists():
            name = f"xla_{r['device']}_{r['part']}_{r['mode']}_{r['layout']}_{r['shape']['name']}.hlo.txt"
            shutil.copy(r["hlo"], dest / name)
            written.append(name)
        if r["compiler"] == "inductor" and key in {("cpu", "attn", "fwd", "separate", shape_cpu),
                                                   ("cpu", "block", "fwdbwd", "merged", shape_cpu)}:
            for graph in r["graphs"]:
                name = f"inductor_cpu_{r['part']}_{r['mode']}_{r['layout']}_{r['shape']['name']}_{graph['graph']}.output_code.py"
                if Path(graph["output_code"]).exists():
                    shutil.copy(graph["output_code"], dest / name)
                    written.append(name)
    (dest / "rows.json").write_text(json.dumps({"rows": rows, "merged_by_compiler": {"/".join(k): v for k, v in merged.items()}},
                                               indent=1))
    return sorted(written) + ["rows.json"]


def reading(rows, merged, shapes: list[str]) -> list[str]:
    """One bullet per compiler, device and shape with the block's numbers, all read off the rows."""
    lines = []

    def get(compiler, device, mode, layout, shape, key):
        row = _find(rows, compiler=compiler, device=device, part="block", mode=mode, layout=layout, shape=shape)
        return row.get(key) if row else None

    def merged_text(compiler, device, mode, shape):
        flag = merged.get((compiler, device, "block", mode, shape))
        return "-" if flag is None else ("yes" if flag else "no")

    for shape in shapes:
        for compiler, device in _columns(rows, shape):
            v = {(mode, layout, key): get(compiler, device, mode, layout, shape, key)
                 for mode in ("fwd", "fwdbwd") for layout in ("merged", "separate")
                 for key in ("kernels", "gemm_kernels", "loop_kernels", "traffic_over_min")}
            if None in (v["fwd", "merged", "kernels"], v["fwdbwd", "merged", "kernels"]):
                continue
            fwd, fwdbwd = v["fwd", "merged", "kernels"], v["fwdbwd", "merged", "kernels"]
            loops = v["fwdbwd", "merged", "loop_kernels"]
            traffic = [v[mode, layout, "traffic_over_min"] for mode in ("fwd", "fwdbwd") for layout in ("merged", "separate")]
            lines.append(
                f"- **{_label(compiler, device)}, {_shape_text(rows, shape)}.** One block, merged QKV: {fwd} kernels "
                f"forward ({v['fwd', 'merged', 'gemm_kernels']} GEMMs), {fwdbwd} forward+backward "
                f"({v['fwdbwd', 'merged', 'gemm_kernels']} GEMMs), so {fwdbwd - fwd} for the backward"
                + (f"; {loops} of the forward+backward's run inside the attention's key-block loop" if loops else "")
                + f". Separate QKV: {v['fwd', 'separate', 'kernels']} and {v['fwdbwd', 'separate', 'kernels']} kernels "
                f"({v['fwd', 'separate', 'gemm_kernels']} and {v['fwdbwd', 'separate', 'gemm_kernels']} GEMMs). "
                f"Merged the three projections on its own: forward {merged_text(compiler, device, 'fwd', shape)}, "
                f"forward+backward {merged_text(compiler, device, 'fwdbwd', shape)}."
                + (" Bytes moved over the minimum, forward {:.1f}x merged / {:.1f}x separate, forward+backward "
                   "{:.1f}x / {:.1f}x.".format(*traffic) if None not in traffic else ""))
    return lines


def _traffic_range(rows, compiler: str, device: str, shape: str) -> str:
    values = [r["traffic_over_min"] for r in rows if (r["compiler"], r["device"], r["shape"]) == (compiler, device, shape)
              and r.get("traffic_over_min")]
    return f"{min(values):.0f}-{max(values):.0f}x" if values else "-"


def reading_prose(rows, shapes: list[str]) -> list[str]:
    """The study's reading of the tables; ranges of bytes-over-minimum are filled in from the rows."""
    ranges = "; ".join(f"{_label(c, d)} {_shape_text(rows, s)}: {_traffic_range(rows, c, d, s)}"
                       for s in shapes for c, d in _columns(rows, s))
    return [line.replace("{ranges}", ranges) for line in READING_PROSE]


READING_PROSE = [
    "- **Kernels.** Inductor launches the fewest kernels on the CPU: its C++ backend puts the whole chain between "
    "the QKV GEMM and attention (split, value-embedding mix, RMSNorm of q and k, rotary, the casts) into one or two "
    "loop kernels (their names below list the fused ops), leaves the GEMMs to extern `mm` calls and attention to one "
    "SDPA call. XLA on the CPU emits several times more: every reduction (the RMSNorm means, the softmax max and "
    "sum) is its own kernel, bf16 operands are converted to fp32 in separate loop fusions before each dot (XLA:CPU "
    "computes these dots in fp32), and the blocked attention runs as a loop of small kernels per key block. XLA for "
    "the H100 is in between at the small shape: the fp32 -> bf16 cast of every weight goes into its Triton GEMM "
    "fusion's prologue, the attention scale into the score GEMM's epilogue, relu into the MLP up-projection's "
    "epilogue (table below). At T = 65,536 most of its kernels are the attention's "
    "key-block loop, run once per trip: the per-block count is dominated by attention, not by the projections.",
    "- **Merged vs separate.** Neither Inductor nor XLA:CPU merges the three projections: the separate layout "
    "costs 2 more GEMMs forward and 6 more forward+backward per block (3 dX and 3 dW GEMMs instead of one each). "
    "XLA for the H100 merges them where its dot merger's size limit allows: at D 128, T 256 the three weights are "
    "concatenated inside one Triton GEMM's prologue (same GEMM count as merged), and in the backward the three "
    "weight-gradient GEMMs merge the same way (dq, dk, dv concatenated in the prologue), leaving the three dX GEMMs "
    "separate; at the record's T = 65,536 the operands are over that limit "
    "and nothing is merged. So the record's merged weight is what guarantees one GEMM on every compiler. In "
    "return, separate weights let XLA for the H100 fuse the value scale (lambdas[0] * v) into v's GEMM epilogue, "
    "which the merged GEMM cannot take: it would scale a third of its output.",
    "- **Bytes.** The layout moves the bytes by a few percent, either way (tables below): separate reads h three "
    "times instead of once, small next to the rest. What is far from the minimum is attention: Inductor's SDPA "
    "keeps the scores inside one kernel, so its programs stay within a few times the minimum; jaxgpt's blocked "
    "attention writes the fp32 score tiles, the mask and the softmax statistics of every key block to memory, so "
    "XLA's programs move tens of times the minimum, growing with T. Ranges over the four programs: {ranges}.",
    "- **What it predicts for the GPU.** The merged layout saves 2 GEMM launches forward and up to 6 backward per "
    "layer on Inductor and at the record shape on XLA, out of hundreds (XLA) of kernels per block, and about 1% "
    "of the bytes: a small effect. The large lever is attention: a fused (flash) kernel that keeps the score tiles "
    "on chip removes most of XLA's traffic and most of its per-trip kernels (jaxgpt's Pallas backend, "
    "docs/BENCHMARKS.md). GPU times of these programs are unmeasured here; kernel counts and bytes are from an "
    "un-autotuned compile.",
]
def write_docs(records, rows, merged, docs_dir: Path, *, gpu_skipped: str | None, machine: dict[str, Any],
               repeats: int, threads: int, command: str = COMMAND, sources: list[str] = ()) -> Path:
    """Write docs/FUSION.md, docs/fusion/fusion.png and the curated docs/fusion/ files."""
    shapes = sorted({r["shape"] for r in rows}, key=lambda s: _find(rows, shape=s)["T"] * _find(rows, shape=s)["D"])
    cpu_shapes = [s for s in shapes if _find(rows, shape=s, device="cpu")]
    gpu_shapes = [s for s in shapes if _find(rows, shape=s, device="h100")]
    shape_cpu = cpu_shapes[-1]
    shape_gpu = gpu_shapes[-1] if gpu_shapes else shape_cpu
    dest = docs_dir / "fusion"
    files = curate(records, rows, merged, dest, shape_cpu, shape_gpu)
    plot(rows, dest / "fusion.png", list(dict.fromkeys([shape_cpu, shape_gpu])))
    out = [
        "# Fusion study: XLA and TorchInductor on the record's attention path",
        "",
        f"Generated by `{command}`; do not edit by hand. CPU measurements of {machine['date_utc']} UTC "
        f"({machine['cpu_count']} CPU cores, load average {machine['load_average_1m']:.1f}). Artifacts: "
        "`runs/fusion/<device>/` (full, not committed), `docs/fusion/` (the files cited here). Results from:",
        "",
        *[f"- {source}" for source in sources],
        "",
        "Programs (jaxgpt_tools/fusion_xla.py, jaxgpt_tools/fusion_inductor.py): jaxgpt's and torch_ref's **attention layer** "
        "(QKV projection, split, value-embedding mix, QK RMSNorm, rotary, attention, output projection) and one whole "
        "**block** (x0 mix, norms, attention, MLP, residuals), forward and forward+backward (gradients of every "
        "parameter and input for a fixed output cotangent), with the QKV projection **merged** (the record's one "
        "(3D, D) weight) or **separate** (three (D, D) weights). bf16 activations, fp32 weights cast at use (the "
        "record's policy), one document, window min(14, T/128) blocks.",
        "",
        "- XLA CPU and Inductor CPU: compiled on this machine and timed where the table shows a time (median of "
        f"{repeats} runs after a warm-up; torch with {threads} thread, XLA with its own CPU thread pool; the machine is "
        "shared by several jobs, so CPU times are indicative only). On the CPU "
        "jaxgpt's attention is its blocked kernel and torch_ref's is SDPA with a dense mask (torch_ref uses flex "
        "attention only on a GPU), so the attention kernels differ between the frameworks here.",
        f"- XLA H100: **{CAVEAT}** (jax CUDA plugin's compile-only devices, "
        "jaxgpt/gpu_plan.py), at the record's per-device sequence. GEMM tiles are XLA's defaults for an "
        "un-autotuned compile; a real H100 may pick other kernels. GPU timings: unmeasured (no GPU run of this "
        "report)." + ("" if not gpu_skipped else f" The H100 column is missing: {gpu_skipped}."),
        "- Inductor for an H100: not included. It needs a CUDA build of torch beside this CPU one, fake device "
        "properties, FakeTensor inputs, a fake Triton driver and a stub libcuda for the backward; none of "
        "that is robust enough to ship in this time.",
        "- *Kernels*: launches of one call (XLA: instructions that do work in the entry computation and loop bodies; "
        "Inductor: generated kernels + extern GEMMs + aten fallbacks in output_code.py's `call`, forward and backward "
        "graphs summed); a kernel in a loop body counts once per trip (the blocked attention loops over key blocks). "
        "*Bytes moved*: every kernel reads its operands and writes its results once (an operand a fusion only slices "
        "counts as its slices, an in-place update as the update); for loop-free XLA programs this equals "
        "cost_analysis's `bytes accessed`, which counts a loop body once. *Minimum*: the program's arguments read once and results "
        "written once (XLA memory_analysis argument + output bytes of the same program; the same math for both "
        "compilers).",
        "",
        "![kernels and bytes per block](fusion/fusion.png)",
        "",
        "## Reading",
        "",
        *reading_prose(rows, shapes),
        "",
        "In numbers (generated from the tables below):",
        "",
        *reading(rows, merged, shapes),
        "",
    ]
    for shape in shapes:
        out += [f"## {_shape_text(rows, shape)}", ""]
        out += _table(rows, shape, lambda r: f"{r['kernels']} ({r['gemm_kernels']})"
                      + (f", {r['loop_kernels']} in loops" if r.get("loop_kernels") else ""),
                      "Kernels launched per call (GEMMs among them; those inside the attention's key-block loop)")
        out += _table(rows, shape, lambda r: f"{r['traffic_over_min']:.1f}x of {_fmt_bytes(r['min_bytes'])}"
                      if r.get("traffic_over_min") else "-", "Bytes moved over the minimum")
        out += _table(rows, shape, lambda r: _fmt_bytes(r.get("temp_bytes")),
                      "XLA scratch memory between kernels (memory_analysis temp; Inductor: not reported)")
        out += _table(rows, shape, lambda r: f"{r['flops'] / 1e9:.3g}" if r.get("flops") else "-",
                      "GFLOP (XLA: cost_analysis, all ops; Inductor: torch.utils.flop_counter, which has no formula for "
                      "the CPU SDPA kernel, so GEMMs only here)")
        out += _table(rows, shape, lambda r: f"{r['median_ms']:.2f}" if r.get("median_ms") is not None else
                      ("unmeasured" if r["device"] != "cpu" else "not timed"), "Median time, ms (CPU: this machine)")
    for shape in dict.fromkeys([shape_gpu] + gpu_shapes):
        tables = {layout: gemm_epilogues(records, "h100", shape, layout) for layout in ("merged", "separate")}
        if not any(tables.values()):
            continue
        out += [f"## What XLA fused into the H100 GEMMs ({_shape_text(rows, shape)}, compiled without a GPU)", "",
                "Triton GEMM fusions in the optimized HLO (each counted once, loops not unrolled), and the "
                "elementwise ops inside them before the dot (prologue, on the operands) and after it (epilogue).", "",
                "| program | layout | GEMM fusions | with fused elementwise work | prologue ops | epilogue ops |",
                "|---|---|---|---|---|---|"]
        fmt = lambda c: ", ".join(f"{op} x{n}" for op, n in sorted(c.items())) or "-"  # noqa: E731
        for (part, mode) in PROGRAM_ORDER:
            for layout, table in tables.items():
                e = table.get((part, mode))
                if e:
                    out.append(f"| {PART_NAMES[part]} {MODE_NAMES[mode]} | {layout} | {e['gemms']} | {e['with_any']} | "
                               f"{fmt(e['prologue'])} | {fmt(e['epilogue'])} |")
        out.append("")
    names = inductor_kernels(records, shape_cpu, "attn", "fwd", "merged")
    if names:
        out += [f"## Inductor's kernels for the attention layer forward (merged, {_shape_text(rows, shape_cpu)})", "",
                "Each generated kernel's name lists the aten ops it fused (launch order):", ""]
        out += [f"- `{name}`" for name in names] + [""]
    out += ["## Files in docs/fusion/", ""] + [f"- `{name}`" for name in files] + [""]
    path = docs_dir / "FUSION.md"
    path.write_text("\n".join(out))
    return path


