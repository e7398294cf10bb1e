"""The fusion study's numbers and sentences, computed from its records (results.json).

`rows` flattens each program's record into the numbers the tables and the plot show. Every
sentence of docs/FUSION.md's answer is a `Claim` made here from the records: its text is
generated (numbers and comparative words from the data) and its `check` re-derives the fact it
states from the per-kernel tables (read from the optimized HLO or Inductor's output code), a
second path through the data; tests/tools/fusion/test_claims.py runs every check on the
committed results and finds every sentence in the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

COMPILER_NAMES = {"xla": "XLA", "inductor": "Inductor"}
DEVICE_NAMES = {"cpu": "CPU", "h100-compile-only": "H100 (compile only)", "h100": "H100"}
MODE_NAMES = {"fwd": "forward", "fwdbwd": "forward+backward"}
PART_NAMES = {"qkv": "QKV path", "block": "block"}
# jaxgpt's functions on the QKV path (the innermost frame XLA records for an instruction) -> stage.
STAGES = {"linear": "projection", "CausalSelfAttention.project": "split, value mix",
          "CausalSelfAttention.project.<locals>.<genexpr>": "projection", "norm": "QK norm", "apply_rotary": "rotary"}


def label(compiler: str, device: str) -> str:
    return f"{COMPILER_NAMES[compiler]} {DEVICE_NAMES.get(device, device)}"


def minimum_bytes(records: list[dict[str, Any]]) -> dict[tuple, float]:
    """The least a program must move: its arguments read once and its results written once,
    from XLA's memory_analysis of the same program (weights fp32, activations and cotangents
    bf16), keyed by (part, mode, layout, shape name): the same math for both compilers."""
    return {(r["part"], r["mode"], r["layout"], r["shape"]["name"]): r["argument_bytes"] + r["output_bytes"]
            for r in records if r["compiler"] == "xla" and "argument_bytes" in r and r.get("variant", "default") == "default"}


def rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per program: the numbers the tables and the plot use."""
    minimum = minimum_bytes(records)
    out = []
    for r in records:
        row = {
            "compiler": r["compiler"], "device": r["device"], "part": r["part"], "mode": r["mode"], "layout": r["layout"],
            "shape": r["shape"]["name"], "T": r["shape"]["seq_len"], "D": r["shape"]["model_dim"],
            "variant": r.get("variant", "default"), "attention": r.get("attention"),
            "kernels": r["kernels"], "loop_kernels": r.get("loop_kernels", 0), "gemm_kernels": r["gemm_kernels"],
            "bytes": r["kernel_traffic_bytes"], "min_bytes": minimum.get((r["part"], r["mode"], r["layout"], r["shape"]["name"])),
            "temp_bytes": r.get("temp_bytes"), "time": r.get("time"), "compile_s": r["compile_s"],
        }
        row["over_min"] = row["bytes"] / row["min_bytes"] if row["min_bytes"] else None
        out.append(row)
    return out


def _field(row: dict[str, Any], key: str) -> Any:
    value = row.get(key, "default" if key == "variant" else None)
    return value["name"] if key == "shape" and isinstance(value, dict) else value


def find(table: list[dict[str, Any]], **keys) -> dict[str, Any] | None:
    """The first row or record whose fields equal `keys` (variant defaults to "default"; a
    shape is compared by its name)."""
    keys.setdefault("variant", "default")
    keys = {k: v["name"] if k == "shape" and isinstance(v, dict) else v for k, v in keys.items()}
    for row in table:
        if all(_field(row, k) == v for k, v in keys.items()):
            return row
    return None


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What scripts/fusion_report.py prints: the rows (times as medians)."""
    return {"rows": [{**row, "time": row["time"]["median_ms"] if row["time"] else None} for row in rows(records)]}


@dataclass(frozen=True)
class Claim:
    """One sentence of the page, made from the data, and the check that re-derives its fact."""
    key: str
    text: str
    check: Callable[[], bool] = field(compare=False, repr=False)


# Inductor names a generated kernel after the aten ops it fused: the ops that mark a stage.
INDUCTOR_STAGE_OPS = {"mm": "projection", "addmm": "projection", "rsqrt": "QK norm", "mean": "QK norm",
                      "sub": "rotary", "cat": "rotary", "select": "split, value mix", "split": "split, value mix"}
_INDUCTOR_PREFIXES = ("cpp_fused_", "triton_poi_fused_", "triton_red_fused_", "triton_per_fused_", "triton_tem_fused_")


def inductor_ops(name: str) -> list[str]:
    """The aten ops a generated kernel's name lists (cpp_fused_add_mean_mul_1 -> add, mean, mul);
    an extern or fallback call is its own op."""
    for prefix in _INDUCTOR_PREFIXES:
        if name.startswith(prefix):
            body = re.sub(r"_\d+$", "", name[len(prefix):])
            # aten names with underscores that the kernel name keeps whole
            ops, rest = [], body
            for whole in ("_to_copy", "_unsafe_view", "native_layer_norm", "scaled_dot_product_flash_attention_for_cpu",
                          "select_backward", "slice_backward", "rms_norm"):
                if whole in rest:
                    ops.append(whole.strip("_"))
                    rest = rest.replace(whole, "_")
            return sorted(set(ops + [op for op in rest.split("_") if op]))
    return [name.split(".")[-2] if name.count(".") >= 1 and name.startswith("aten.") else name]


def kernel_stages(record: dict[str, Any], kernel: dict[str, Any]) -> list[str]:
    """The QKV-path stages a kernel computes, in path order: XLA from the jaxgpt functions its
    instructions were traced from, Inductor from the aten ops it is named after."""
    if record["compiler"] == "xla":
        found = {STAGES[f] for f in kernel.get("functions", []) if f in STAGES}
    else:
        found = {INDUCTOR_STAGE_OPS[op] for op in inductor_ops(kernel["name"]) if op in INDUCTOR_STAGE_OPS}
        if kernel.get("gemm"):
            found.add("projection")
    order = ["projection", "split, value mix", "QK norm", "rotary"]
    return [stage for stage in order if stage in found]


def fused_text(record: dict[str, Any], kernel: dict[str, Any]) -> str:
    """What a kernel fuses, in words: a GEMM's ops before and after its dot, else its ops."""
    def counted(ops) -> str:
        if isinstance(ops, list):
            ops = {op: ops.count(op) for op in dict.fromkeys(ops)}
        return ", ".join(op + (f" x{n}" if n > 1 else "") for op, n in ops.items())

    if record["compiler"] == "inductor":
        return ", ".join(inductor_ops(kernel["name"])) if kernel["kind"] not in ("extern", "fallback") else kernel["name"]
    if "prologue" in kernel:
        parts = [f"before: {counted(kernel['prologue'])}" if kernel["prologue"] else "", "dot",
                 f"after: {counted(kernel['epilogue'])}" if kernel["epilogue"] else ""]
        return "; ".join(p for p in parts if p)
    return counted(kernel.get("ops", {})) or "(data movement)"


def committed_qkv(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The QKV records kept in full (fusion_artifacts.committed_shapes; not an ablation that
    changed nothing), in page order."""
    from jaxgpt_tools.fusion.artifacts import committed_shapes, unchanged_ablation

    keep = committed_shapes(records)
    chosen = [r for r in records if r["part"] == "qkv" and keep.get((r["compiler"], r["device"])) == r["shape"]["name"]
              and not unchanged_ablation(records, r)]
    return sorted(chosen, key=lambda r: (r["compiler"] != "xla", r["device"], list(MODE_NAMES).index(r["mode"]),
                                         r.get("variant", "default") != "default", r["layout"]))


# ---------------------------------------------------------------------------------------------
# The page's sentences. Each function returns the claims it can make from the records present
# (none where its programs are missing); texts are generated, checks re-derive the facts.

def _kernels(record: dict[str, Any]) -> int:
    """Kernels per call recounted from the per-kernel table (the check's path)."""
    return sum(k.get("runs", 1) for k in record["kernel_table"])


def _gemms(record: dict[str, Any]) -> int:
    return sum(k.get("runs", 1) for k in record["kernel_table"] if k["gemm"])


def _gemm_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [k for k in record["kernel_table"] if k["gemm"]]


def _moved(record: dict[str, Any]) -> float:
    return sum((k["read"] + k["written"]) * k.get("runs", 1) for k in record["kernel_table"])


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _pct(new: float, old: float) -> str:
    """'12% more' / '3% fewer' / 'as many' of new against old."""
    change = (new - old) / old * 100 if old else 0.0
    if abs(change) < 0.5:
        return "as many"
    return f"{abs(change):.0f}% {'more' if change > 0 else 'fewer'}"


def _mb(value: float) -> str:
    return f"{value / 1e6:,.3g} MB" if value < 1e8 else f"{value / 1e6:,.0f} MB"


def _shape(record: dict[str, Any]) -> str:
    return f"D {record['shape']['model_dim']}, T {record['shape']['seq_len']:,}"


def _ms(value: float) -> str:
    """Milliseconds, three significant digits (whole ms from 100 on)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _time_words(a: dict[str, Any], b: dict[str, Any]) -> str:
    """a's median time against b's: 'x% higher' / 'x% lower' / 'the same', and whether their quartile ranges
    overlap (then the difference is within the run-to-run spread)."""
    change = (a["median_ms"] - b["median_ms"]) / b["median_ms"] * 100
    overlap = a["p25_ms"] <= b["p75_ms"] and b["p25_ms"] <= a["p75_ms"]
    word = "the same" if abs(change) < 0.5 else f"{abs(change):.0f}% {'higher' if change > 0 else 'lower'}"
    return (f"{word} "
            f"({_ms(a['median_ms'])} against {_ms(b['median_ms'])} ms; quartile ranges {'overlap' if overlap else 'apart'})")


def _pair(records, compiler: str, device: str, mode: str, shape: str, variant: str = "default"):
    """(merged, separate) QKV records of one compiler, device, mode and shape name."""
    return tuple(find(records, compiler=compiler, device=device, part="qkv", mode=mode, layout=layout, shape=shape,
                      variant=variant) for layout in ("merged", "separate"))


def answer_claims(records: list[dict[str, Any]]) -> list[Claim]:
    """Per compiler and device, at its largest shape: what merging changes on the QKV path."""
    from jaxgpt_tools.fusion.artifacts import committed_shapes

    made = [Claim("answer.question", "The question: how XLA and TorchInductor fuse the record's QKV path (the QKV "
                  "projection, split, value mix with lambdas and the value embedding, QK RMSNorm and rotary, up to the "
                  "attention kernel's inputs, with attention itself left out so that it costs the same on both sides), "
                  "and what the record's merged (3D, D) weight buys over three (D, D) weights.",
                  lambda: all(r["attention"] is None and not r.get("aten_fallbacks") and not r.get("custom_calls")
                              for r in records if r["part"] == "qkv"))]
    for (compiler, device), shape in sorted(committed_shapes(records).items(), key=lambda kv: (kv[0][0] != "xla", kv[0][1])):
        fwd_m, fwd_s = _pair(records, compiler, device, "fwd", shape)
        bwd_m, bwd_s = _pair(records, compiler, device, "fwdbwd", shape)
        if None in (fwd_m, fwd_s, bwd_m, bwd_s):
            continue
        # Where the forward's bytes differ: h read once per GEMM; the merged GEMM's result written in fp32.
        tokens, dim = fwd_m["shape"]["seq_len"], fwd_m["shape"]["model_dim"]
        h_bytes = 2 * tokens * dim
        why = []
        extra = fwd_s["gemm_kernels"] - fwd_m["gemm_kernels"]
        if extra > 0:
            why.append(f"each of separate's {extra} extra GEMMs reads h again, {_mb(h_bytes)}")
        fp32_out = [k for k in _gemm_rows(fwd_m) if k["written"] == 4 * tokens * 3 * dim]
        if fp32_out:
            why.append(f"merged's one GEMM writes its (T, 3D) result in fp32, {_mb(fp32_out[0]['written'])}, then "
                       "converts and slices it before the norm")
        text = (f"{label(compiler, device)}, {_shape(fwd_m)}: merged, the QKV path is {fwd_m['kernels']} kernels forward "
                f"({fwd_m['gemm_kernels']} GEMM{'s' if fwd_m['gemm_kernels'] != 1 else ''}) and {bwd_m['kernels']} "
                f"forward+backward ({bwd_m['gemm_kernels']} GEMMs); separate, {fwd_s['kernels']} ({fwd_s['gemm_kernels']}) "
                f"and {bwd_s['kernels']} ({bwd_s['gemm_kernels']}); separate moves {_pct(fwd_s['kernel_traffic_bytes'], fwd_m['kernel_traffic_bytes'])} "
                f"bytes forward ({_mb(fwd_s['kernel_traffic_bytes'])} against {_mb(fwd_m['kernel_traffic_bytes'])}"
                + (": " + "; ".join(why) if why else "") + ") and "
                f"{_pct(bwd_s['kernel_traffic_bytes'], bwd_m['kernel_traffic_bytes'])} forward+backward")
        if all(r.get("time") for r in (fwd_m, fwd_s, bwd_m, bwd_s)):
            text += (f"; its median time is {_time_words(fwd_s['time'], fwd_m['time'])} forward and "
                     f"{_time_words(bwd_s['time'], bwd_m['time'])} forward+backward")
        elif device == "h100-compile-only":
            text += " (compiled without a GPU: no time)"
        progs = (fwd_m, fwd_s, bwd_m, bwd_s)
        made.append(Claim(f"answer.{compiler}_{device}", text + ".", lambda progs=progs, h=h_bytes: (
            all(_kernels(r) == r["kernels"] and _gemms(r) == r["gemm_kernels"] and abs(_moved(r) - r["kernel_traffic_bytes"]) < 1
                for r in progs)
            and all(k["read"] >= h for k in _gemm_rows(progs[1])))))
    return made


def _merges(records: list[dict[str, Any]], gemms: Callable[[dict[str, Any]], int]) -> dict[tuple[str, str], dict[str, bool]]:
    """(compiler, device) -> {shape text: whether the separate forward has as many GEMMs as the
    merged one}, GEMMs counted by `gemms`."""
    out: dict[tuple[str, str], dict[str, bool]] = {}
    for r in records:
        if r["part"] == "qkv" and r["mode"] == "fwd" and r["layout"] == "separate" and r.get("variant", "default") == "default":
            merged = find(records, compiler=r["compiler"], device=r["device"], part="qkv", mode="fwd", layout="merged",
                          shape=r["shape"])
            if merged is not None:
                out.setdefault((r["compiler"], r["device"]), {})[_shape(r)] = gemms(r) == gemms(merged)
    return {key: dict(sorted(by_shape.items(), key=lambda kv: int(kv[0].split("T ")[1].replace(",", ""))))
            for key, by_shape in out.items()}


def merge_claim(records: list[dict[str, Any]]) -> list[Claim]:
    """Which compilers merge the separate projections into one GEMM themselves, at which shapes."""
    merges = _merges(records, lambda r: r["gemm_kernels"])
    if not merges:
        return []
    parts = []
    for (compiler, device), by_shape in sorted(merges.items(), key=lambda kv: (kv[0][0] != "xla", kv[0][1])):
        yes = [shape for shape, merged in by_shape.items() if merged]
        no = [shape for shape, merged in by_shape.items() if not merged]
        parts.append(f"{label(compiler, device)} " + (f"does at {' and '.join(yes)}" if yes else "does not")
                     + (f"{' but not' if yes else ''} at {' and '.join(no)}" if no else ""))
    text = ("Merging buys a GEMM only where the compiler would not merge the three projections itself: "
            + "; ".join(parts) + " (XLA's dot merger and its `xla_gpu_dot_merger_threshold_mb`, below). Beyond the GEMM "
            "count, the layout changes which neighbours each compiler fuses into the projection, which is what moves "
            "the kernel counts and bytes above; the reasons per compiler follow.")
    return [Claim("answer.merging", text, lambda: _merges(records, _gemms) == merges)]


def why_claims(records: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[Claim]:
    made = []
    seq = {r["shape"]["name"]: r["shape"]["seq_len"] for r in records}
    shapes_aot = sorted({r["shape"]["name"] for r in records if r["device"] == "h100-compile-only" and r["part"] == "qkv"},
                        key=seq.get)
    # XLA for the H100: the dot merger merges small separate projections only.
    if len(shapes_aot) >= 2:
        small_m, small_s = _pair(records, "xla", "h100-compile-only", "fwd", shapes_aot[0])
        big_m, big_s = _pair(records, "xla", "h100-compile-only", "fwd", shapes_aot[-1])
        if None not in (small_m, small_s, big_m, big_s):
            big_moves = [k["read"] + k["written"] for k in _gemm_rows(big_s)]
            h_bytes = 2 * big_s["shape"]["seq_len"] * big_s["shape"]["model_dim"]
            merges_small = small_s["gemm_kernels"] == small_m["gemm_kernels"]
            merges_big = big_s["gemm_kernels"] == big_m["gemm_kernels"]
            text = (f"XLA for the H100 {'merges' if merges_small else 'does not merge'} the three separate projections "
                    f"into one GEMM itself at {_shape(small_s)} (separate forward: {small_s['gemm_kernels']} GEMM, "
                    f"merged: {small_m['gemm_kernels']}) and {'also' if merges_big else 'not'} at {_shape(big_s)} "
                    f"({big_s['gemm_kernels']} GEMMs against {big_m['gemm_kernels']}): its dot merger pass merges dots "
                    f"that share an operand only while one of them moves at most `xla_gpu_dot_merger_threshold_mb` "
                    f"(default 32 MB), and each projection's GEMM moves {_mb(min(big_moves))}"
                    f"{'-' + _mb(max(big_moves)) if max(big_moves) - min(big_moves) > 1e5 else ''} at T "
                    f"{big_s['shape']['seq_len']:,} (h alone is {_mb(h_bytes)}).")
            made.append(Claim("why.xla_h100_dot_merger", text, lambda sm=small_m, ss=small_s, bm=big_m, bs=big_s,
                              yes_small=merges_small, yes_big=merges_big, moves=tuple(big_moves): (
                (_gemms(ss) == _gemms(sm)) == yes_small and (_gemms(bs) == _gemms(bm)) == yes_big
                and all(m > 32 * 2**20 for m in moves) == (not yes_big))))
    # XLA for the H100: the weights' cast in the GEMM prologue; XLA:CPU's casts as kernels of their own.
    for shape in shapes_aot[-1:]:
        merged, separate = _pair(records, "xla", "h100-compile-only", "fwd", shape)
        if merged is None or separate is None:
            continue

        def cast_in_prologue(record):
            return [k for k in _gemm_rows(record) if "convert" in k.get("prologue", [])]

        def cast_kernels(record):
            """Kernels that only convert, on the projection's inputs (the second path)."""
            return [k for k in record["kernel_table"] if not k["gemm"] and set(k.get("ops", {})) == {"convert"}
                    and kernel_stages(record, k) == ["projection"]]

        cpu = [r for r in (find(records, compiler="xla", device="cpu", part="qkv", mode="fwd", layout=layout,
                                 shape=max((x["shape"] for x in records if x["device"] == "cpu"), key=lambda sh: sh["seq_len"],
                                           default={"name": ""}))
                            for layout in ("merged", "separate")) if r is not None]
        cpu_casts = ", ".join(f"{len(cast_kernels(r))} {r['layout']}" for r in cpu)
        text = (f"XLA for the H100 fuses the fp32 weights' cast to bf16 into the Triton GEMMs' prologue (before the dot: "
                f"convert) in {len(cast_in_prologue(merged))} of {_count(len(_gemm_rows(merged)), 'GEMM')} merged and "
                f"{len(cast_in_prologue(separate))} of {len(_gemm_rows(separate))} separate at {_shape(separate)}, so no "
                f"kernel writes a bf16 copy of a weight"
                + (f"; XLA:CPU instead converts for its YNNPACK GEMMs in loop kernels of their own ({cpu_casts})"
                   if cpu else "") + ".")
        made.append(Claim("why.xla_h100_prologue", text, lambda m=merged, s=separate: (
            not cast_kernels(m) and not cast_kernels(s) and len(cast_in_prologue(m)) == len(_gemm_rows(m)))))
    # XLA for the H100: the value scale in v's GEMM epilogue, separate only.
    for shape in shapes_aot[-1:]:
        merged, separate = _pair(records, "xla", "h100-compile-only", "fwd", shape)
        if merged is None or separate is None:
            continue

        def scaled(record):
            return [k for k in _gemm_rows(record) if "multiply" in k.get("epilogue", []) and "split, value mix" in kernel_stages(record, k)]

        in_separate, in_merged = scaled(separate), scaled(merged)
        text = (f"Separate weights let XLA for the H100 fuse the value scale lambdas[0] * v into v's GEMM epilogue "
                f"({', '.join('`' + k['name'] + '`' for k in in_separate) or 'no GEMM'} at {_shape(separate)}); the merged GEMM "
                + ("takes no such epilogue, since the scale applies to a third of its output, so a loop fusion applies it."
                   if not in_merged else "takes it too."))
        def mix_multiplies(record):
            """Multiplies in the non-GEMM kernel that adds the value embedding: 2 when it also scales v."""
            return [k["ops"].get("multiply", 0) for k in record["kernel_table"] if not k["gemm"] and "add" in k["ops"]
                    and kernel_stages(record, k) == ["split, value mix"]]

        if in_separate:
            made.append(Claim("why.xla_h100_value_scale", text, lambda s=separate, m=merged: (
                bool(scaled(s)) and not scaled(m) and mix_multiplies(m) == [2] and mix_multiplies(s) == [1])))
    # XLA for the H100: where the QK norm and rotary run.
    for shape in shapes_aot[-1:]:
        parts = []
        checks = []
        for layout in ("merged", "separate"):
            record = find(records, compiler="xla", device="h100-compile-only", part="qkv", mode="fwd", layout=layout,
                          shape=shape)
            if record is None:
                continue
            norm = [k for k in record["kernel_table"] if "QK norm" in kernel_stages(record, k)]
            rotary = [k for k in record["kernel_table"] if "rotary" in kernel_stages(record, k) and k not in norm]
            kinds = sorted({k["kind"] for k in norm})
            parts.append(f"{layout}, {len(norm)} kernel{'s' if len(norm) != 1 else ''} of kind {' / '.join('`' + k + '`' for k in kinds)} "
                         f"compute the norm, writing {_mb(sum(k['written'] for k in norm))} (fp32), and {len(rotary)} more "
                         f"apply rotary")
            # second path: the norm's kernels are the ones whose ops reduce or take an rsqrt
            checks.append(lambda r=record, n=norm: [k for k in r["kernel_table"]
                                                    if {"reduce", "rsqrt"} & set(k.get("ops", {}))] == n)
        if parts:
            made.append(Claim("why.xla_h100_norm", f"On the H100 at {_shape(find(records, shape=shape))}, "
                              "XLA keeps the QK norm out of the GEMM: " + "; ".join(parts) + " (XLA's Triton GEMM "
                              "fusions take elementwise epilogues only; the norm's row reduction runs in a Triton "
                              "normalization fusion, XLA's block-level `triton` kind).",
                              lambda checks=checks: all(c() for c in checks)))
    # XLA:CPU: YNNPACK fusions.
    cpu_shape = max((r["shape"] for r in records if r["compiler"] == "xla" and r["device"] == "cpu" and r["part"] == "qkv"),
                    key=lambda s: s["seq_len"], default=None)
    if cpu_shape is not None:
        merged, separate = _pair(records, "xla", "cpu", "fwd", cpu_shape["name"])
        if merged is not None and separate is not None:
            def gemm_with_norm(record):
                return [k for k in record["kernel_table"] if "dot" in k.get("ops", {}) and "reduce" in k.get("ops", {})]

            ynn = lambda record: sum(k["kind"] == "ynn_fusion" for k in record["kernel_table"])  # noqa: E731
            fused_s, fused_m = gemm_with_norm(separate), gemm_with_norm(merged)
            names = lambda ks: ", ".join("`" + k["name"] + "`" for k in ks)  # noqa: E731
            if fused_s and not fused_m:
                how = (f"with separate weights {len(fused_s)} of them fuse a projection GEMM with the QK norm's sum of "
                       f"squares ({names(fused_s)}: dot and reduce in one YNNPACK fusion); merged, none does: the one GEMM "
                       f"writes its (T, 3D) result in fp32, which is converted and sliced before the norm's reductions run "
                       f"in YNNPACK fusions of their own")
            elif fused_s or fused_m:
                how = (f"{len(fused_s)} YNNPACK fusions hold a projection GEMM and the QK norm's sum of squares separate "
                       f"({names(fused_s) or 'none'}), {len(fused_m)} merged ({names(fused_m) or 'none'})")
            else:
                how = "no YNNPACK fusion holds both a projection GEMM and the QK norm's reduction, in either layout"
            text = (f"XLA:CPU hands its dots and reductions to YNNPACK (`__ynn_fusion` custom fusions, "
                    f"`xla_cpu_experimental_ynn_fusion_type`): at {_shape(separate)}, {how} ({ynn(merged)} YNNPACK fusions "
                    f"merged, {ynn(separate)} separate); separate launches {separate['kernels']} kernels forward against "
                    f"merged's {merged['kernels']}.")
            # second path: the same kernels by the jaxgpt functions they were traced from (linear and norm)
            by_source = lambda record: [k for k in record["kernel_table"] if k["kind"] == "ynn_fusion"  # noqa: E731
                                        and {"projection", "QK norm"} <= set(kernel_stages(record, k))]
            made.append(Claim("why.xla_cpu_ynn", text, lambda m=merged, s=separate, fm=fused_m, fs=fused_s: (
                by_source(s) == fs and by_source(m) == fm and _kernels(s) == s["kernels"] and _kernels(m) == m["kernels"])))
    # Inductor on the CPU.
    ind_shape = max((r["shape"] for r in records if r["compiler"] == "inductor" and r["device"] == "cpu" and r["part"] == "qkv"),
                    key=lambda s: s["seq_len"], default=None)
    if ind_shape is not None:
        merged, separate = _pair(records, "inductor", "cpu", "fwd", ind_shape["name"])
        if merged is not None and separate is not None:
            def generated(record, staged: bool):
                """Generated kernels that compute a stage of the path (staged) or only cast weights."""
                return [k for k in record["kernel_table"] if k["kind"] not in ("extern", "fallback")
                        and bool(kernel_stages(record, k)) == staged]

            externs = lambda record: [k for k in record["kernel_table"] if k["gemm"]]  # noqa: E731
            text = (f"Inductor on the CPU leaves every GEMM to an extern `mm` call ({len(externs(merged))} merged, "
                    f"{len(externs(separate))} separate, at {_shape(separate)} forward), so nothing is fused into a GEMM "
                    f"(its C++ GEMM template, which could take a prologue or epilogue, is tried only with `max_autotune`); "
                    f"its scheduler fuses everything between the GEMMs and the attention inputs (split, value mix, QK norm, "
                    f"rotary) into {_count(len(generated(merged, True)), 'generated C++ kernel')} merged and "
                    f"{len(generated(separate, True))} separate, where each GEMM's output feeds its own "
                    f"({', '.join('`' + k['name'] + '`' for k in generated(separate, True))}), and casts the fp32 weights "
                    f"to bf16 in {_count(len(generated(merged, False)), 'kernel')} merged and {len(generated(separate, False))} separate.")
            made.append(Claim("why.inductor_cpu", text, lambda m=merged, s=separate: (
                all(k["kind"] == "extern" for r in (m, s) for k in externs(r))
                and len(externs(s)) == _gemms(s) and len(externs(m)) == _gemms(m))))
    if not any(r["compiler"] == "inductor" and r["device"] != "cpu" for r in records):
        made.append(Claim("why.inductor_gpu", "Inductor's H100 code is not in this study: no GPU was lent to the run that "
                          "made it, and its Triton kernels (and their autotuned GEMM templates with epilogue fusion) are "
                          "generated only on a GPU; that column stays empty rather than estimated. On an H100, "
                          "`python scripts/fusion_report.py --device cuda --shapes small,record_gpu --profile-shapes small,record_gpu "
                          "--no-gpu-aot --out runs/fusion-gpu` "
                          "compiles and times both compilers there with each kernel's time from the profilers, and "
                          "`python scripts/fusion_report.py --from-results artifacts/fusion runs/fusion-gpu --write-docs` "
                          "adds it to this page.",
                          lambda: not any(r["compiler"] == "inductor" and r["device"] != "cpu" for r in records)))
    return made


def ablation_claims(records: list[dict[str, Any]]) -> list[Claim]:
    """The flags that decide the merge, turned: XLA's dot-merger threshold, Inductor's
    `batch_linear_lhs` pre-grad pass; their effect on the separate layout's forward."""
    made = []
    for ablated in [r for r in records if r.get("variant", "default") != "default" and r["layout"] == "separate"
                    and r["mode"] == "fwd" and r["part"] == "qkv"]:
        base = find(records, **{k: ablated[k] for k in ("compiler", "device", "part", "mode", "layout", "shape")})
        merged = find(records, **{k: ablated[k] for k in ("compiler", "device", "part", "mode", "shape")}, layout="merged")
        if base is None or merged is None:
            continue
        now_merged = ablated["gemm_kernels"] == merged["gemm_kernels"]
        if ablated["compiler"] == "xla":
            threshold = ablated["compiler_options"].get("xla_gpu_dot_merger_threshold_mb")
            converts = [k for k in ablated["kernel_table"] if not k["gemm"] and k.get("ops") == {"convert": 1}
                        and "projection" in kernel_stages(ablated, k)]
            text = (f"With `xla_gpu_dot_merger_threshold_mb={threshold}` XLA {'merges' if now_merged else 'still does not merge'} "
                    f"the separate projections at {_shape(ablated)} ({label(ablated['compiler'], ablated['device'])}, "
                    f"forward): {base['gemm_kernels']} GEMMs become {ablated['gemm_kernels']} (merged: {merged['gemm_kernels']}), "
                    + (f"{base['kernels']} kernels become {ablated['kernels']}" if base["kernels"] != ablated["kernels"]
                       else f"kernels stay at {base['kernels']}")
                    + f" (merged: {merged['kernels']}), {len(converts)} of which convert a weight to bf16 before the "
                    f"GEMM concatenates them; bytes moved go from "
                    f"{_mb(base['kernel_traffic_bytes'])} to {_mb(ablated['kernel_traffic_bytes'])} (merged: "
                    f"{_mb(merged['kernel_traffic_bytes'])}) and XLA's scratch from {_mb(base['temp_bytes'])} to "
                    f"{_mb(ablated['temp_bytes'])} (merged: {_mb(merged['temp_bytes'])}): the three outputs become slices of "
                    "one (T, 3D) buffer.")
        else:
            text = (f"Inductor's pre-grad pass `batch_linear_lhs`, which rewrites linears sharing an input into one `mm` "
                    f"on concatenated weights, is off by default (`pre_grad_fusion_options` is empty); turned on, the "
                    f"separate layout at {_shape(ablated)} forward keeps {ablated['gemm_kernels']} GEMMs and "
                    f"{ablated['kernels']} kernels (default: {base['gemm_kernels']} and {base['kernels']})"
                    + ("" if now_merged else ": the pass takes only 2-D inputs (torch/_inductor/fx_passes/"
                       "group_batch_fusion.py, is_linear_node_can_be_fused), and the path's input is (1, T, D)") + ".")
        made.append(Claim(f"ablation.{ablated['compiler']}_{ablated['variant']}", text, lambda a=ablated, m=merged, b=base: (
            (_gemms(a) == _gemms(m)) == (a["gemm_kernels"] == m["gemm_kernels"]) and _gemms(b) == b["gemm_kernels"]
            and _kernels(a) == a["kernels"])))
    return made


def method_claims(records: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[Claim]:
    made = [Claim("method.programs", "Programs (jaxgpt_tools/fusion/xla.py, fusion_inductor.py): the **QKV path** "
                  "(jaxgpt's and torch_ref's `CausalSelfAttention.project` on a normed bf16 input and a value embedding, "
                  "returning q, k, v as the attention kernel takes them) and, as context, one whole **block**, each "
                  "forward and forward+backward (gradients of the parameters and inputs for fixed random cotangents), with "
                  "the **merged** (3D, D) QKV weight or **separate** (D, D) weights; bf16 activations, fp32 weights cast "
                  "at use, one document. *Kernels*: launches per call (XLA: instructions that do work in the entry "
                  "computation and loop bodies, once per trip; Inductor: generated kernels, extern calls and aten "
                  "fallbacks in its output code, forward and backward graphs summed). *Bytes moved*: every kernel reads "
                  "its operands and writes its results once (a sliced operand as its slices). *Minimum*: the program's "
                  "arguments read once and results written once (XLA's memory_analysis of the same program).",
                  lambda: all(r["part"] in PART_NAMES and r["mode"] in MODE_NAMES and r["layout"] in ("merged", "separate")
                              for r in records))]
    for run in runs:
        env = run.get("environment") or {}
        versions = ", ".join(f"{k} {v}" for k, v in sorted(env.get("versions", {}).items()))
        if run.get("skipped"):
            made.append(Claim(f"method.run_{run['device']}", f"{run['device']}: not compiled ({run['skipped']}).",
                              lambda device=run["device"]: not any(r["device"] == device for r in records)))
            continue
        device = run["device"]
        text = f"{DEVICE_NAMES.get(device, device)} programs: `{run['command']}` at commit {env.get('commit', 'unknown')} with {versions}"
        mine = [r for r in records if r["device"] == device]
        times = [r["time"] for r in mine if r.get("time")]
        if run.get("timing") is None and device != "h100-compile-only":
            text += "; compiled and counted, not timed"
        elif device == "h100-compile-only":
            text += f"; {run.get('caveat', 'compiled without a GPU, no autotuning')} (jax's CUDA plugin, compile-only devices), so GEMM tiles are XLA's defaults and nothing is timed"
        elif times:
            loads = [x for t in times for x in t["load_1m"]]
            cores = env.get("cpu_count")
            text += (f"; timed on {run['threads']} core{'s' if run['threads'] != 1 else ''} of {cores} (the process pinned "
                     f"to core {', '.join(map(str, run.get('cores', [])))}: XLA's CPU thread pool and torch's intra-op threads "
                     f"both run there), median with quartiles of {min(t['repeats'] for t in times)}-{max(t['repeats'] for t in times)} "
                     f"timed calls per program after a warm-up; 1-minute load average {min(loads):.1f}-{max(loads):.1f} during "
                     "the timings" + (f" on {cores} cores: the machine was shared and busy, so these times are under load "
                                      "and only their comparisons within one run mean much" if cores and max(loads) > cores else ""))
        made.append(Claim(f"method.run_{device}", text + ".", lambda mine=mine: all(
            t["min_ms"] <= t["p25_ms"] <= t["median_ms"] <= t["p75_ms"] <= t["max_ms"] and t["repeats"] >= 1
            for t in (r["time"] for r in mine if r.get("time")))))
    return made


def block_claims(records: list[dict[str, Any]]) -> list[Claim]:
    made = []
    for compiler, device in sorted({(r["compiler"], r["device"]) for r in records if r["part"] == "block"},
                                   key=lambda c: (c[0] != "xla", c[1])):
        blocks = [r for r in records if (r["compiler"], r["device"], r["part"], r["mode"]) == (compiler, device, "block", "fwdbwd")]
        shape = max((r["shape"] for r in blocks), key=lambda s: s["seq_len"], default=None)
        if shape is None:
            continue
        merged = find(blocks, layout="merged", shape=shape)
        separate = find(blocks, layout="separate", shape=shape)
        if merged is None or separate is None:
            continue
        text = (f"{label(compiler, device)}, one block forward+backward at {_shape(merged)} (attention: "
                f"{merged.get('attention') or '-'}): {merged['kernels']} kernels merged, {separate['kernels']} separate; "
                f"separate moves {_pct(separate['kernel_traffic_bytes'], merged['kernel_traffic_bytes'])} bytes"
                + (f"; its median time is {_time_words(separate['time'], merged['time'])}" if merged.get("time") and separate.get("time") else "")
                + ".")
        made.append(Claim(f"block.{compiler}_{device}", text, lambda m=merged, s=separate: (
            m["gemm_kernels"] <= s["gemm_kernels"] and m["kernels"] > 0)))
    return made + gap_claims(records, "block")


def _top(record: dict[str, Any]) -> tuple[str, float]:
    """The profile's largest kernel (or op) and its share of the profiled time."""
    kernels = record["kernel_times"]["kernels"]
    total = sum(k["ms_per_call"] for k in kernels)
    return kernels[0]["name"], kernels[0]["ms_per_call"] / total if total else 0.0


def gap_claims(records: list[dict[str, Any]], part: str) -> list[Claim]:
    """How the two compilers' times compare on `part` forward+backward (merged) at the largest
    shape where both were profiled, with each profile's largest kernel: the explanation of a gap."""
    pairs: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in records:
        if (r["part"], r["mode"], r["layout"]) == (part, "fwdbwd", "merged") and r.get("kernel_times") and r.get("time") \
                and r.get("variant", "default") == "default":
            pairs.setdefault((r["device"], r["shape"]["name"]), {})[r["compiler"]] = r
    largest: dict[str, tuple[int, str, dict]] = {}  # per device, the largest shape with both compilers profiled
    for (device, shape), found in pairs.items():
        if set(found) == {"xla", "inductor"}:
            seq = found["xla"]["shape"]["seq_len"]
            if device not in largest or seq > largest[device][0]:
                largest[device] = (seq, shape, found)
    made = []
    for device, (_, shape, found) in sorted(largest.items()):
        xla, ind = found["xla"], found["inductor"]
        ratio = ind["time"]["median_ms"] / xla["time"]["median_ms"]
        (xla_top, xla_share), (ind_top, ind_share) = _top(xla), _top(ind)
        sdpa = "scaled_dot_product" in ind_top
        text = (f"On this {DEVICE_NAMES.get(device, device)} at {_shape(ind)}, Inductor's {PART_NAMES[part]} forward+backward "
                f"(merged) takes {ratio:.2g}x XLA's time ({_ms(ind['time']['median_ms'])} against "
                f"{_ms(xla['time']['median_ms'])} ms, on the same core): Inductor runs {ind['kernels']} launches and its "
                f"profile puts {ind_share:.0%} of its time in `{ind_top}`"
                + (" (torch_ref's attention on a CPU: SDPA with a dense (T, T) mask)" if sdpa else "")
                + (" (the compiled graph's own time: its generated C++ kernels, which the profiler does not split)"
                   if ind_top.startswith("## Call CompiledFxGraph") else "")
                + f", while XLA's time is spread over {xla['kernels']} kernels"
                + (f" ({xla['loop_kernels']} of them in the blocked attention's loop)" if xla.get("loop_kernels") else "")
                + f", the largest, `{xla_top}`, taking {xla_share:.0%}.")
        made.append(Claim(f"{'block' if part == 'block' else 'why'}.gap_{part}_{device}", text, lambda x=xla, i=ind: all(
            [k["ms_per_call"] for k in r["kernel_times"]["kernels"]] == sorted((k["ms_per_call"] for k in r["kernel_times"]["kernels"]),
                                                                              reverse=True) for r in (x, i))))
    return made


def claims(records: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[Claim]:
    """Every sentence the page states, in page order within each section."""
    return (answer_claims(records) + merge_claim(records) + method_claims(records, runs) + why_claims(records, runs)
            + gap_claims(records, "qkv")
            + ablation_claims(records) + block_claims(records))
