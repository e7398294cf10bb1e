"""Why each compiler fuses the QKV path as it does: docs/FUSION.md's reasons, per compiler and
target, forward and backward, and the dot-merger sweep's sentences (fusion_claims makes the
answer, the method and the ablations). Each is a fusion_claims.Claim: its numbers come from
the records' per-kernel tables (kernel kinds, fused ops, operand and result types, bytes) and
its check re-derives them another way (another field, another program, the pass's rule).
"""

from __future__ import annotations

import re
from typing import Any

from jaxgpt_tools.fusion.claims import Claim, _count, _mb, _shape
from jaxgpt_tools.fusion.records import (
    find,
    gemm_rows,
    gemms_per_call,
    kernel_stages,
    kernels_per_call,
    need,
    qkv_pair,
)
from jaxgpt_tools.fusion.xla import COMPILE_ONLY

GPU = COMPILE_ONLY


def elements(hlo_type: str) -> tuple[str, int]:
    """(dtype, elements) of an HLO array type 'f32[2048,768]'; ('', 0) for anything else."""
    found = re.fullmatch(r"(\w+)\[([\d,]*)\]", hlo_type.strip())
    if not found:
        return "", 0
    count = 1
    for dim in found.group(2).split(","):
        count *= int(dim) if dim else 1
    return found.group(1), count


def largest_qkv_shape(records: list[dict[str, Any]], compiler: str, device: str) -> str | None:
    shapes = [r["shape"] for r in records if (r["compiler"], r["device"], r["part"]) == (compiler, device, "qkv")]
    return max(shapes, key=lambda s: s["seq_len"])["name"] if shapes else None


def names(kernels: list[dict[str, Any]]) -> str:
    return ", ".join(f"`{k['name']}`" for k in kernels) or "none"


# ---------------------------------------------------------------------------------------------
# XLA for the H100

def _in_prologue(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [k for k in gemm_rows(record) if "convert" in k.get("prologue", [])]


def _weight_copies(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Second path: kernels whose result is a bf16 array of a weight's size (D*D or 3*D*D)."""
    dim = record["shape"]["model_dim"]
    return [k for k in record["kernel_table"] if elements(k.get("result", ""))[0] == "bf16"
            and elements(k["result"])[1] in (dim * dim, 3 * dim * dim)]


def xla_h100_prologue(records: list[dict[str, Any]]) -> list[Claim]:
    """The fp32 weights' cast in the Triton GEMMs' prologue forward; forward+backward, bf16 copies
    of the weights written once by kernels of their own, which the GEMMs without the cast read."""
    shape = largest_qkv_shape(records, "xla", GPU)
    pairs = {mode: qkv_pair(records, "xla", GPU, mode, shape) if shape else (None, None) for mode in ("fwd", "fwdbwd")}
    merged, separate = pairs["fwd"]
    if merged is None or separate is None:
        return []
    text = (f"XLA for the H100 fuses the fp32 weights' cast to bf16 into the Triton GEMMs' prologue (before the dot: "
            f"convert) in {len(_in_prologue(merged))} of {_count(len(gemm_rows(merged)), 'GEMM')} merged and "
            f"{len(_in_prologue(separate))} of {len(gemm_rows(separate))} separate at {_shape(separate)} forward, so "
            "the forward writes no bf16 copy of a weight")
    checks = [lambda m=merged, s=separate: (not _weight_copies(m) and not _weight_copies(s)
                                            and len(_in_prologue(m)) == len(gemm_rows(m))
                                            and len(_in_prologue(s)) == len(gemm_rows(s)))]
    both = pairs["fwdbwd"]
    if both[0] is not None and both[1] is not None:
        parts = []
        for layout, record in zip(("merged", "separate"), both, strict=True):
            copies = _weight_copies(record)
            types = ", ".join("`" + k["result"] + "`" for k in copies) or "none"
            parts.append(f"{layout} {len(_in_prologue(record))} of {len(gemm_rows(record))} GEMMs take the cast and "
                         f"{_count(len(copies), 'kernel')} write{'s' if len(copies) == 1 else ''} a bf16 copy ({types})")
        text += ("; forward+backward, where each weight feeds the forward GEMM and the input gradient's, "
                 + " and ".join(parts))

        def copies_cover_the_weights(record: dict[str, Any]) -> bool:
            """Either every GEMM takes the cast, or the copies hold each of q, k and v's weights once."""
            dim = record["shape"]["model_dim"]
            if len(_in_prologue(record)) == len(gemm_rows(record)):
                return not _weight_copies(record)
            return sum(elements(k["result"])[1] for k in _weight_copies(record)) == 3 * dim * dim

        checks.append(lambda m=both[0], s=both[1]: copies_cover_the_weights(m) and copies_cover_the_weights(s))
    return [Claim("why.xla_h100_prologue", text + ".", lambda: all(check() for check in checks))]


def xla_h100_value_scale(records: list[dict[str, Any]]) -> list[Claim]:
    """Separate: lambdas[0] * v in v's GEMM epilogue; merged: in a loop fusion."""
    shape = largest_qkv_shape(records, "xla", GPU)
    merged, separate = qkv_pair(records, "xla", GPU, "fwd", shape) if shape else (None, None)
    if merged is None or separate is None:
        return []

    def scaled(record):
        return [k for k in gemm_rows(record) if "multiply" in k.get("epilogue", [])
                and "split, value mix" in kernel_stages(record, k)]

    def mix_multiplies(record):
        """Multiplies of the non-GEMM kernel that adds the value embedding: 2 when it also scales v."""
        return [k["ops"].get("multiply", 0) for k in record["kernel_table"] if not k["gemm"] and "add" in k["ops"]
                and kernel_stages(record, k) == ["split, value mix"]]

    if not scaled(separate):
        return []
    text = (f"Separate weights let XLA for the H100 fuse the value scale lambdas[0] * v into v's GEMM epilogue "
            f"({names(scaled(separate))} at {_shape(separate)}); the merged GEMM "
            + ("takes no such epilogue, since the scale applies to a third of its output, so a loop fusion applies it."
               if not scaled(merged) else "takes it too."))
    return [Claim("why.xla_h100_value_scale", text, lambda s=separate, m=merged: (
        bool(scaled(s)) and not scaled(m) and mix_multiplies(m) == [2] and mix_multiplies(s) == [1]))]


def xla_h100_norm(records: list[dict[str, Any]]) -> list[Claim]:
    """Forward: the QK norm in Triton normalization fusions; backward: outside them."""
    shape = largest_qkv_shape(records, "xla", GPU)
    if shape is None:
        return []
    parts, checks = [], []
    for layout in ("merged", "separate"):
        fwd = find(records, compiler="xla", device=GPU, part="qkv", mode="fwd", layout=layout, shape=shape)
        bwd = find(records, compiler="xla", device=GPU, part="qkv", mode="fwdbwd", layout=layout, shape=shape)
        if fwd is None or bwd is None:
            continue
        norm = [k for k in fwd["kernel_table"] if "QK norm" in kernel_stages(fwd, k)]
        rotary = [k for k in fwd["kernel_table"] if "rotary" in kernel_stages(fwd, k) and k not in norm]
        in_bwd = [k for k in bwd["kernel_table"] if "QK norm" in kernel_stages(bwd, k)]
        triton = [k for k in in_bwd if k["kind"] == "triton"]
        others = sorted({k["kind"] for k in in_bwd if k["kind"] != "triton"})
        kinds = " / ".join(sorted({"`" + k["kind"] + "`" for k in norm}))
        parts.append(f"{layout}, {_count(len(norm), 'kernel')} of kind {kinds} "
                     f"compute the norm forward (writing {_mb(sum(k['written'] for k in norm))}) and {len(rotary)} more apply "
                     f"rotary; forward+backward, {len(in_bwd)} kernels touch the norm, {len(triton)} of kind `triton` and "
                     f"{len(in_bwd) - len(triton)} of kind " + " / ".join("`" + k + "`" for k in others))
        # second path: the norm's kernels are the ones that reduce or take an rsqrt
        checks.append(lambda r=fwd, n=norm, b=bwd, t=triton: [k for k in r["kernel_table"]
                                                             if {"reduce", "rsqrt"} & set(k.get("ops", {}))] == n
                      and len(t) == sum(k["kind"] == "triton" for k in b["kernel_table"]))
    if not parts:
        return []
    return [Claim("why.xla_h100_norm", f"On the H100 at {_shape(need(records, shape=shape))}, XLA keeps the QK norm out "
                  "of the GEMM: " + "; ".join(parts) + ". The forward's row reduction runs in XLA's block-level Triton "
                  "normalization fusion (kind `triton`); its backward does not: it runs in XLA's own reduction and loop "
                  "fusions (kInput, kLoop).", lambda checks=checks: all(c() for c in checks))]


def split_k(record: dict[str, Any]) -> list[tuple[dict[str, Any], int, dict[str, Any]]]:
    """(GEMM, split count k, the kernel that sums its partials) of every split-K GEMM: a GEMM
    whose f32 result is [k, a, b] and that a later kernel reads and reduces to [a, b]."""
    out = []
    rows = record["kernel_table"]
    for i, kernel in enumerate(rows):
        dims = [int(d) for d in re.findall(r"\d+", kernel.get("result", "").split("[", 1)[-1])]
        if not kernel["gemm"] or elements(kernel.get("result", ""))[0] != "f32" or len(dims) != 3:
            continue
        summed = next((k for k in rows[i + 1:] if kernel["result"] in k.get("operands", []) and "reduce" in k.get("ops", {})
                       and elements(k.get("result", ""))[1] == dims[1] * dims[2]), None)
        if summed is not None:
            out.append((kernel, dims[0], summed))
    return out


def xla_h100_split_k(records: list[dict[str, Any]]) -> list[Claim]:
    """The weight-gradient GEMMs split over K (T), their fp32 partials summed by a reduction."""
    shape = largest_qkv_shape(records, "xla", GPU)
    merged, separate = qkv_pair(records, "xla", GPU, "fwdbwd", shape) if shape else (None, None)
    if merged is None or separate is None or not split_k(merged):
        return []
    parts = []
    for record in (merged, separate):
        each = [f"`{g['name']}` into {k} partials ({_mb(g['written'])}), summed by `{s['name']}`" for g, k, s in split_k(record)]
        parts.append(f"{record['layout']}, {_count(len(each), 'GEMM')}: " + ", ".join(each))
    text = (f"On the H100 at {_shape(merged)}, the backward's weight-gradient GEMMs (contracting over T) are split-K: each "
            f"writes fp32 partial products over slices of T that a reduction kernel sums; " + "; ".join(parts)
            + ". Compiled without a GPU, the split is XLA's default choice, not an autotuned one.")

    def check(m=merged, s=separate):
        """Second path: each split GEMM writes k f32 (D, D)-sized partials (its bytes), a weight's size per split."""
        dim = m["shape"]["model_dim"]
        return all(g["written"] == 4 * k * elements(summed["result"])[1] and elements(summed["result"])[1] in (dim * dim, 3 * dim * dim)
                   for r in (m, s) for g, k, summed in split_k(r))
    return [Claim("why.xla_h100_split_k", text, check)]


# ---------------------------------------------------------------------------------------------
# XLA on this CPU

def _h_reads(record: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(GEMM, the type of h it reads): each GEMM's operand of T * D elements."""
    tokens = record["shape"]["seq_len"] * record["shape"]["model_dim"]
    return [(k, t) for k in gemm_rows(record) for t in k.get("operands", []) if elements(t)[1] == tokens]


def xla_cpu_fp32_gemms(records: list[dict[str, Any]]) -> list[Claim]:
    """XLA:CPU's GEMMs read an f32 copy of h, made by a kernel of its own."""
    shape = largest_qkv_shape(records, "xla", "cpu")
    merged, separate = qkv_pair(records, "xla", "cpu", "fwd", shape) if shape else (None, None)
    if merged is None or separate is None or not _h_reads(separate):
        return []

    def widened(record):
        """The kernels whose result is the type of h the GEMMs read, from a bf16 h."""
        types = {t for _, t in _h_reads(record)}
        tokens = record["shape"]["seq_len"] * record["shape"]["model_dim"]
        return [k for k in record["kernel_table"] if k.get("result") in types
                and any(elements(t) == ("bf16", tokens) for t in k.get("operands", []))]

    dtypes = sorted({elements(t)[0] for _, t in _h_reads(separate) + _h_reads(merged)})
    h32 = 4 * separate["shape"]["seq_len"] * separate["shape"]["model_dim"]
    out_m = [k for k in gemm_rows(merged) if elements(k.get("result", ""))[0] == "f32"]
    text = (f"XLA:CPU computes the projections in {'/'.join(dtypes)}: at {_shape(separate)} a kernel of its own widens "
            f"the bf16 h to f32 ({names(widened(separate))} separate, {names(widened(merged))} merged; "
            f"{_mb(h32 / 2)} read, {_mb(h32)} written) and every GEMM reads that copy, so each of separate's "
            f"{len(_h_reads(separate))} GEMMs reads {_mb(h32)} of h against merged's one read"
            + (f", and merged's GEMM writes its (T, 3D) result in f32 ({_mb(out_m[0]['written'])}), which a further "
               "kernel narrows to bf16 before the split" if out_m else "") + ".")
    return [Claim("why.xla_cpu_fp32", text, lambda m=merged, s=separate: (
        dtypes == ["f32"] and all(len(widened(r)) == 1 and widened(r)[0]["written"] == h32
                                  and widened(r)[0]["ops"] == {"convert": 1} for r in (m, s))
        and all(k["read"] >= h32 for k, _ in _h_reads(s))))]


def xla_cpu_ynn(records: list[dict[str, Any]]) -> list[Claim]:
    """XLA:CPU's YNNPACK fusions: which hold a GEMM and the QK norm's reduction."""
    shape = largest_qkv_shape(records, "xla", "cpu")
    merged, separate = qkv_pair(records, "xla", "cpu", "fwd", shape) if shape else (None, None)
    if merged is None or separate is None:
        return []

    def gemm_with_norm(record):
        return [k for k in record["kernel_table"] if "dot" in k.get("ops", {}) and "reduce" in k.get("ops", {})]

    def by_source(record):  # second path: by the jaxgpt functions the kernel was traced from
        return [k for k in record["kernel_table"] if k["kind"] == "ynn_fusion"
                and {"projection", "QK norm"} <= set(kernel_stages(record, k))]

    ynn = lambda record: sum(k["kind"] == "ynn_fusion" for k in record["kernel_table"])  # noqa: E731
    fused_s, fused_m = gemm_with_norm(separate), gemm_with_norm(merged)
    if fused_s and not fused_m:
        how = (f"with separate weights {len(fused_s)} of them fuse a projection GEMM with the QK norm's sum of squares "
               f"({names(fused_s)}: dot and reduce in one YNNPACK fusion); merged, none does: the merged result is "
               "narrowed and sliced first, and the norm's reductions run in YNNPACK fusions of their own")
    else:
        how = (f"{len(fused_s)} YNNPACK fusions hold a projection GEMM and the QK norm's sum of squares separate "
               f"({names(fused_s)}), {len(fused_m)} merged ({names(fused_m)})")
    text = (f"XLA:CPU hands its dots and reductions to YNNPACK (`__ynn_fusion` custom fusions): at {_shape(separate)}, "
            f"{how} ({ynn(merged)} YNNPACK fusions merged, {ynn(separate)} separate); separate launches "
            f"{separate['kernels']} kernels forward against merged's {merged['kernels']}.")
    return [Claim("why.xla_cpu_ynn", text, lambda m=merged, s=separate, fm=fused_m, fs=fused_s: (
        by_source(s) == fs and by_source(m) == fm
        and kernels_per_call(s) == s["kernels"] and kernels_per_call(m) == m["kernels"]))]


def backward_counts(records: list[dict[str, Any]], compiler: str, device: str) -> list[Claim]:
    """Forward+backward: GEMMs per layout (each weight's input and weight gradients) and kernels."""
    shape = largest_qkv_shape(records, compiler, device)
    merged, separate = qkv_pair(records, compiler, device, "fwdbwd", shape) if shape else (None, None)
    fwd_m, fwd_s = qkv_pair(records, compiler, device, "fwd", shape) if shape else (None, None)
    if merged is None or separate is None or fwd_m is None or fwd_s is None:
        return []
    from jaxgpt_tools.fusion.records import label

    text = (f"{label(compiler, device)}, forward+backward at {_shape(merged)}: {merged['gemm_kernels']} GEMMs merged and "
            f"{separate['gemm_kernels']} separate (the forward's {fwd_m['gemm_kernels']} and {fwd_s['gemm_kernels']}, then "
            f"per weight matrix one for the input's gradient and one for the weight's), in {merged['kernels']} and "
            f"{separate['kernels']} kernels.")
    return [Claim(f"why.backward_{compiler}_{device}", text, lambda m=merged, s=separate, a=fwd_m, b=fwd_s: (
        gemms_per_call(m) == 3 * gemms_per_call(a) and gemms_per_call(s) == 3 * gemms_per_call(b) and kernels_per_call(m) == m["kernels"]
        and kernels_per_call(s) == s["kernels"]))]


# ---------------------------------------------------------------------------------------------
# Inductor, on this CPU and in its H100 code

GEMM_WORDS = {"cpu": ("an extern `mm` call (oneDNN/BLAS)", "its C++ GEMM template, which could take a prologue or "
                      "epilogue, is tried only under `max_autotune`"),
              GPU: ("an extern cuBLAS `mm`", "its Triton GEMM templates, which take the weight's cast as a prologue and "
                    "pointwise epilogues, are chosen only by `max_autotune` benchmarking them on the GPU: left out, "
                    "compiled without a GPU")}


def weight_casts(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Generated kernels that cast a weight: they read an fp32 buffer of a weight's size (D*D,
    or 3*D*D merged) and write a bf16 buffer of as many elements (buffers and dtypes from the
    output code)."""
    dim = record["shape"]["model_dim"]
    sizes = (dim * dim, 3 * dim * dim)
    out = []
    for k in record["kernel_table"]:
        if k["kind"] in ("extern", "fallback"):
            continue
        weights = {n for n, dtype in k.get("reads", []) if dtype == "float32" and n in sizes}
        if weights & {n for n, dtype in k.get("writes", []) if dtype == "bfloat16"}:
            out.append(k)
    return out


def t_by_d(record: dict[str, Any], kernel: dict[str, Any]) -> list:
    """A kernel's bf16 outputs of T*D elements (q, k or v)."""
    tokens = record["shape"]["seq_len"] * record["shape"]["model_dim"]
    return [w for w in kernel.get("writes", []) if w == [tokens, "bfloat16"]]


def whole_reads(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Generated kernels that take a GEMM's whole (T, 3D) result as an argument (merged)."""
    size = 3 * record["shape"]["seq_len"] * record["shape"]["model_dim"]
    results = {n for g in gemm_rows(record) for n, _ in g.get("writes", []) if n == size}
    return [k for k in record["kernel_table"] if k["kind"] not in ("extern", "fallback")
            and any(n in results for n, _ in k.get("reads", []))]


def inductor_reasons(records: list[dict[str, Any]], device: str) -> list[Claim]:
    """Inductor's GEMMs (extern), its weight casts (fused horizontally or not) and the kernels
    that compute the path between the GEMMs and the attention inputs, forward."""
    shape = largest_qkv_shape(records, "inductor", device)
    merged, separate = qkv_pair(records, "inductor", device, "fwd", shape) if shape else (None, None)
    if merged is None or separate is None:
        return []
    from jaxgpt_tools.fusion.records import label

    extern, template = GEMM_WORDS.get(device, GEMM_WORDS[GPU])

    def staged(record):
        return [k for k in record["kernel_table"] if k["kind"] not in ("extern", "fallback") and kernel_stages(record, k)]

    casts = {r["layout"]: weight_casts(r) for r in (merged, separate)}
    shared = {layout: [k for k in found if kernel_stages(r, k)]
              for (layout, found), r in zip(casts.items(), (merged, separate), strict=True)}
    text = (f"{label('inductor', device)} leaves every GEMM to {extern} ({len(gemm_rows(merged))} merged, "
            f"{len(gemm_rows(separate))} separate, at {_shape(separate)} forward), so nothing is fused into a GEMM "
            f"({template}); it casts the fp32 weights to bf16 in {_count(len(casts['merged']), 'kernel')} merged "
            f"({names(casts['merged'])}) and {len(casts['separate'])} separate ({names(casts['separate'])}), "
            + (f"{len(shared['separate'])} of which also compute the path (a cast fused horizontally with the kernel "
               "beside it)" if shared["separate"] else "none of which computes anything else")
            + f"; the path between the GEMMs and the attention inputs (split, value mix, QK norm, rotary) takes "
            f"{_count(len(staged(merged)), 'generated kernel')} merged and {len(staged(separate))} separate.")

    whole = whole_reads(merged)
    if len(whole) > 1:
        size = 2 * 3 * merged["shape"]["seq_len"] * merged["shape"]["model_dim"]
        text += (f" Merged's {len(whole)} kernels after its GEMM each take the whole (T, 3D) result as an argument "
                 f"({names(whole)}), which the byte model reads whole, {_mb(size)} each, though between them they produce q, k "
                 f"and v once (bf16 (T, D) outputs: {', '.join(str(len(t_by_d(merged, k))) for k in whole)}): read by the "
                 f"parts they use, merged would move up to {_mb((len(whole) - 1) * size)} less.")

    def check(m=merged, s=separate):
        """Second path: the cast kernels read the layout's weights whole (3 D^2 fp32 elements in
        all), the GEMMs are the extern calls, and every cast kernel is named after _to_copy;
        the kernels reading merged's whole result produce q, k and v once between them."""
        if len(whole_reads(m)) > 1 and sum(len(t_by_d(m, k)) for k in whole_reads(m)) != 3:
            return False
        dim = m["shape"]["model_dim"]
        for record in (m, s):
            read = sum(n for k in weight_casts(record) for n, dtype in k["reads"] if dtype == "float32" and n in (dim * dim, 3 * dim * dim))
            if read != 3 * dim * dim or any("to_copy" not in k["name"] for k in weight_casts(record)):
                return False
        return all(k["kind"] in ("extern", "fallback") for r in (m, s) for k in gemm_rows(r))
    return [Claim(f"why.inductor_{device}", text, check)]


def inductor_backward(records: list[dict[str, Any]], device: str) -> list[Claim]:
    """Forward+backward: the kernels of the backward graph that compute the path's backward."""
    shape = largest_qkv_shape(records, "inductor", device)
    merged, separate = qkv_pair(records, "inductor", device, "fwdbwd", shape) if shape else (None, None)
    if merged is None or separate is None:
        return []
    from jaxgpt_tools.fusion.records import inductor_ops, label

    def backward(record, staged: bool):
        return [k for k in record["kernel_table"] if k.get("graph") == "backward" and k["kind"] not in ("extern", "fallback")
                and ("backward" in k["name"] or "sum" in inductor_ops(k["name"])) == staged]

    text = (f"{label('inductor', device)}, forward+backward at {_shape(merged)}: the backward graph computes the path's "
            f"gradients (rotary, QK norm, value mix) in {_count(len(backward(merged, True)), 'generated kernel')} merged "
            f"({names(backward(merged, True))}) and {len(backward(separate, True))} separate, around "
            f"{sum(k['gemm'] and k.get('graph') == 'backward' for k in merged['kernel_table'])} and "
            f"{sum(k['gemm'] and k.get('graph') == 'backward' for k in separate['kernel_table'])} extern GEMMs (input and "
            f"weight gradients), and casts the bf16 weight gradients to fp32 in "
            f"{len([k for k in backward(merged, False) if 'to_copy' in k['name']])} and "
            f"{len([k for k in backward(separate, False) if 'to_copy' in k['name']])} kernels.")

    def check(m=merged, s=separate):
        """Second path: backward GEMMs plus the forward's equal the record's GEMMs."""
        return all(sum(k["gemm"] for k in r["kernel_table"] if k.get("graph") == "backward")
                   + sum(k["gemm"] for k in r["kernel_table"] if k.get("graph") == "forward") == r["gemm_kernels"]
                   for r in (m, s))
    return [Claim(f"why.inductor_backward_{device}", text, check)]


# ---------------------------------------------------------------------------------------------
# XLA's dot-merger sweep (fusion_sweep's records)

def sweep_claims(sweep: list[dict[str, Any]]) -> list[Claim]:
    """Where XLA for the H100 stops merging the separate projections, from the pass's rule."""
    from jaxgpt_tools.fusion import sweep as fusion_sweep

    fwd = [r for r in sweep if r["mode"] == "fwd" and r["layout"] == "separate"]
    if not any(r["threshold_mb"] == 0 for r in fwd) or not any(r["threshold_mb"] is None for r in fwd):
        return []
    fit = fusion_sweep.dot_bytes_fit(sweep)
    default, guess = fusion_sweep.switch_point(sweep, None), fusion_sweep.default_threshold(sweep)
    numeric = sorted({r["threshold_mb"] for r in fwd if r["threshold_mb"]})
    points = {mb: fusion_sweep.switch_point(sweep, mb) for mb in numeric}
    dim = fwd[0]["D"]
    where = "; ".join(
        f"{mb} MiB: " + ("every T swept merges" if p["first_unmerged"] is None else
                         f"the rule's switch is T {p['crossing_T']:,.0f}, the sweep merges at {p['last_merged']:,} and not at "
                         f"{p['first_unmerged']:,}") for mb, p in points.items())
    text = (f"XLA's dot merger (xla/hlo/transforms/simplifiers/dot_merger.cc) merges dots that share an operand when at "
            f"least one is a candidate, i.e. its result and operands take at most `xla_gpu_dot_merger_threshold_mb` MiB; "
            f"each separate projection (h (T, {dim}) times a ({dim}, {dim}) weight, bf16 result) weighs "
            f"{fit['bytes_per_token']:,.0f} T + {fit['fixed_bytes']:,.0f} bytes. Under 0 MiB nothing merges; {where}. "
            f"The default merges up to T {default['last_merged']:,} and not from {default['first_unmerged']:,}, the switch "
            + (f"of a {guess[0]} MiB threshold (the only whole MiB that puts it there)" if len(guess) == 1 else
               f"of a threshold of {', '.join(map(str, guess))} MiB")
            + f", so at the record's T {max(r['T'] for r in fwd):,} separate stays at three GEMMs.")

    def check(sweep=sweep, fit=fit):
        """The rule predicts every swept separate forward's GEMMs; the fit holds for every plain dot."""
        return fit["on_line"] and all(
            r["gemm_kernels"] == (3 if r["threshold_mb"] == 0 else fusion_sweep.predicted_gemms(fit, r["T"], r["threshold_mb"]))
            for r in sweep if r["mode"] == "fwd" and r["layout"] == "separate" and r["threshold_mb"] is not None) \
            and all(r["gemm_kernels"] == fusion_sweep.predicted_gemms(fit, r["T"], guess[0]) for r in sweep
                    if r["mode"] == "fwd" and r["layout"] == "separate" and r["threshold_mb"] is None and len(guess) == 1)
    return [Claim("sweep.rule", text, check)]


def wgrad_bytes(dots: list[dict[str, Any]], seq_len: int, dim: int) -> list[float]:
    """The dot-merger weight of each weight-gradient dot of a forward+backward program: two bf16
    operands of T*D elements (the output gradient and h) and a (D, D) bf16 result, as XLA leaves
    it where it does not split the dot over T (after the pass, at larger T, it writes f32
    partials per split instead)."""
    out: list[float] = []
    for d in dots:
        _, count = elements(d["result"])
        operand_counts = [elements(t)[1] for t in d["operands"]]
        if count % (dim * dim) == 0 and operand_counts == [seq_len * dim] * 2:
            out.append(2 * dim * dim + sum(2 * n for n in operand_counts))
    return out


def sweep_backward(sweep: list[dict[str, Any]]) -> list[Claim]:
    """Forward+backward under the default threshold: which GEMMs merge up to which T."""
    from jaxgpt_tools.fusion import sweep as fusion_sweep

    bwd = sorted((r for r in sweep if r["mode"] == "fwdbwd" and r["layout"] == "separate" and r["threshold_mb"] is None),
                 key=lambda r: r["T"])
    unmerged = {r["T"]: r for r in sweep if r["mode"] == "fwdbwd" and r["layout"] == "separate" and r["threshold_mb"] == 0}
    guess = fusion_sweep.default_threshold(sweep) if any(r["threshold_mb"] == 0 and r["mode"] == "fwd" for r in sweep) else []
    if not bwd or not unmerged or len(guess) != 1:
        return []
    fewer = [r["T"] for r in bwd if r["gemm_kernels"] < unmerged[r["T"]]["gemm_kernels"]]
    same = [r["T"] for r in bwd if r["gemm_kernels"] == unmerged[r["T"]]["gemm_kernels"]]
    dim = bwd[0]["D"]
    weights = {t: wgrad_bytes(r["dots"], t, dim) for t, r in unmerged.items()}
    last, first = max(fewer, default=0), min(same, default=0)
    text = (f"Forward+backward, the default takes separate from {unmerged[bwd[0]['T']]['gemm_kernels']} GEMMs to "
            f"{min(r['gemm_kernels'] for r in bwd)} up to T {last:,} and leaves all {unmerged[first]['gemm_kernels'] if first else 0} "
            f"from T {first:,}: the three weight-gradient dots share h too and merge into one by the same rule, each "
            f"weighing its two bf16 (T, D) operands and its bf16 (D, D) result, "
            + (f"{_mb(weights[last][0])} at T {last:,} and {_mb(weights[first][0])} at T {first:,}"
               if weights.get(last) and weights.get(first) else "")
            + f" (the threshold: {guess[0]} MiB); the three input-gradient dots share no operand and stay apart.")

    def check(bwd=bwd, weights=weights, mb=guess[0]):
        """The rule on the weight-gradient dots' own bytes predicts which T merged."""
        return all(len(weights[r["T"]]) == 3 and (r["T"] in fewer) == (weights[r["T"]][0] <= mb * 2**20) for r in bwd)
    return [Claim("sweep.backward", text, check)]


def reasons(records: list[dict[str, Any]]) -> list[Claim]:
    """Every reason sentence, per compiler and target, in page order."""
    return (xla_h100_prologue(records) + xla_h100_value_scale(records) + xla_h100_norm(records)
            + xla_h100_split_k(records) + backward_counts(records, "xla", GPU)
            + xla_cpu_fp32_gemms(records) + xla_cpu_ynn(records) + backward_counts(records, "xla", "cpu")
            + inductor_reasons(records, "cpu") + inductor_backward(records, "cpu")
            + inductor_reasons(records, GPU) + inductor_backward(records, GPU))
