"""A roofline of the QKV path: each kernel's FLOPs, bytes and arithmetic intensity from the fusion
study's records (results.json's per-kernel tables), and the least time an H100 could take for it.

An estimate, never a timing: a kernel's bound is max(FLOPs / peak FLOP/s, bytes / peak bytes/s),
the time it could not beat on an H100 running at its datasheet peaks; a program's bound is the sum
of its kernels' (they run one after another; launch gaps, caches and overlap left out). The bytes
are the study's one byte model (fusion/byte_model.py: every distinct buffer a kernel takes or
produces, whole and once, the same for both compilers). Pure functions over the records; the page's
sentences and tables are fusion/roofline_claims.py.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from itertools import combinations, product
from typing import Any

from jaxgpt_tools.fusion.records import inductor_ops, kernel_stages


@dataclass(frozen=True)
class Peaks:
    """A GPU's peak rates: FLOP/s of its matrix units (dense, no sparsity) for GEMMs, of its
    vector units for everything else, and bytes/s of its memory; `source` names where they are from."""
    name: str
    matrix_flop_s: float
    vector_flop_s: float
    memory_byte_s: float
    source: str

    @property
    def ridge(self) -> float:
        """FLOP/byte above which a GEMM is compute-bound."""
        return self.matrix_flop_s / self.memory_byte_s

    @property
    def vector_ridge(self) -> float:
        """FLOP/byte above which a non-GEMM kernel would be compute-bound."""
        return self.vector_flop_s / self.memory_byte_s


# NVIDIA's H100 Tensor Core GPU datasheet, H100 SXM column: BF16 Tensor Core 1,979 TFLOPS is
# quoted with 2:4 sparsity (the datasheet's footnote), so dense is half, 989; FP32 (CUDA cores)
# 67 TFLOPS; GPU memory bandwidth 3.35 TB/s (HBM3).
H100 = Peaks("H100 SXM", matrix_flop_s=989e12, vector_flop_s=67e12, memory_byte_s=3.35e12,
             source="NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 Tensor Core 989 TFLOPS dense (1,979 with "
                    "sparsity), FP32 67 TFLOPS, GPU memory bandwidth 3.35 TB/s")

GROUPS = ("GEMMs", "norm, rotary, value mix", "other")
PATH_STAGES = {"split, value mix", "QK norm", "rotary"}
VALUE_MIX_FUNCTION = "mix_value_embedding"

# Arithmetic per element of a non-GEMM kernel's largest array (an estimate: see nongemm_flops).
# XLA: the opcodes its fusion holds (convert and data movement are not arithmetic).
XLA_ARITHMETIC = frozenset({"add", "subtract", "multiply", "divide", "negate", "rsqrt", "sqrt", "exponential", "log",
                            "tanh", "power", "maximum", "minimum", "abs", "reduce", "reduce-window", "logistic"})
# Inductor: the aten ops its kernel's name lists; a fused RMSNorm squares, sums, takes rsqrt and scales.
INDUCTOR_ARITHMETIC = {"add": 1, "sub": 1, "mul": 1, "div": 1, "neg": 1, "rsqrt": 1, "sqrt": 1, "exp": 1, "pow": 1,
                       "mean": 1, "sum": 1, "sigmoid": 1, "rms_norm": 4}


@dataclass(frozen=True)
class KernelBound:
    """One kernel of a program on the roofline, per call of the program (its runs included):
    FLOPs, bytes read + written, and the seconds its FLOPs and its bytes take at the peaks."""
    name: str
    group: str
    gemm: bool
    flops: float
    bytes: float
    compute_s: float
    memory_s: float

    @property
    def intensity(self) -> float:
        """FLOP per byte moved."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def bound_s(self) -> float:
        """Seconds it cannot beat at the peaks: the larger of its FLOP and its byte time."""
        return max(self.compute_s, self.memory_s)

    @property
    def limit(self) -> str:
        return "compute" if self.compute_s > self.memory_s else "memory"


@dataclass(frozen=True)
class ProgramBound:
    """A program's kernels on the roofline and their sums (seconds: the kernels one after another)."""
    compiler: str
    device: str
    mode: str
    layout: str
    seq_len: int
    model_dim: int
    kernels: tuple[KernelBound, ...]

    @property
    def flops(self) -> float:
        return sum(k.flops for k in self.kernels)

    @property
    def gemm_flops(self) -> float:
        return sum(k.flops for k in self.kernels if k.gemm)

    @property
    def bytes(self) -> float:
        return sum(k.bytes for k in self.kernels)

    @property
    def bound_s(self) -> float:
        return sum(k.bound_s for k in self.kernels)

    def group_bound_s(self, group: str) -> float:
        return sum(k.bound_s for k in self.kernels if k.group == group)

    def group_bytes(self, group: str) -> float:
        return sum(k.bytes for k in self.kernels if k.group == group)

    @property
    def gemm_intensity(self) -> float:
        """The GEMMs' FLOPs per byte they move, together."""
        moved = self.group_bytes("GEMMs")
        return self.gemm_flops / moved if moved else 0.0


# ---------------------------------------------------------------------------------------------
# FLOPs of one kernel


def dims(hlo_type: str) -> tuple[int, ...] | None:
    """The dimensions of an HLO array type ('bf16[65536,768]' -> (65536, 768)); None for a tuple or scalar-free text."""
    found = re.fullmatch(r"\w+\[([\d,]*)\](?:\{[^}]*\})?", hlo_type.strip())
    return tuple(int(d) for d in found.group(1).split(",") if d) if found else None


def contracted(lhs: int, rhs: int, out: tuple[int, ...], sizes: set[int], strict: bool) -> int | None:
    """The contracted size K of a (batched) matrix product with lhs = B*M*K, rhs = B*K*N and
    out = B*M*N elements, K and a batch B other than 1 among the operands' dimension `sizes`;
    `strict`: M, N (and B) also dimensions of `out` (element counts alone can fit a wrong K).
    None when none fits."""
    for k in sorted(sizes, reverse=True):
        batch, remainder = divmod(lhs * rhs, math.prod(out) * k * k)
        if remainder or batch < 1 or lhs % (batch * k) or rhs % (batch * k) or (batch != 1 and batch not in sizes):
            continue
        wanted = Counter([lhs // (batch * k), rhs // (batch * k)] + ([batch] if batch > 1 else []))
        if not strict or not wanted - Counter(out):
            return k
    return None


def _sides(count: int) -> list[tuple[int, ...]]:
    """Each operand's side of the dot (0: lhs, 1: rhs, 2: not the dot's, e.g. a scale or a
    residual of the epilogue), most operands on the dot first."""
    return sorted(product(range(3), repeat=count), key=lambda sides: sides.count(2))


def xla_gemm_flops(kernel: dict[str, Any]) -> float:
    """2*M*N*K of an XLA GEMM kernel from its operand and result types. A fusion may pass the
    dot's operands in parts that it concatenates (XLA's dot merger: h and three weights) and take
    others (a scale, a residual): the first split of the operands into lhs parts, rhs parts and
    the rest that a (batched) product into a result array fits, most operands used. Split-K GEMMs
    (f32 partial results, one per slice of K) count each slice's product once."""
    operands = [d for d in (dims(t) for t in kernel.get("operands", [])) if d]
    results = [d for d in (dims(t) for t in re.findall(r"\w+\[[\d,]*\]", kernel.get("result", ""))) if d]
    sizes = {size for d in operands for size in d if size > 1}
    for strict in (True, False):  # a fusion may reshape its result (a norm after the dot): then counts alone
        for sides in _sides(len(operands)):
            lhs = sum(math.prod(d) for d, side in zip(operands, sides, strict=True) if side == 0)
            rhs = sum(math.prod(d) for d, side in zip(operands, sides, strict=True) if side == 1)
            for out in results:
                k = contracted(lhs, rhs, out, sizes, strict) if lhs and rhs else None
                if k:
                    return 2.0 * math.prod(out) * k
    raise ValueError(f"no split of GEMM {kernel['name']}'s operands multiplies into its result {kernel.get('result')}")


def inductor_gemm_flops(kernel: dict[str, Any]) -> float:
    """2*M*N*K of an Inductor extern GEMM from the elements of the buffers it reads and writes:
    K = sqrt(lhs * rhs / out) for the read pair where that is a whole number dividing both
    (mm reads (a, b); addmm (bias, a, b))."""
    out = sum(n for n, _ in kernel["writes"])
    for (a, _), (b, _) in combinations(kernel["reads"], 2):
        k = math.isqrt(int(a * b // out)) if out else 0
        if k and k * k * out == a * b and a % k == 0 and b % k == 0:
            return 2.0 * out * k
    raise ValueError(f"no read pair of GEMM {kernel['name']} multiplies into its {out} output elements")


def largest_array(record: dict[str, Any], kernel: dict[str, Any]) -> int:
    """Elements of the largest array a kernel reads or writes."""
    if record["compiler"] == "xla":
        found = [math.prod(d) for t in kernel.get("operands", []) + re.findall(r"\w+\[[\d,]*\]", kernel.get("result", ""))
                 if (d := dims(t)) is not None]
    else:
        found = [n for n, _ in kernel.get("reads", []) + kernel.get("writes", [])]
    return int(max(found, default=0))


def nongemm_flops(record: dict[str, Any], kernel: dict[str, Any]) -> float:
    """An estimate, high rather than low: one FLOP per arithmetic operation per element of the
    kernel's largest array (XLA: each arithmetic opcode its fusion holds; Inductor: each
    arithmetic aten op its name lists, a fused RMSNorm as 4). It serves to show these kernels'
    intensity is far below the ridge, so their bound is their bytes whatever the exact count."""
    if record["compiler"] == "xla":
        per_element = sum(n for op, n in kernel.get("ops", {}).items() if op in XLA_ARITHMETIC)
    else:
        per_element = sum(INDUCTOR_ARITHMETIC.get(op, 0) for op in inductor_ops(kernel["name"]))
    return float(per_element * largest_array(record, kernel))


def kernel_flops(record: dict[str, Any], kernel: dict[str, Any]) -> float:
    """FLOPs of one run of a kernel: a GEMM's 2*M*N*K (ops fused around its dot left out), else nongemm_flops."""
    if not kernel["gemm"]:
        return nongemm_flops(record, kernel)
    return xla_gemm_flops(kernel) if record["compiler"] == "xla" else inductor_gemm_flops(kernel)


def kernel_group(record: dict[str, Any], kernel: dict[str, Any]) -> str:
    """GEMMs; the kernels computing the QK norm, rotary or the value mix; other (weight casts,
    sums of split-K partials, gradient reductions, data movement)."""
    if kernel["gemm"]:
        return "GEMMs"
    # jaxgpt's value mix is its own function (records.STAGES names only the ones the stage column shows)
    value_mix = VALUE_MIX_FUNCTION in kernel.get("functions", [])
    return "norm, rotary, value mix" if value_mix or PATH_STAGES & set(kernel_stages(record, kernel)) else "other"


# ---------------------------------------------------------------------------------------------
# Programs


def kernel_bound(record: dict[str, Any], kernel: dict[str, Any], peaks: Peaks = H100) -> KernelBound:
    """One kernel on the roofline; a GEMM against the matrix peak, the rest against the vector peak."""
    runs = kernel.get("runs", 1) or 1
    flops = kernel_flops(record, kernel) * runs
    moved = float(kernel["read"] + kernel["written"]) * runs
    peak = peaks.matrix_flop_s if kernel["gemm"] else peaks.vector_flop_s
    return KernelBound(kernel["name"], kernel_group(record, kernel), bool(kernel["gemm"]), flops, moved,
                       flops / peak, moved / peaks.memory_byte_s)


def program_bound(record: dict[str, Any], peaks: Peaks = H100) -> ProgramBound:
    """Every kernel of a record's per-kernel table on the roofline."""
    shape = record["shape"]
    return ProgramBound(record["compiler"], record["device"], record["mode"], record["layout"], shape["seq_len"],
                        shape["model_dim"], tuple(kernel_bound(record, k, peaks) for k in record["kernel_table"]))


def model_gemm_flops(mode: str, seq_len: int, model_dim: int) -> float:
    """The QKV path's GEMM FLOPs by the model alone: 2*T*D*3D per pass over the projection
    (forward; forward+backward adds the input's and the weights' gradients: three passes)."""
    return (1 if mode == "fwd" else 3) * 2.0 * seq_len * model_dim * 3 * model_dim


def qkv_programs(records: list[dict[str, Any]], peaks: Peaks = H100) -> list[ProgramBound]:
    """The QKV path's default programs (no ablation) on the roofline, in the records' order."""
    return [program_bound(r, peaks) for r in records
            if r["part"] == "qkv" and r.get("variant", "default") == "default" and r.get("kernel_table")]


def pairs(programs: list[ProgramBound]) -> dict[tuple[str, str, int, int, str], dict[str, ProgramBound]]:
    """(compiler, device, T, D, mode) -> {"merged", "separate"}: the layouts side by side."""
    out: dict[tuple[str, str, int, int, str], dict[str, ProgramBound]] = {}
    for p in programs:
        out.setdefault((p.compiler, p.device, p.seq_len, p.model_dim, p.mode), {})[p.layout] = p
    return {key: found for key, found in out.items() if set(found) == {"merged", "separate"}}


# ---------------------------------------------------------------------------------------------
# Across T: XLA's dot-merger sweep (no per-kernel tables: its dots and its total bytes)


def dot_flops(dot: dict[str, Any]) -> float:
    """2*M*N*K of a sweep record's dot (its result and operand types)."""
    return xla_gemm_flops({"name": dot.get("dot", "dot"), "operands": dot["operands"], "result": dot["result"]})


@dataclass(frozen=True)
class SweepBound:
    """A sweep program on the roofline from what the sweep keeps: each dot as a GEMM kernel (its
    FLOPs; its operands and result as its bytes) and the rest of the program's bytes as kernels
    bound by their bytes (their FLOPs, far under the vector ridge above, left out)."""
    seq_len: int
    mode: str
    layout: str
    gemms: tuple[KernelBound, ...]
    rest_bytes: float
    rest_s: float

    @property
    def gemm_s(self) -> float:
        return sum(k.bound_s for k in self.gemms)

    @property
    def bound_s(self) -> float:
        return self.gemm_s + self.rest_s

    @property
    def flops(self) -> float:
        return sum(k.flops for k in self.gemms)


def sweep_bounds(sweep: list[dict[str, Any]], peaks: Peaks = H100) -> list[SweepBound]:
    """The sweep's programs at XLA's default threshold (merged and separate), by T and mode."""
    out = []
    for r in sorted(sweep, key=lambda r: (r["T"], r["mode"], r["layout"])):
        if r["threshold_mb"] is None and r.get("dots"):
            gemms = tuple(KernelBound(d.get("dot", "dot"), "GEMMs", True, dot_flops(d), float(d["bytes"]),
                                      dot_flops(d) / peaks.matrix_flop_s, d["bytes"] / peaks.memory_byte_s) for d in r["dots"])
            rest = r["kernel_traffic_bytes"] - sum(k.bytes for k in gemms)
            out.append(SweepBound(r["T"], r["mode"], r["layout"], gemms, rest, rest / peaks.memory_byte_s))
    return out
