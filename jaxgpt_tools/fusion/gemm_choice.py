"""docs/FUSION.md's section on what compiling without a GPU cannot see, bounded: the GEMM choices
an H100 makes by timing candidates, which a compile-only program cannot make.

XLA's QKV path at the record's shape compiled twice for the H100 (fusion/compile_only.py): by
default, every GEMM a Triton GEMM fusion with XLA's default tiles (what compile-only gives, no
autotuning), and with its Triton GEMMs off (`triton_gemm_off`: every GEMM a cuBLAS library call),
the two ends of what XLA's GEMM autotuner picks from per GEMM; a third compile also turns
cuBLASLt's flag off (`triton_gemm_off_cublaslt_off`), to see which call that leaves. What changes
between the ends, in kernels, bytes (the one byte model, fusion/byte_model.py) and the H100
roofline bound (fusion/roofline.py, an estimate, never a time); and Inductor's max_autotune, tried
without a GPU, with the measured reason it stops (the run's `not_compiled`). Each sentence is a
fusion_claims.Claim with a check that re-derives its numbers another way.
"""

from __future__ import annotations

import re
from typing import Any

from jaxgpt_tools.fusion.byte_model import CUBLAS_PREFIX
from jaxgpt_tools.fusion.claims import Claim
from jaxgpt_tools.fusion.compile_only import CUBLASLT_FLAG, MAX_AUTOTUNE_VARIANT, TRITON_GEMM_FLAG
from jaxgpt_tools.fusion.records import MODE_NAMES, bytes_moved, find, gemms_per_call, kernels_per_call, label
from jaxgpt_tools.fusion.roofline import dims, program_bound
from jaxgpt_tools.fusion.roofline_claims import bound_within, change, us

GPU = "h100-compile-only"
TRITON, CUBLAS, CUBLAS_LT_OFF = "default", "triton_gemm_off", "triton_gemm_off_cublaslt_off"
CHOICES = (TRITON, CUBLAS)
CHOICE_NAMES = {TRITON: "Triton GEMMs", CUBLAS: "cuBLAS"}
LAYOUTS = ("merged", "separate")
LT_CALL, GEMM_CALL = "__cublas$lt$matmul", "__cublas$gemm"
PATH = "norm, rotary, value mix"


def gemm_programs(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """(mode, layout) -> {variant: record}: XLA's H100 QKV programs at the shape the GEMM-choice
    leg compiled, by default and under each GEMM choice it has (those with both ends only)."""
    compiled = [r for r in records if (r["compiler"], r["device"], r["part"], r.get("variant")) == ("xla", GPU, "qkv", CUBLAS)]
    if not compiled:
        return {}
    shape = compiled[0]["shape"]["name"]
    out = {}
    for mode in MODE_NAMES:
        for layout in LAYOUTS:
            found = {v: find(records, compiler="xla", device=GPU, part="qkv", mode=mode, layout=layout, shape=shape, variant=v)
                     for v in (TRITON, CUBLAS, CUBLAS_LT_OFF)}
            if found[TRITON] is not None and found[CUBLAS] is not None:
                out[(mode, layout)] = {v: r for v, r in found.items() if r is not None}
    return out


def library_calls(record: dict[str, Any]) -> dict[str, int]:
    """GEMM kernels per call that are cuBLAS custom calls, by call target (the per-kernel table's kind)."""
    out: dict[str, int] = {}
    for k in record["kernel_table"]:
        if k["gemm"] and str(k["kind"]).startswith(CUBLAS_PREFIX):
            out[k["kind"]] = out.get(k["kind"], 0) + k.get("runs", 1)
    return out


def triton_gemms(record: dict[str, Any]) -> int:
    """GEMM kernels per call that are Triton GEMM fusions."""
    return sum(k.get("runs", 1) for k in record["kernel_table"] if k["gemm"] and "triton" in str(k["kind"]))


def weight_casts(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The kernels that only cast an fp32 QKV weight ((D, D) or (3, D, D)) to bf16."""
    dim = record["shape"]["model_dim"]
    weight = lambda t: t.startswith("f32[") and (dims(t) or ())[-2:] == (dim, dim)  # noqa: E731
    return [k for k in record["kernel_table"] if not k["gemm"] and k.get("ops") == {"convert": 1}
            and len(k["operands"]) == 1 and weight(k["operands"][0]) and k["result"].startswith("bf16[")]


def prologue_casts(record: dict[str, Any]) -> int:
    """GEMMs that take a cast of their operand into their prologue (before the dot)."""
    return sum(1 for k in record["kernel_table"] if k["gemm"] and "convert" in (k.get("prologue") or []))


def split_k(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Split-K GEMMs: those writing fp32 partial products, one per slice of the contracted T (a
    3-D f32 result whose operands carry the slice as a dimension of their own)."""
    return [k for k in record["kernel_table"] if k["gemm"] and re.fullmatch(r"f32\[\d+,\d+,\d+\]", k["result"])
            and all(len(dims(t) or ()) == 3 for t in k["operands"])]


def pct(new: float, old: float) -> str:
    """'+0.4%' / '-15%' of new against old: one decimal under 1%, so that a small move is not 'the same'."""
    value = (new - old) / old * 100 if old else 0.0
    return f"{value:+.1f}%" if abs(value) < 1 else f"{value:+.0f}%"


def result_readers(record: dict[str, Any]) -> int:
    """Kernels other than GEMMs that take a bf16 (T, 3D) array, merged's projection result (or its
    gradient), whole under the byte model."""
    shape = record["shape"]
    wanted = f"bf16[{shape['seq_len']},{3 * shape['model_dim']}]"
    return sum(k.get("runs", 1) for k in record["kernel_table"] if not k["gemm"] and wanted in k["operands"])


def _shape(record: dict[str, Any]) -> str:
    return f"D {record['shape']['model_dim']}, T {record['shape']['seq_len']:,}"


def calls_claim(programs) -> Claim:
    cublas = [p[CUBLAS] for p in programs.values()]
    calls = {t for r in cublas for t in library_calls(r)}
    total = sum(r["gemm_kernels"] for r in cublas)
    counts = ", ".join(f"{MODE_NAMES[m]} {p[CUBLAS]['gemm_kernels']} {layout}" for (m, layout), p in programs.items())
    first = next(iter(programs.values()))
    default_kinds = sorted({str(k["kind"]) for p in programs.values() for k in p[TRITON]["kernel_table"] if k["gemm"]})
    lt_off = [p for p in programs.values() if CUBLAS_LT_OFF in p]
    same = all(p[CUBLAS_LT_OFF]["kernel_table"] == p[CUBLAS]["kernel_table"] for p in lt_off)
    text = (f"With `{TRITON_GEMM_FLAG}=False`, {label('xla', GPU)} at {_shape(first[CUBLAS])} makes every GEMM of the QKV "
            f"path a library call: {total} GEMMs over the four programs ({counts}), "
            + ("every one a " + ", ".join(f"`{t}`" for t in sorted(calls)) + " custom call"
               + (" (cuBLASLt), none `__cublas$gemm`" if calls == {LT_CALL} else "")
               if calls else "none of them a cuBLAS call")
            + f", where by default each is a Triton GEMM fusion (kind {', '.join(f'`{k}`' for k in default_kinds)}) with "
              "XLA's default tiles.")
    if lt_off:
        text += (f" With `{CUBLASLT_FLAG}=False` as well, the {len(lt_off)} programs are "
                 + ("the same kernel for kernel, their GEMMs still " + ", ".join(f"`{t}`" for t in sorted(calls))
                    + ": compiled without a GPU, this jaxlib calls cuBLASLt with Triton GEMMs off alone, and turning its "
                      "flag off does not bring back the cuBLAS call (`__cublas$gemm`)."
                    if same else "different: " + "; ".join(
                        f"{MODE_NAMES[m]} {layout} {library_calls(p[CUBLAS_LT_OFF])}" for (m, layout), p in programs.items()
                        if CUBLAS_LT_OFF in p) + "."))

    def check() -> bool:  # the calls against XLA's own custom-call count; the default's GEMMs all Triton fusions
        return all(library_calls(p[CUBLAS]) == {t: n for t, n in p[CUBLAS].get("custom_calls", {}).items()
                                                if t.startswith(CUBLAS_PREFIX)}
                   and sum(library_calls(p[CUBLAS]).values()) == gemms_per_call(p[CUBLAS]) == p[CUBLAS]["gemm_kernels"]
                   and triton_gemms(p[TRITON]) == gemms_per_call(p[TRITON]) and not library_calls(p[TRITON])
                   and all(p[v]["compiler_options"].get(TRITON_GEMM_FLAG) is False for v in (CUBLAS, CUBLAS_LT_OFF) if v in p)
                   for p in programs.values())
    return Claim("gemm_choice.calls", text, check)


def kernels_claim(programs) -> Claim:
    def pair(mode: str, fn) -> str:
        return ", ".join(f"{layout} {fn(programs[(mode, layout)][TRITON])} → {fn(programs[(mode, layout)][CUBLAS])}"
                         for layout in LAYOUTS if (mode, layout) in programs)

    modes = [m for m in MODE_NAMES if any(k[0] == m for k in programs)]
    count = lambda r: r["kernels"]  # noqa: E731
    casts = lambda r: len(weight_casts(r))  # noqa: E731
    splits = lambda r: len(split_k(r))  # noqa: E731
    prologue = {m: sum(prologue_casts(programs[(m, layout)][TRITON]) for layout in LAYOUTS if (m, layout) in programs)
                for m in modes}
    text = ("Kernels per call, Triton GEMMs → cuBLAS: " + "; ".join(f"{MODE_NAMES[m]} {pair(m, count)}" for m in modes)
            + ". The weights' bf16 cast, taken into the prologue of " + " and ".join(
                f"{prologue[m]} Triton GEMM{'' if prologue[m] == 1 else 's'} {MODE_NAMES[m]}" for m in modes)
            + ", is a kernel of its own under cuBLAS (kernels that only cast a weight: "
            + "; ".join(f"{MODE_NAMES[m]} {pair(m, casts)}" for m in modes)
            + "). Split-K GEMMs (fp32 partial products over slices of T, summed by a kernel of their own): "
            + "; ".join(f"{MODE_NAMES[m]} {pair(m, splits)}" for m in modes)
            + "; compiled without a GPU the split is XLA's default for its default tiles, and a cuBLAS call writes the "
              "whole product.")

    def check() -> bool:  # the kernel counts from the tables; every cast kernel writes a weight's bf16 copy whole
        return all(kernels_per_call(r) == r["kernels"] and gemms_per_call(r) == r["gemm_kernels"]
                   and all(2 * int(k["written"]) == int(k["read"]) for k in weight_casts(r))
                   and all(int(k["result"].split("[")[1].split(",")[0]) > 1 for k in split_k(r))
                   for p in programs.values() for r in (p[TRITON], p[CUBLAS]))
    return Claim("gemm_choice.kernels", text, check)


def _bounds(programs) -> dict[tuple[str, str], dict[str, Any]]:
    return {key: {v: program_bound(p[v]) for v in CHOICES} for key, p in programs.items()}


def bound_claim(programs) -> Claim:
    bounds = _bounds(programs)
    modes = [m for m in MODE_NAMES if any(k[0] == m for k in programs)]
    moves = {key: pct(b[CUBLAS].bound_s, b[TRITON].bound_s) for key, b in bounds.items()}
    parts = []
    for m in modes:
        parts.append(f"{MODE_NAMES[m]} " + ", ".join(
            f"{layout} {us(bounds[(m, layout)][TRITON].bound_s)} → {us(bounds[(m, layout)][CUBLAS].bound_s)} µs "
            f"({moves[(m, layout)]}; bytes {_mb(programs[(m, layout)][TRITON]['kernel_traffic_bytes'])} → "
            f"{_mb(programs[(m, layout)][CUBLAS]['kernel_traffic_bytes'])})" for layout in LAYOUTS if (m, layout) in bounds))
    gemm_parts = ", ".join(f"{MODE_NAMES[m]} {layout} {us(b[TRITON].group_bound_s('GEMMs'))} → {us(b[CUBLAS].group_bound_s('GEMMs'))}"
                           for (m, layout), b in bounds.items())
    path_parts = ", ".join(f"{MODE_NAMES[m]} {layout} {us(b[TRITON].group_bound_s(PATH))} → {us(b[CUBLAS].group_bound_s(PATH))}"
                           for (m, layout), b in bounds.items())
    versus = "; ".join(f"{CHOICE_NAMES[v]} " + ", ".join(
        f"{MODE_NAMES[m]} {change(bounds[(m, 'separate')][v].bound_s, bounds[(m, 'merged')][v].bound_s)} "
        f"(bytes {change(programs[(m, 'separate')][v]['kernel_traffic_bytes'], programs[(m, 'merged')][v]['kernel_traffic_bytes'])})"
        for m in modes if (m, "merged") in bounds and (m, "separate") in bounds) for v in CHOICES)
    merged = [(m, p) for (m, layout), p in programs.items() if layout == "merged"]
    readers = ", ".join(f"{MODE_NAMES[m]} {result_readers(p[TRITON])} → {result_readers(p[CUBLAS])}" for m, p in merged)
    text = ("On the H100 roofline (the estimate above, never a time), all Triton GEMMs → all cuBLAS, the bound of the QKV "
            "path: " + "; ".join(parts) + f". The GEMMs' part of it, µs: {gemm_parts} (their FLOPs the same, and a GEMM's "
            "bound its FLOPs or its bytes whether tiles or a library compute it); the QK norm, rotary and value-mix "
            "kernels': " + path_parts + ": where the bound moves it is mostly how XLA fuses the kernels around the GEMMs, "
            "not the GEMMs (kernels other than GEMMs that take merged's whole (T, 3D) projection result or its gradient: "
            + readers + "). Separate against merged under each choice: " + versus + ".")

    def check() -> bool:  # each bound within what the record's other fields allow; the groups add up to it; where
        # it moves by 1% or more, the GEMMs' part moves less than the rest
        def rest(b) -> float:
            return b.bound_s - b.group_bound_s("GEMMs")

        return all(bound_within(programs[key][v], b[v]) and abs(sum(b[v].group_bound_s(g) for g in
                                                                    ("GEMMs", PATH, "other")) - b[v].bound_s) < 1e-12
                   and abs(bytes_moved(programs[key][v]) - programs[key][v]["kernel_traffic_bytes"]) < 1
                   for key, b in bounds.items() for v in CHOICES) \
            and all(abs(b[CUBLAS].group_bound_s("GEMMs") - b[TRITON].group_bound_s("GEMMs")) < abs(rest(b[CUBLAS]) - rest(b[TRITON]))
                    for b in bounds.values() if abs(b[CUBLAS].bound_s - b[TRITON].bound_s) >= 0.01 * b[TRITON].bound_s)
    return Claim("gemm_choice.bound", text, check)


def autotune_claim(programs) -> Claim:
    bounds = _bounds(programs)
    moves = [(b[CUBLAS].bound_s - b[TRITON].bound_s) / b[TRITON].bound_s for b in bounds.values()]
    low, high = min(moves), max(moves)
    text = ("What a real H100's autotuning could change, and what these two ends bound: XLA's GEMM autotuner times, per "
            "GEMM, Triton tile configurations (split-K among their parameters) against cuBLAS / cuBLASLt and keeps the "
            "fastest, so an autotuned program takes for each GEMM one of the two choices compiled here, with other tiles "
            "or splits than the default where Triton wins. The roofline puts every GEMM at the matrix or the memory peak "
            "whatever computes it, so it cannot rank tiles; between the two ends it moves by the kernels around the GEMMs, "
            f"from {low * 100:+.0f}% to {high * 100:+.1f}% across the four programs. How much faster one tile or library "
            "call runs than another, the rest of what autotuning decides, needs a GPU to measure, and a per-GEMM mix of the "
            "two choices was not compiled.")
    return Claim("gemm_choice.autotune", text, lambda: all(
        abs(b[CUBLAS].gemm_flops - b[TRITON].gemm_flops) < 1 for b in bounds.values()) and low <= high)


def inductor_claim(records: list[dict[str, Any]], runs: list[dict[str, Any]]) -> Claim | None:
    tried = [run for run in runs if run.get("leg") == "inductor_max_autotune" and not run.get("skipped")]
    if not tried:
        return None
    run = tried[-1]
    reason = (run.get("not_compiled") or {}).get(MAX_AUTOTUNE_VARIANT)
    made = [r for r in records if r.get("variant") == MAX_AUTOTUNE_VARIANT and r["device"] == GPU]
    if reason:
        text = (f"Inductor's `max_autotune=True` in the compile-only H100 leg (the QKV path's merged forward at its smallest "
                f"shape) does not compile without a GPU; measured: {reason}. It chooses each GEMM's kernel, its Triton "
                "templates against cuBLAS, by running every candidate on the device, and making the candidates' example "
                "inputs there is where a process without a GPU stops; so the Inductor H100 column keeps `max_autotune` off "
                "and its GEMMs extern cuBLAS calls.")
        return Claim("gemm_choice.inductor", text, lambda: not made and bool(re.search(r"(Error|Exception)\b", reason)))
    text = (f"Inductor's `max_autotune=True` compiles in the compile-only H100 leg: {len(made)} programs, "
            + ", ".join(f"{r['layout']} {MODE_NAMES[r['mode']]} {r['kernels']} kernels ({r['gemm_kernels']} GEMMs)" for r in made)
            + ".")
    return Claim("gemm_choice.inductor", text, lambda: all(kernels_per_call(r) == r["kernels"] for r in made))


def _mb(value: float) -> str:
    return f"{value / 1e6:,.0f} MB"


def gemm_choice_claims(records: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[Claim]:
    """The section's sentences, in page order (none where the GEMM-choice legs made nothing)."""
    programs = gemm_programs(records)
    made = [calls_claim(programs), kernels_claim(programs), bound_claim(programs), autotune_claim(programs)] if programs else []
    inductor = inductor_claim(records, runs)
    return made + ([inductor] if inductor else [])


def gemm_choice_table(records: list[dict[str, Any]]) -> list[str]:
    """Per program and GEMM choice: kernels (GEMMs), library calls, weight-cast and split-K
    kernels, MB moved, the roofline bound (GEMMs / the rest) and its change against Triton GEMMs."""
    programs = gemm_programs(records)
    if not programs:
        return []
    lines = ["| program | layout | GEMMs by | kernels (GEMMs) | cuBLAS calls | weight-cast kernels | split-K GEMMs | MB moved "
             "| H100 bound µs: GEMMs + rest | H100 bound µs | vs Triton GEMMs |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (mode, layout), p in programs.items():
        for v in CHOICES:
            r, b = p[v], program_bound(p[v])
            calls = ", ".join(f"{n} `{t}`" for t, n in library_calls(r).items()) or "-"
            lines.append(f"| QKV path {MODE_NAMES[mode]}, {_shape(r)} | {layout} | {CHOICE_NAMES[v]} | {r['kernels']} "
                         f"({r['gemm_kernels']}) | {calls} | {len(weight_casts(r))} | {len(split_k(r))} | "
                         f"{r['kernel_traffic_bytes'] / 1e6:,.0f} | {us(b.group_bound_s('GEMMs'))} + "
                         f"{us(b.bound_s - b.group_bound_s('GEMMs'))} | {us(b.bound_s)} | "
                         f"{'' if v == TRITON else pct(b.bound_s, program_bound(p[TRITON]).bound_s)} |")
    return lines + [""]
