"""XLA's dot-merger decision on the compile-only H100, swept over T (the fusion study's answer to
"where does merging the QKV projections stop paying, for the compiler?").

XLA's DotMerger pass (xla/hlo/transforms/simplifiers/dot_merger.cc) merges dots that share an
operand (the three projections share h) when at least one of them is a *merge candidate*: its
result and operands together take at most `max_size_to_merge` bytes, which the GPU compiler sets
to `xla_gpu_dot_merger_threshold_mb` MiB (32 in XLA's DefaultDebugOptionsIgnoringFlags as published; this
jaxlib's CUDA plugin decides as with 64: its 64 MiB column, and `debug_options` reads what XLA's dump
says). The sweep compiles the QKV path at D 768
for every T in SEQ_LENS, separate weights under each threshold in THRESHOLDS_MB (None: the
default) and merged weights under the default, forward and forward+backward, and records for
each program its GEMMs, kernels and bytes and every dot's size as the pass measures it
(`dot_sizes`: the dot's result and operand types in the optimized HLO). Compiled without a GPU,
no autotuning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.common.hlo import parse_module, shape_bytes
from jaxgpt_tools.fusion import byte_model

# Powers of two from 256 to the record's 65,536, and the multiples of 128 either side of where the
# rule puts the switch for 32 and 64 MiB (10,538 and 21,461 at D 768).
SEQ_LENS = (256, 512, 1024, 2048, 4096, 8192, 10496, 10624, 16384, 21376, 21504, 32768, 65536)
THRESHOLDS_MB = (0, 32, 64, None, 256)  # None: XLA's default; 64: where the default's switch lies
BACKWARD_THRESHOLDS_MB = (0, None, 256)  # forward+backward: at the powers of two only
DOT_MERGER_FLAG = "xla_gpu_dot_merger_threshold_mb"
MODEL_DIM, NUM_HEADS = 768, 6  # the record's width


def dot_sizes(hlo: str) -> list[dict[str, Any]]:
    """Every dot of an optimized HLO module (fused or not): its result and operand types and the
    bytes the dot merger weighs (result + operands, ShapeUtil::ByteSizeOfElements)."""
    module = parse_module(hlo)
    shapes = module.shapes()
    out = []
    for inst in module.instructions():
        if inst.opcode != "dot":
            continue
        operands = [shapes.get(name, "") for name in inst.operands]
        out.append({"dot": inst.name, "result": inst.shape.split("{")[0],
                    "operands": [shape.split("{")[0] for shape in operands],
                    "bytes": shape_bytes(inst.shape) + sum(shape_bytes(shape) for shape in operands)})
    return out


def variant_name(threshold_mb: int | None) -> str:
    return "default" if threshold_mb is None else f"dot_merger_{threshold_mb}"


def sweep_record(record: dict[str, Any], hlo: str, threshold_mb: int | None) -> dict[str, Any]:
    """The numbers the sweep keeps of one compiled program; its bytes under the study's one byte
    model (fusion/byte_model.py), XLA's own count beside them."""
    modeled = byte_model.apply_to_record(record)
    shape = record["shape"]
    return {"T": shape["seq_len"], "D": shape["model_dim"], "head_dim": shape["model_dim"] // shape["num_heads"],
            "mode": record["mode"], "layout": record["layout"], "threshold_mb": threshold_mb,
            "gemm_kernels": record["gemm_kernels"], "kernels": record["kernels"],
            "kernel_traffic_bytes": modeled["kernel_traffic_bytes"], "byte_model": byte_model.MODEL,
            "own_kernel_traffic_bytes": record["kernel_traffic_bytes"],
            "temp_bytes": record.get("temp_bytes"), "compile_s": record["compile_s"], "dots": dot_sizes(hlo)}


def _compile_record(mode: str, layout: str, shape, threshold_mb: int | None, out_dir: Path) -> dict[str, Any]:
    """One sweep program compiled for the compile-only H100 under `threshold_mb` (None: XLA's default)."""
    from jaxgpt_tools.fusion.xla import compile_program

    options = {} if threshold_mb is None else {DOT_MERGER_FLAG: threshold_mb}
    compiled = compile_program("qkv", mode, layout, shape, device="h100", out_dir=out_dir, compiler_options=options,
                               variant=variant_name(threshold_mb))
    hlo = Path(compiled.record["hlo"])
    hlo = hlo if hlo.is_absolute() else REPO_ROOT / hlo
    return sweep_record(compiled.record, hlo.read_text(), threshold_mb)


def sweep(seq_lens: list[int], *, out_dir: Path, modes=("fwd", "fwdbwd"), log=print) -> list[dict[str, Any]]:
    """Compile every sweep program for the compile-only H100 (jax with its CUDA plugin, in the
    compile-only environment); their HLO texts go to out_dir."""
    from jaxgpt_tools.fusion.xla import Shape

    records = []
    for seq_len in seq_lens:
        shape = Shape(f"sweep_t{seq_len}", MODEL_DIM, NUM_HEADS, seq_len)
        for mode in modes:
            if mode == "fwdbwd" and seq_len & (seq_len - 1):
                continue
            thresholds = THRESHOLDS_MB if mode == "fwd" else BACKWARD_THRESHOLDS_MB
            jobs = [("separate", threshold) for threshold in thresholds] + [("merged", None)]
            for layout, threshold in jobs:
                records.append(_compile_record(mode, layout, shape, threshold, out_dir))
                log(f"sweep T {seq_len} {mode} {layout} threshold {threshold}: {records[-1]['gemm_kernels']} GEMMs")
    return records


def dot_bytes_fit(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The bytes the dot merger weighs for one separate projection, fixed + per_token * T, fitted
    through the unmerged (threshold 0) forwards' dots at the two largest T; `on_line`: whether
    every unmerged forward whose dots are plain 2-D GEMMs (not split-K rewritten after the pass,
    as XLA does at small T) has three dots of exactly those bytes."""
    unmerged = {r["T"]: r["dots"] for r in records if r["mode"] == "fwd" and r["layout"] == "separate"
                and r["threshold_mb"] == 0 and r["dots"]}
    if len(unmerged) < 2:
        raise ValueError("the dot-merger fit needs unmerged forwards (threshold 0) at two T at least")
    (t0, d0), (t1, d1) = sorted(unmerged.items())[-2:]
    per_token = (d1[0]["bytes"] - d0[0]["bytes"]) / (t1 - t0)
    fixed = d0[0]["bytes"] - per_token * t0
    plain = {t: dots for t, dots in unmerged.items() if all(d["result"].count(",") == 1 for d in dots)}
    on_line = all(len(dots) == 3 and all(d["bytes"] == fixed + per_token * t for d in dots) for t, dots in plain.items())
    return {"fixed_bytes": fixed, "bytes_per_token": per_token, "on_line": on_line, "plain_T": sorted(plain)}


def predicted_gemms(fit: dict[str, Any], seq_len: int, threshold_mb: int) -> int:
    """GEMMs of the separate forward after the dot merger, by its rule: the three projections
    (dots sharing h) become one when one of them is a candidate, i.e. takes at most
    threshold_mb MiB (all three take fixed + per_token * T bytes)."""
    return 1 if fit["fixed_bytes"] + fit["bytes_per_token"] * seq_len <= threshold_mb * 2**20 else 3


def switch_point(records: list[dict[str, Any]], threshold_mb: int | None) -> dict[str, Any]:
    """Where the separate forward stops being merged under `threshold_mb` (None: the default):
    the largest swept T with one GEMM, the smallest with three, and for a numeric threshold the
    T at which a projection dot's bytes (dot_bytes_fit) reach it."""
    fwd = [r for r in records if r["mode"] == "fwd" and r["layout"] == "separate" and r["threshold_mb"] == threshold_mb]
    fit = dot_bytes_fit(records)
    return {"last_merged": max((r["T"] for r in fwd if r["gemm_kernels"] == 1), default=None),
            "first_unmerged": min((r["T"] for r in fwd if r["gemm_kernels"] == 3), default=None),
            "crossing_T": None if threshold_mb is None else
            (threshold_mb * 2**20 - fit["fixed_bytes"]) / fit["bytes_per_token"]}


def default_threshold(records: list[dict[str, Any]]) -> list[int]:
    """The whole-MiB thresholds that put the default's switch where the sweep found it: those
    under which the last T the default merged is a candidate and the first it did not merge is
    not."""
    point, fit = switch_point(records, None), dot_bytes_fit(records)
    if point["last_merged"] is None or point["first_unmerged"] is None:
        return []
    low = fit["fixed_bytes"] + fit["bytes_per_token"] * point["last_merged"]
    high = fit["fixed_bytes"] + fit["bytes_per_token"] * point["first_unmerged"]
    return [mb for mb in range(1, 4097) if low <= mb * 2**20 < high]


# ---------------------------------------------------------------------------------------------
# Across widths and head dims: the same decision where D and the heads change (compile-only H100,
# XLA's default threshold, merged beside separate).

WIDTHS = (768, 1024, 1536, 2048)
HEAD_DIMS = (64, 128)
# Forward at three T (under, near and over the switch at the widths swept); forward+backward at the record's T.
WIDTH_SEQ_LENS = (4096, 16384, 65536)
WIDTH_BACKWARD_SEQ_LENS = (65536,)


def width_sweep(*, out_dir: Path, log=print, widths=WIDTHS, head_dims=HEAD_DIMS, seq_lens=WIDTH_SEQ_LENS,
                backward_seq_lens=WIDTH_BACKWARD_SEQ_LENS) -> list[dict[str, Any]]:
    """Every (D, head dim, T, mode, layout) of the width sweep compiled for the compile-only H100
    under XLA's default threshold: sweep_record's numbers (`head_dim` among them)."""
    from jaxgpt_tools.fusion.xla import Shape

    records = []
    for model_dim in widths:
        for head_dim in head_dims:
            for seq_len in sorted(set(seq_lens) | set(backward_seq_lens)):
                shape = Shape(f"width_d{model_dim}_h{head_dim}_t{seq_len}", model_dim, model_dim // head_dim, seq_len)
                modes = [m for m, lens in (("fwd", seq_lens), ("fwdbwd", backward_seq_lens)) if seq_len in lens]
                for mode in modes:
                    for layout in ("merged", "separate"):
                        records.append(_compile_record(mode, layout, shape, None, out_dir))
                    log(f"sweep D {model_dim} head dim {head_dim} T {seq_len} {mode}: separate "
                        f"{records[-1]['gemm_kernels']} GEMMs")
    return records


def projection_bytes(model_dim: int, seq_len: int) -> int:
    """Bytes the dot merger weighs for one separate projection of the QKV path: h (T, D), the
    weight (D, D) and the result (T, D), all bf16 (what dot_bytes_fit measures at D 768:
    3,072 T + 1,179,648 = 4 T D + 2 D^2)."""
    return 4 * seq_len * model_dim + 2 * model_dim * model_dim


def width_decisions(records: list[dict[str, Any]], threshold_mb: int) -> list[dict[str, Any]]:
    """Per (D, head dim, T) of the width sweep's separate forwards: the GEMMs XLA left, the GEMMs
    the rule predicts under `threshold_mb` (1 when a projection's bytes are at most it), and the
    byte change of separate against merged, forward (and forward+backward where compiled)."""
    by_key = {(r["D"], r["head_dim"], r["T"], r["mode"], r["layout"]): r for r in records}
    out = []
    for (dim, head_dim, seq_len, mode, layout), separate in sorted(by_key.items()):
        if mode != "fwd" or layout != "separate":
            continue
        row = {"D": dim, "head_dim": head_dim, "T": seq_len, "gemms": separate["gemm_kernels"],
               "predicted": 1 if projection_bytes(dim, seq_len) <= threshold_mb * 2**20 else 3}
        for name in ("fwd", "fwdbwd"):
            pair = by_key.get((dim, head_dim, seq_len, name, "merged")), by_key.get((dim, head_dim, seq_len, name, "separate"))
            if pair[0] and pair[1]:
                row[f"{name}_bytes_change"] = pair[1]["kernel_traffic_bytes"] / pair[0]["kernel_traffic_bytes"] - 1
        out.append(row)
    return out


def switch_seq_len(model_dim: int, threshold_mb: int) -> float:
    """The T at which a separate projection's bytes reach `threshold_mb` MiB at width D."""
    return (threshold_mb * 2**20 - 2 * model_dim * model_dim) / (4 * model_dim)


def threshold_line(text: str) -> int | None:
    """xla_gpu_dot_merger_threshold_mb of a DebugOptions text dump (XLA's `<module>.debug_options`
    file under --xla_dump_to), None when the dump does not set it (its proto default applies)."""
    import re

    found = re.search(rf"^{DOT_MERGER_FLAG}:\s*(\d+)\s*$", text, re.MULTILINE)
    return int(found.group(1)) if found else None


def debug_options(out_dir: Path, log=print) -> dict[str, Any]:
    """XLA's DebugOptions as the GPU compiler got them for one QKV program (compile-only H100,
    default options), read from its dump (XLA_FLAGS --xla_dump_to, set before jax is imported by
    fusion.child): {"text": the dump, "threshold_mb": the dot merger's, or None where unset}."""
    from jaxgpt_tools.fusion.xla import SHAPES, compile_program

    compile_program("qkv", "fwd", "separate", SHAPES["small"], device="h100", out_dir=out_dir)
    # Building the module's parameters compiles small helper programs too; the QKV path's is jit_forward_qkv.
    dumps = sorted((out_dir / "dump").glob("*forward_qkv.debug_options"))
    if not dumps:
        raise RuntimeError(f"XLA wrote no .debug_options file of the QKV program under {out_dir / 'dump'}")
    text = dumps[-1].read_text()
    log(f"sweep debug options: {len(text.splitlines())} lines, {DOT_MERGER_FLAG} {threshold_line(text)}")
    return {"text": text, "threshold_mb": threshold_line(text), "file": dumps[-1].name}
