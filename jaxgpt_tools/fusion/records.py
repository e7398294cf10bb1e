"""The fusion study's records (results.json) read: the names of its compilers, devices, modes
and parts, one flat row per program (`rows`), a program looked up by its fields (`find`, `need`),
and each program's kernels: the QKV-path stages a kernel computes and what it fuses, its counts
and bytes recounted from the per-kernel table. The sentences made from them are `claims`.
"""

from __future__ import annotations

import re
from typing import Any

COMPILER_NAMES = {"xla": "XLA", "inductor": "Inductor"}
DEVICE_NAMES = {"cpu": "CPU", "h100-compile-only": "H100 (compiled without a GPU, no autotuning)", "h100": "H100"}
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


def need(table: list[dict[str, Any]], **keys) -> dict[str, Any]:
    """`find`'s row, which the caller knows is there: ValueError naming the keys when it is not."""
    row = find(table, **keys)
    if row is None:
        raise ValueError(f"no program with {keys} in the study's results")
    return row


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


# Inductor names a generated kernel after the aten ops it fused: the ops that mark a stage.
# torch's fused RMSNorm kernel (`_fused_rms_norm`, its backward too) names no rsqrt or mean: its own
# name marks the QK norm. `cat` is rotary's only beside its arithmetic (ROTARY_ARITHMETIC): the
# separate layout's weight cast concatenates the three bf16 weights in a kernel of `to_copy, cat`.
INDUCTOR_STAGE_OPS = {"mm": "projection", "addmm": "projection", "rsqrt": "QK norm", "mean": "QK norm",
                      "rms_norm": "QK norm", "sub": "rotary", "cat": "rotary", "select": "split, value mix",
                      "split": "split, value mix"}
ROTARY_ARITHMETIC = {"mul", "sub", "neg"}
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
        ops = inductor_ops(kernel["name"])
        found = {INDUCTOR_STAGE_OPS[op] for op in ops
                 if op in INDUCTOR_STAGE_OPS and (op != "cat" or ROTARY_ARITHMETIC & set(ops))}
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


# A program's counts and bytes recounted from its per-kernel table (the claims' checks' path).


def kernels_per_call(record: dict[str, Any]) -> int:
    """Kernels per call recounted from the per-kernel table (the check's path)."""
    return sum(k.get("runs", 1) for k in record["kernel_table"])


def gemms_per_call(record: dict[str, Any]) -> int:
    """GEMM kernels per call, from the per-kernel table."""
    return sum(k.get("runs", 1) for k in record["kernel_table"] if k["gemm"])


def gemm_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-kernel table's GEMM rows."""
    return [k for k in record["kernel_table"] if k["gemm"]]


def bytes_moved(record: dict[str, Any]) -> float:
    """Bytes read and written per call by all its kernels, from the per-kernel table."""
    return sum((k["read"] + k["written"]) * k.get("runs", 1) for k in record["kernel_table"])


def qkv_pair(records, compiler: str, device: str, mode: str, shape: str, variant: str = "default"):
    """(merged, separate) QKV records of one compiler, device, mode and shape name."""
    return tuple(find(records, compiler=compiler, device=device, part="qkv", mode=mode, layout=layout, shape=shape,
                      variant=variant) for layout in ("merged", "separate"))


def run_compilers(run: dict[str, Any]) -> list[str]:
    """The compilers whose programs a run made (a compile-only leg's one; a local run's list)."""
    return [run["compiler"]] if run.get("compiler") else list(run.get("compilers", ["xla", "inductor"]))
