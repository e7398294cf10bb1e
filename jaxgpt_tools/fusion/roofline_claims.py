"""docs/FUSION.md's roofline section: its sentences (fusion_claims.Claim, each with a check that
re-derives its numbers another way) and its tables, from fusion/roofline.py's bounds.

Every number here is an estimate against datasheet peaks, never a time: the H100 programs were
compiled without a GPU and nothing of them ran.
"""

from __future__ import annotations

from typing import Any

from jaxgpt_tools.fusion import roofline
from jaxgpt_tools.fusion import sweep as sweep_lib
from jaxgpt_tools.fusion.claims import Claim
from jaxgpt_tools.fusion.records import COMPILER_NAMES, MODE_NAMES, label
from jaxgpt_tools.fusion.roofline import GROUPS, H100, ProgramBound

GPU = "h100-compile-only"
PATH = "norm, rotary, value mix"


def us(seconds: float) -> str:
    """Microseconds, three significant digits (whole from 100 on)."""
    value = seconds * 1e6
    if value < 0.01:
        return "<0.01"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def change(new: float, old: float) -> str:
    """'+9%' / '-16%' / 'the same' of new against old."""
    pct = (new - old) / old * 100 if old else 0.0
    return "the same" if abs(pct) < 0.5 else f"{pct:+.0f}%"


def bound_within(record: dict[str, Any], bound: ProgramBound) -> bool:
    """Second path to a program's bound, from other fields than its kernels' list: at least the
    model's GEMM FLOPs at the matrix peak and at least the stored byte total at the bandwidth
    (each alone is a bound), at most both together plus the other kernels' FLOPs at the vector peak."""
    gemm_s = roofline.model_gemm_flops(record["mode"], record["shape"]["seq_len"], record["shape"]["model_dim"]) \
        / H100.matrix_flop_s
    bytes_s = record["kernel_traffic_bytes"] / H100.memory_byte_s
    rest_s = (bound.flops - bound.gemm_flops) / H100.vector_flop_s
    return max(gemm_s, bytes_s) <= bound.bound_s * (1 + 1e-12) and bound.bound_s <= (gemm_s + bytes_s + rest_s) * (1 + 1e-12)


def _record_pairs(records: list[dict[str, Any]]) -> dict[tuple, dict[str, ProgramBound]]:
    """(compiler, device, T, D, mode) -> merged and separate bounds, the H100 legs only."""
    return {key: found for key, found in roofline.pairs(roofline.qkv_programs(records)).items() if key[1] == GPU}


def _largest(found: dict[tuple, dict[str, ProgramBound]]) -> dict[tuple, dict[str, ProgramBound]]:
    """The pairs at each compiler's largest T (the record's shape)."""
    top = {c: max(k[2] for k in found if k[0] == c) for c in {k[0] for k in found}}
    return {k: v for k, v in sorted(found.items(), key=lambda kv: (kv[0][0] != "xla", kv[0][4])) if k[2] == top[k[0]]}


def method_claim(records: list[dict[str, Any]]) -> Claim:
    programs = roofline.qkv_programs(records)
    nongemm = max((k.intensity for p in programs for k in p.kernels if not k.gemm), default=0.0)
    text = (f"Peaks ({H100.source}): a GEMM kernel is bounded by its FLOPs at {H100.matrix_flop_s / 1e12:,.0f} TFLOP/s, every "
            f"other kernel by its FLOPs at {H100.vector_flop_s / 1e12:.0f} TFLOP/s, and each by its bytes at "
            f"{H100.memory_byte_s / 1e12:.2f} TB/s; its bound is the larger time, a program's the sum over its kernels "
            f"(one after another; launch gaps, caches and overlap left out), so the ridge is {H100.ridge:.0f} FLOP/byte for a "
            f"GEMM and {H100.vector_ridge:.0f} for the rest. This is an estimate of what an H100 could not beat, not a "
            "time: the H100 programs were compiled without a GPU, with no autotuning, and none ran. FLOPs: a GEMM's "
            "2·M·N·K from its operand and result shapes (every program's GEMMs add up to the model's 2·T·D·3D per pass, "
            "one pass forward, three forward+backward); another kernel's one per arithmetic operation per element of its "
            f"largest array, an estimate on the high side whose largest intensity, {nongemm:.1f} FLOP/byte, is under the "
            f"{H100.vector_ridge:.0f} of the vector units, so those kernels are bound by their bytes whatever their exact "
            "count. Bytes: the study's one byte model above (each distinct buffer a kernel takes or produces, whole). "
            "The CPU programs' FLOPs and bytes "
            "are in the table, without a bound: the H100's peaks are not a CPU's.")

    def check() -> bool:
        ridge_ok = abs(H100.ridge - 989e12 / 3.35e12) < 1e-9 and nongemm < H100.vector_ridge
        return ridge_ok and all(abs(p.gemm_flops - roofline.model_gemm_flops(p.mode, p.seq_len, p.model_dim)) < 1
                                for p in programs)
    return Claim("roofline.method", text, check)


def _bytes_change(pair: dict[str, ProgramBound]) -> float:
    return (pair["separate"].bytes - pair["merged"].bytes) / pair["merged"].bytes


def _bound_change(pair: dict[str, ProgramBound]) -> float:
    return (pair["separate"].bound_s - pair["merged"].bound_s) / pair["merged"].bound_s


def record_claim(records: list[dict[str, Any]]) -> Claim | None:
    found = _largest(_record_pairs(records))
    if not found:
        return None
    parts, exceptions = [], []
    for (compiler, _, _, _, mode), pair in found.items():
        m, s = pair["merged"], pair["separate"]
        parts.append(f"{COMPILER_NAMES[compiler]} {MODE_NAMES[mode]} {us(m.bound_s)} µs merged, {us(s.bound_s)} separate "
                     f"({change(s.bound_s, m.bound_s)}; bytes {_bytes_change(pair) * 100:+.0f}%)")
        if abs(_bound_change(pair)) >= abs(_bytes_change(pair)):
            exceptions.append(f"{COMPILER_NAMES[compiler]} {MODE_NAMES[mode]}")
    shape = next(iter(found))
    text = (f"At the record's shape (D {shape[3]}, T {shape[2]:,}) the H100 bound of the QKV path is: " + "; ".join(parts)
            + f". In {len(found) - len(exceptions)} of {len(found)} programs merging moves the bound less than the bytes: "
            "the GEMMs, where the layouts differ most in bytes, are bound by their FLOPs, which merging does not change"
            + (f"; not in {', '.join(exceptions)}, where separate's GEMMs add bytes under their FLOPs while its other "
               "kernels move fewer" if exceptions else "")
            + "; merged's count takes the (T, 3D) result whole in each kernel after its GEMM, in both compilers.")
    by_record = {(r["compiler"], r["mode"], r["layout"]): r for r in records
                 if r["part"] == "qkv" and r["device"] == GPU and r["shape"]["seq_len"] == shape[2]
                 and r.get("variant", "default") == "default"}

    def check() -> bool:  # the bounds within what other fields allow; the bytes' change from the stored totals
        rows = {key: by_record[(c, mode, layout)] for (c, _, _, _, mode), pair in found.items() for layout in pair
                for key in [(c, mode, layout)]}
        stored = all(abs(_bytes_change(pair) - (rows[(c, mode, "separate")]["kernel_traffic_bytes"]
                                                 / rows[(c, mode, "merged")]["kernel_traffic_bytes"] - 1)) < 1e-9
                     for (c, _, _, _, mode), pair in found.items())
        explained = all(pair["separate"].group_bytes("GEMMs") > pair["merged"].group_bytes("GEMMs")
                        and pair["separate"].bytes - pair["separate"].group_bytes("GEMMs")
                        < pair["merged"].bytes - pair["merged"].group_bytes("GEMMs")
                        for (c, _, _, _, mode), pair in found.items() if f"{COMPILER_NAMES[c]} {MODE_NAMES[mode]}" in exceptions)
        return stored and explained and all(bound_within(rows[(c, mode, layout)], pair[layout])
                                            for (c, _, _, _, mode), pair in found.items() for layout in pair)
    return Claim("roofline.record", text, check)


def gemm_claim(records: list[dict[str, Any]]) -> Claim | None:
    found = _largest(_record_pairs(records))
    if not found:
        return None
    parts, checks = [], []
    for (compiler, _, _, _, mode), pair in found.items():
        words = []
        for layout in ("merged", "separate"):
            p = pair[layout]
            gemms = [k for k in p.kernels if k.gemm]
            bound = sum(k.limit == "compute" for k in gemms)
            words.append(f"{layout} {p.gemm_intensity:.0f} ({bound} of {len(gemms)} compute-bound)")
            checks.append((p, gemms))
        parts.append(f"{COMPILER_NAMES[compiler]} {MODE_NAMES[mode]}: " + ", ".join(words)
                     + f", the GEMMs' bound {us(pair['merged'].group_bound_s('GEMMs'))} µs merged and "
                       f"{us(pair['separate'].group_bound_s('GEMMs'))} separate")
    text = (f"The GEMMs' FLOPs per byte there (the ridge is {H100.ridge:.0f}): " + "; ".join(parts) + ". Merged moves "
            "fewer GEMM bytes (h read once, one result), but a compute-bound GEMM's bound is its FLOPs, the same in both "
            "layouts, so where separate's GEMMs are compute-bound too the merge buys them nothing on this estimate.")
    # second path: a GEMM is compute-bound exactly when its own FLOPs per byte exceed the ridge
    return Claim("roofline.gemms", text, lambda: all(
        (k.limit == "compute") == (k.intensity > H100.ridge) for _, gemms in checks for k in gemms))


def path_claim(records: list[dict[str, Any]]) -> Claim | None:
    found = _largest(_record_pairs(records))
    if not found:
        return None
    parts = []
    for (compiler, _, _, _, mode), pair in found.items():
        m, s = pair["merged"], pair["separate"]
        parts.append(f"{COMPILER_NAMES[compiler]} {MODE_NAMES[mode]} {m.group_bytes(PATH) / 1e9:.2f} GB merged "
                     f"({m.group_bound_s(PATH) / m.bound_s:.0%} of its bound), {s.group_bytes(PATH) / 1e9:.2f} GB separate "
                     f"({s.group_bound_s(PATH) / s.bound_s:.0%})")
    text = ("The QK norm, rotary and value-mix kernels, all bound by their bytes, move: " + "; ".join(parts)
            + ". Their bound is larger in every program than the difference merging makes, so on this estimate a fusion "
              "that kept their arrays out of memory (into the GEMM's epilogue or the attention kernel's prologue) could "
              "save more than the merge.")
    return Claim("roofline.path", text, lambda: all(
        all(k.limit == "memory" for k in p.kernels if k.group == PATH)
        and p.group_bound_s(PATH) > abs(pair["separate"].bound_s - pair["merged"].bound_s)
        for pair in found.values() for p in pair.values()))


def _sweep_pairs(sweep: list[dict[str, Any]]) -> dict[tuple[int, str], dict[str, roofline.SweepBound]]:
    """(T, mode) -> merged and separate sweep bounds, where both were compiled."""
    out: dict[tuple[int, str], dict[str, roofline.SweepBound]] = {}
    for b in roofline.sweep_bounds(sweep):
        out.setdefault((b.seq_len, b.mode), {})[b.layout] = b
    return {key: found for key, found in sorted(out.items()) if set(found) == {"merged", "separate"}}


def _small_text(records: list[dict[str, Any]]) -> str:
    found = _record_pairs(records)
    if not found:
        return ""
    seq_len = min(k[2] for k in found)
    small = {k: v for k, v in found.items() if k[2] == seq_len}
    memory = all(k.limit == "memory" for pair in small.values() for p in pair.values() for k in p.kernels)
    dim = next(iter(small))[3]
    return (f" At the study's small shape (D {dim}, T {seq_len}) {'every kernel' if memory else 'not every kernel'} of both "
            "H100 legs is bound by its bytes: " + "; ".join(
                f"{COMPILER_NAMES[c]} {MODE_NAMES[mode]} {us(p['merged'].bound_s)} µs merged, {us(p['separate'].bound_s)} "
                f"separate ({change(p['separate'].bound_s, p['merged'].bound_s)})"
                for (c, _, _, _, mode), p in sorted(small.items(), key=lambda kv: (kv[0][0] != "xla", kv[0][4]))) + ".")


def across_t_claim(records: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> Claim | None:
    both = _sweep_pairs(sweep)
    if not both:
        return None
    bounds = [b for pair in both.values() for b in pair.values()]
    memory_t = max((t for t, _ in both if all(k.limit == "memory" for (u, _), pair in both.items() if u <= t
                                               for b in pair.values() for k in b.gemms)), default=None)
    compute_t = min((t for t, _ in both if all(k.limit == "compute" for (u, _), pair in both.items() if u >= t
                                                 for b in pair.values() for k in b.gemms)), default=None)
    changes = {key: (p["separate"].bound_s - p["merged"].bound_s) / p["merged"].bound_s for key, p in both.items()}
    lo, hi = min(changes, key=lambda k: changes[k]), max(changes, key=lambda k: changes[k])
    last = max(t for t, _ in both)
    at_last = ", ".join(f"{MODE_NAMES[mode]} {change(p['separate'].bound_s, p['merged'].bound_s)}"
                        for (t, mode), p in both.items() if t == last)
    text = ("Across T (XLA for the H100 at D 768, its dot-merger sweep at the default threshold, where separate is merged "
            "by XLA up to the switch above; the sweep keeps each dot's shapes and the program's total bytes, so each dot "
            "counts as a GEMM kernel moving its operands and result and the other bytes as kernels bound by them): "
            + (f"every GEMM is bound by its bytes up to T {memory_t:,}" if memory_t else "no T leaves every GEMM bound by its bytes")
            + (f" and by its FLOPs from T {compute_t:,}" if compute_t else "") + f"; separate's bound against merged's "
            f"ranges from {changes[lo] * 100:+.0f}% ({MODE_NAMES[lo[1]]}, T {lo[0]:,}) to {changes[hi] * 100:+.0f}% "
            f"({MODE_NAMES[hi[1]]}, T {hi[0]:,}), and at T {last:,}: {at_last}. Once the GEMMs are bound by their "
            "FLOPs, what merging changes is the other kernels' bytes." + _small_text(records))

    found = _record_pairs(records)
    small = [p for key, pair in found.items() if key[2] == min(k[2] for k in found) for p in pair.values()] if found else []

    def check() -> bool:  # second path: the sweep's dots against the model's FLOPs; each dot's limit against the ridge
        return all(abs(b.flops - roofline.model_gemm_flops(b.mode, b.seq_len, 768)) < 1
                   and all((k.limit == "compute") == (k.intensity > H100.ridge) for k in b.gemms) for b in bounds) \
            and all(k.intensity < (H100.ridge if k.gemm else H100.vector_ridge) for p in small for k in p.kernels)
    return Claim("roofline.across_t", text, check)


def _bounds_by_program(records: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> dict[tuple, float]:
    """(compiler, mode, layout, T, D) -> the H100 bound in seconds of the compiled-without-GPU program:
    its kernel table's where the leg made it, else (XLA) the dot-merger sweep's at that T."""
    found: dict[tuple, float] = {(s.compiler, s.mode, s.layout, s.seq_len, s.model_dim): s.bound_s
                                 for s in roofline.qkv_programs(records) if s.device == GPU}
    for b in roofline.sweep_bounds(sweep):
        found.setdefault(("xla", b.mode, b.layout, b.seq_len, sweep_lib.MODEL_DIM), b.bound_s)
    return found


def measured_claim(records: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> Claim | None:
    """Where the QKV path was timed on a GPU (`fusion_report.py --device cuda`): its median times
    beside the compiled-without-GPU bound of the same program, and separate against merged in each."""
    bounds = _bounds_by_program(records, sweep)
    timed = [r for r in records if r["part"] == "qkv" and r.get("variant", "default") == "default" and r.get("time")
             and r["device"] not in ("cpu", GPU)]
    pairs: dict[tuple, dict[str, dict[str, Any]]] = {}
    for r in timed:
        pairs.setdefault((r["device"], r["compiler"], r["shape"]["seq_len"], r["shape"]["model_dim"], r["mode"]),
                         {})[r["layout"]] = r
    parts: list[str] = []
    checked: list[dict[str, Any]] = []
    for (device, compiler, seq_len, dim, mode), pair in sorted(pairs.items(), key=lambda kv: (
            kv[0][0], kv[0][1] != "xla", -kv[0][2], -kv[0][3], kv[0][4])):
        if set(pair) != {"merged", "separate"}:
            continue
        ms = {layout: pair[layout]["time"]["median_ms"] / 1e3 for layout in pair}
        bound = {layout: bounds.get((compiler, mode, layout, seq_len, dim)) for layout in pair}
        text = (f"{label(compiler, device)} {MODE_NAMES[mode]} at T {seq_len:,}: merged {us(ms['merged'])} µs, separate "
                f"{us(ms['separate'])} µs (separate {change(ms['separate'], ms['merged'])})")
        merged, separate = bound["merged"], bound["separate"]
        if merged is not None and separate is not None:
            text += (f", against bounds of {us(merged)} and {us(separate)} µs ({change(separate, merged)}; measured "
                     f"{ms['merged'] / merged:.2g}x and {ms['separate'] / separate:.2g}x the bound)")
        parts.append(text)
        checked += pair.values()
    if not parts:
        return None
    text = ("Measured on a GPU (median of the timed calls, µs per call) beside the H100 roofline bound of the same program "
            "compiled without a GPU (the H100's datasheet peaks whatever the GPU): " + "; ".join(parts) + ".")

    def check() -> bool:  # ordered times, none faster than the model's GEMM FLOPs at Hopper's matrix peak (H100 = H200)
        return all(r["time"]["min_ms"] <= r["time"]["median_ms"] <= r["time"]["max_ms"]
                   and r["time"]["min_ms"] / 1e3 >= roofline.model_gemm_flops(r["mode"], r["shape"]["seq_len"],
                                                                              r["shape"]["model_dim"]) / H100.matrix_flop_s
                   for r in checked)
    return Claim("roofline.measured", text, check)


def roofline_claims(records: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> list[Claim]:
    """The roofline section's sentences, in page order (none where no QKV program has a kernel table)."""
    if not roofline.qkv_programs(records):
        return []
    made = [method_claim(records), record_claim(records), gemm_claim(records), path_claim(records),
            across_t_claim(records, sweep), measured_claim(records, sweep)]
    return [c for c in made if c is not None]


# ---------------------------------------------------------------------------------------------
# Tables


def summary_table(records: list[dict[str, Any]]) -> list[str]:
    """Per target, shape, mode and layout: GEMM GFLOP, MB moved per kernel group, the GEMMs'
    FLOP/byte, the bound per group and in all (H100 legs only), separate against merged."""
    head = ("| target | D, T | mode | layout | GEMM GFLOP | MB moved: GEMMs / norm, rotary, value mix / other | GEMM FLOP/byte "
            "| H100 bound µs: GEMMs / norm, rotary, value mix / other | H100 bound µs | separate vs merged |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    found = roofline.pairs(roofline.qkv_programs(records))
    order = sorted(found, key=lambda k: (k[1] != GPU, k[0] != "xla", k[2], list(MODE_NAMES).index(k[4])))
    for key in order:
        for layout in ("merged", "separate"):
            p = found[key][layout]
            gpu = p.device == GPU
            moved = " / ".join(mb(p.group_bytes(g)) for g in GROUPS)
            bounds = " / ".join(us(p.group_bound_s(g)) for g in GROUPS) if gpu else "- (a CPU)"
            total = us(p.bound_s) if gpu else "-"
            versus = change(p.bound_s, found[key]["merged"].bound_s) if gpu and layout == "separate" else ""
            lines.append(f"| {label(p.compiler, p.device)} | D {p.model_dim}, T {p.seq_len:,} | {MODE_NAMES[p.mode]} | {layout} "
                         f"| {p.gemm_flops / 1e9:,.3g} | {moved} | {p.gemm_intensity:.0f} | {bounds} | {total} | {versus} |")
    return lines + [""]


def sweep_table(sweep: list[dict[str, Any]]) -> list[str]:
    """T x mode: each layout's GEMMs (compute-bound among them) and its GEMMs' and other bytes' bound, µs."""
    both = _sweep_pairs(sweep)
    if not both:
        return []
    lines = ["| T | mode | merged: GEMMs (compute-bound), bound µs: GEMMs + other | separate: GEMMs (compute-bound), bound µs: "
             "GEMMs + other | separate vs merged |", "|---|---|---|---|---|"]
    for (seq_len, mode), pair in sorted(both.items(), key=lambda kv: (kv[0][0], list(MODE_NAMES).index(kv[0][1]))):
        cells = [f"{len(b.gemms)} ({sum(k.limit == 'compute' for k in b.gemms)}), {us(b.gemm_s)} + {us(b.rest_s)}"
                 for b in (pair["merged"], pair["separate"])]
        lines.append(f"| {seq_len:,} | {MODE_NAMES[mode]} | {cells[0]} | {cells[1]} | "
                     f"{change(pair['separate'].bound_s, pair['merged'].bound_s)} |")
    return lines + [""]


def mb(value: float) -> str:
    """Megabytes: three significant digits below 100, whole with separators above."""
    if value < 1e4:
        return "<0.01"
    return f"{value / 1e6:.3g}" if value < 1e8 else f"{value / 1e6:,.0f}"


def kernel_tables(records: list[dict[str, Any]]) -> list[str]:
    """Per H100 program at the record's shape, folded: each kernel's GFLOP, MB, FLOP/byte, bound and limit."""
    out = []
    for (compiler, device, seq_len, dim, mode), pair in _largest(_record_pairs(records)).items():
        for layout in ("merged", "separate"):
            p = pair[layout]
            out += ["<details>", f"<summary>{label(compiler, device)}, {MODE_NAMES[mode]}, {layout}, D {dim}, T {seq_len:,}: "
                    f"{len(p.kernels)} kernels, bound {us(p.bound_s)} µs</summary>", "",
                    "| # | kernel | group | GFLOP | MB moved | FLOP/byte | bound µs | bound by |", "|---|---|---|---|---|---|---|---|"]
            out += [f"| {i} | `{k.name}` | {k.group} | {k.flops / 1e9:,.3g} | {mb(k.bytes)} | {k.intensity:,.1f} | "
                    f"{us(k.bound_s)} | {k.limit} |" for i, k in enumerate(p.kernels, 1)]
            out += ["", "</details>", ""]
    return out
