"""Reading XLA's optimized HLO text (`compiled.as_text()`): the one reader of compiled programs.

`parse_module` splits a module into computations and instructions; `shape_bytes` sizes an HLO
type from the one dtype table (FP8 types are 1 byte). On top of them, two readings:
`plan_counts` (what gpu_plan reports for a compile-only GPU plan: fusions, Triton and cuBLAS
GEMMs, FP8 GEMMs and their scales, collectives and their bytes) and `hlo_counts` (what the fusion
study in jaxgpt_tools reports: kernels per call and the bytes they move).

Pure text functions, no jax import, so that they run under any venv (the GPU compile-only one
included) and are tested on small hand-written modules (tests/tools/common/test_hlo.py). A "kernel" is an
instruction that does work in a computation that runs as a sequence of kernels: the ENTRY
computation and the bodies of while loops, calls and conditionals. Instructions inside a
fusion's computation are what the fusion fused (one kernel); reducers (`to_apply` of reduce,
scatter, ...) are not kernels.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Instructions that move no data and launch nothing.
FREE_OPCODES = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
                          "partition-id", "replica-id", "opt-barrier", "add-dependency"})
# Instructions that run other computations as kernels (counted through those computations).
CONTROL_OPCODES = frozenset({"while", "call", "conditional"})
# Bits of one element of each HLO element type; every FP8 type (f8e4m3fn, f8e5m2, ...) is 8.
ELEMENT_BITS = {"pred": 8, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "f4e2m1fn": 4, "s8": 8, "u8": 8, "bf16": 16,
                "f16": 16, "s16": 16, "u16": 16, "f32": 32, "s32": 32, "u32": 32, "f64": 64, "s64": 64, "u64": 64,
                "c64": 64, "c128": 128, "token": 0}
FP8 = re.compile(r"f8e[0-9]m[0-9]\w*")


@dataclass
class Instruction:
    """One line `name = shape opcode(args), attrs`; `operands` are the names `args` refers to."""

    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str
    args: str = ""

    @property
    def dtype(self) -> str:
        """The element type of an array result ('' for a tuple)."""
        found = re.match(r"(\w+)\[", self.shape)
        return found.group(1) if found else ""

    @property
    def fusion_kind(self) -> str | None:
        """kLoop / kInput / kOutput / kCustom ..., with GPU GEMM fusions named by their backend kind."""
        if self.opcode != "fusion":
            return None
        custom = re.search(r'"kind":"(__\w+)"', self.attrs)
        if custom:
            return custom.group(1).strip("_")
        kind = re.search(r"kind=(\w+)", self.attrs)
        return kind.group(1) if kind else "unknown"

    @property
    def custom_call_target(self) -> str | None:
        target = re.search(r'custom_call_target="([^"]+)"', self.attrs)
        return target.group(1) if self.opcode == "custom-call" and target else None

    def called(self, key: str) -> list[str]:
        found = re.search(rf"{key}=\{{?([%\w.\-, ]+)\}}?", self.attrs)
        return [name.strip().lstrip("%") for name in found.group(1).split(",")] if found else []


@dataclass
class Module:
    computations: dict[str, list[Instruction]] = field(default_factory=dict)
    entry: str = ""

    def instructions(self) -> list[Instruction]:
        """Every instruction of every computation."""
        return [inst for insts in self.computations.values() for inst in insts]

    def shapes(self) -> dict[str, str]:
        """Instruction name -> its result type, over the whole module."""
        return {inst.name: inst.shape for inst in self.instructions()}


def _split_shape(text: str) -> tuple[str, str]:
    """(shape, rest) of 'SHAPE opcode(...)...' where SHAPE may be a parenthesised tuple."""
    if not text.startswith("("):
        shape, _, rest = text.partition(" ")
        return shape, rest
    depth = 0
    for i, char in enumerate(text):
        depth += char == "("
        depth -= char == ")"
        if depth == 0:
            return text[: i + 1], text[i + 1:].lstrip()
    return text, ""


def _split_call(text: str) -> tuple[str, str, str]:
    """(opcode, operands text, attributes text) of 'opcode(operands), attrs'."""
    opcode, _, rest = text.partition("(")
    depth = 1
    for i, char in enumerate(rest):
        depth += char in "({"
        depth -= char in ")}"
        if depth == 0:
            return opcode, rest[:i], rest[i + 1:]
    return opcode, rest, ""


_HEADER = re.compile(r"^(ENTRY )?%?([\w.\-]+) .*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%?([\w.\-]+) = (.*)$")


def parse_module(hlo: str) -> Module:
    """Computations and their instructions of an HLO module text."""
    module, current = Module(), None
    for line in hlo.splitlines():
        header = _HEADER.match(line)
        if header and not line.startswith(" ") and "=" not in line.split("(")[0]:
            current = header.group(2)
            module.computations[current] = []
            if header.group(1):
                module.entry = current
            continue
        if line.startswith("}"):
            current = None
            continue
        match = _INSTRUCTION.match(line)
        if current is None or not match:
            continue
        shape, rest = _split_shape(match.group(2))
        opcode, operands, attrs = _split_call(rest)
        names = re.findall(r"%([\w.\-]+)", operands) or re.findall(r"(?:^|, )(?:\S+ )?([\w.\-]+)(?=,|$)", operands)
        module.computations[current].append(Instruction(match.group(1), shape, opcode.strip(), names, attrs, operands))
    return module


def element_bits(dtype: str) -> int:
    """Bits of one element of an HLO element type; ValueError for a type not in the table."""
    if FP8.fullmatch(dtype):
        return 8
    if dtype not in ELEMENT_BITS:
        raise ValueError(f"HLO element type {dtype!r} has no size in jaxgpt_tools.common.hlo.ELEMENT_BITS; add it there")
    return ELEMENT_BITS[dtype]


def shape_bytes(shape: str) -> int:
    """Bytes of every array in an HLO type (tuples summed), e.g. 'bf16[2,3]{1,0}' -> 12,
    '(bf16[2,8]{1,0}, f32[4]{0})' -> 48; sub-byte arrays round up to whole bytes."""
    total = 0
    for dtype, dims in re.findall(r"(\w+)\[([\d,]*)\]", shape):
        count = math.prod(int(dim) for dim in dims.split(",") if dim)
        total += -(-count * element_bits(dtype) // 8)
    return total


def trip_count(inst: Instruction) -> int | None:
    """A while loop's trip count when XLA knows it (backend_config known_trip_count)."""
    found = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', inst.attrs)
    return int(found.group(1)) if found else None


def kernel_computations(module: Module) -> dict[str, int]:
    """ENTRY and every computation it runs as kernels (while bodies and conditions, calls,
    branches), each with how many times one call of the program runs it (loop trip counts
    multiplied; a loop of unknown trip count counts once)."""
    runs: dict[str, int] = {}
    todo = [(module.entry, 1)]
    while todo:
        name, times = todo.pop()
        if name in runs or name not in module.computations:
            continue
        runs[name] = times
        for inst in module.computations[name]:
            if inst.opcode not in CONTROL_OPCODES:
                continue
            inner = times * (trip_count(inst) or 1) if inst.opcode == "while" else times
            for key in ("body", "condition", "to_apply", "branch_computations", "true_computation", "false_computation"):
                todo += [(called, inner) for called in inst.called(key)]
    return runs


def kernels(module: Module) -> Iterator[tuple[str, Instruction, int]]:
    """(computation, instruction, runs per call) of every kernel: the instructions that do work
    in the computations `kernel_computations` finds, in program order."""
    for name, times in kernel_computations(module).items():
        for inst in module.computations[name]:
            if inst.opcode not in FREE_OPCODES and inst.opcode not in CONTROL_OPCODES:
                yield name, inst, times


def _fused_ops(module: Module, fusion: Instruction) -> list[Instruction]:
    """Every instruction inside a fusion's computation, nested fusions flattened."""
    out = []
    for name in fusion.called("calls"):
        for inst in module.computations.get(name, []):
            out += _fused_ops(module, inst) if inst.opcode == "fusion" else [inst]
    return out


def _is_gemm(inst: Instruction) -> bool:
    target = inst.custom_call_target or ""
    return inst.opcode in ("dot", "convolution") or any(word in target.lower() for word in ("gemm", "matmul"))


def gemm_prologue_epilogue(module: Module, fusion: Instruction) -> dict[str, list[str]] | None:
    """For a fusion holding a dot: the opcodes computed before it on its operands (prologue) and
    after it on its result (epilogue), data movement excluded. None when the fusion has no dot."""
    for name in fusion.called("calls"):
        body = {inst.name: inst for inst in module.computations.get(name, [])}
        dots = [inst for inst in body.values() if inst.opcode in ("dot", "scaled-dot")]
        if not dots:
            continue
        ancestors: set[str] = set()
        todo = [operand for dot in dots for operand in dot.operands]
        while todo:
            operand = todo.pop()
            if operand in body and operand not in ancestors:
                ancestors.add(operand)
                todo += body[operand].operands
        dot_names = {dot.name for dot in dots}
        skip = FREE_OPCODES | {"dot", "scaled-dot", "broadcast", "reshape", "transpose", "slice", "copy"}
        prologue = sorted(body[a].opcode for a in ancestors if body[a].opcode not in skip)
        epilogue = sorted(inst.opcode for inst in body.values()
                          if inst.name not in ancestors and inst.name not in dot_names and inst.opcode not in skip)
        return {"prologue": prologue, "epilogue": epilogue}
    return None


SLICING_OPCODES = frozenset({"slice", "dynamic-slice", "gather"})


def kernel_bytes(module: Module, inst: Instruction, shapes: dict[str, str]) -> float:
    """Bytes a kernel reads and writes (kernel_read_write, summed)."""
    return sum(kernel_read_write(module, inst, shapes))


def kernel_read_write(module: Module, inst: Instruction, shapes: dict[str, str]) -> tuple[float, float]:
    """(bytes read, bytes written) by a kernel: each operand once and its result once, except that
    an operand a fusion only slices is read as its slices, and a dynamic-update-slice (unfused or a
    fusion's root) writes only its update into the buffer it updates in place."""
    body = [i for name in inst.called("calls") for i in module.computations.get(name, [])] if inst.opcode == "fusion" else []
    by_name = {i.name: i for i in body}
    source: dict[str, str] = {}  # a bitcast's (or bitcast chain's) first non-bitcast operand

    def origin(name: str) -> str:
        while name in by_name and by_name[name].opcode == "bitcast" and by_name[name].operands:
            name = by_name[name].operands[0]
        return name

    users: dict[str, list[Instruction]] = {}
    for i in body:
        if i.opcode == "bitcast":
            continue
        for operand in i.operands:
            source[operand] = origin(operand)
            users.setdefault(source[operand], []).append(i)
    params = {int(i.operands[0]): i.name for i in body if i.opcode == "parameter" and i.operands and i.operands[0].isdigit()}
    root = by_name.get(origin(body[-1].name), body[-1]) if body else inst
    in_place = None  # the operand index updated in place
    written = shape_bytes(inst.shape)
    if root.opcode == "dynamic-update-slice" and len(root.operands) > 1:
        written = shape_bytes(by_name[root.operands[1]].shape if root.operands[1] in by_name else shapes.get(root.operands[1], ""))
        buffer = origin(root.operands[0])
        in_place = next((k for k, name in params.items() if name == buffer), 0 if root is inst else None)
    read = 0.0
    for k, operand in enumerate(inst.operands):
        if k == in_place or operand in inst.operands[:k]:
            continue
        param = params.get(k, "")
        sliced = users.get(param, [])
        if sliced and all(u.opcode in SLICING_OPCODES and origin(u.operands[0]) == param for u in sliced):
            read += sum(shape_bytes(u.shape) for u in sliced)
        elif inst.opcode in SLICING_OPCODES and k == 0:
            read += shape_bytes(inst.shape)
        else:
            read += shape_bytes(shapes.get(operand, ""))
    return read, written


# Opcodes that only move or reshape data, left out of what a kernel is said to fuse.
DATA_MOVEMENT = FREE_OPCODES | frozenset({"broadcast", "reshape", "transpose", "slice", "copy", "concatenate", "pad",
                                          "dynamic-slice", "dynamic-update-slice", "iota", "select"})


def source_functions(hlo: str) -> dict[int, str]:
    """Stack frame id -> the innermost Python function of that frame, from the module's
    FunctionNames / FileLocations / StackFrames tables (what `stack_frame_id=N` in an
    instruction's metadata points to); empty when the text has no such tables."""
    tables: dict[str, dict[int, str]] = {}
    current = None
    for line in hlo.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line, {})
        elif current is not None and re.match(r"\d+ ", line):
            number, _, rest = line.partition(" ")
            current[int(number)] = rest
        elif not line.strip():
            current = None
    functions = {k: v.strip('"') for k, v in tables.get("FunctionNames", {}).items()}
    location_function = {k: functions.get(int(m.group(1)), "")
                         for k, v in tables.get("FileLocations", {}).items() if (m := re.search(r"function_name_id=(\d+)", v))}
    return {k: location_function.get(int(m.group(1)), "")
            for k, v in tables.get("StackFrames", {}).items() if (m := re.search(r"file_location_id=(\d+)", v))}


def kernel_table(hlo: str) -> list[dict[str, Any]]:
    """One row per kernel of an optimized HLO module, in program order (ENTRY, then loop bodies):
    name; kind (fusion kind, custom-call target or opcode); runs per call; the computing opcodes
    it holds (`ops`, data movement left out; a GEMM's split into `prologue`/`epilogue`);
    `functions`: the Python functions its instructions were traced from (innermost frame of
    each, from the source tables); bytes `read` and `written` (kernel_read_write)."""
    module = parse_module(hlo)
    frames = source_functions(hlo)
    shapes = module.shapes()
    rows = []
    for _, inst, times in kernels(module):
        inside = _fused_ops(module, inst) if inst.opcode == "fusion" else [inst]
        ops = Counter(i.opcode for i in inside if i.opcode not in DATA_MOVEMENT)
        ids = {int(m.group(1)) for i in inside + [inst] if i.opcode not in FREE_OPCODES
               for m in [re.search(r"stack_frame_id=(\d+)", i.attrs)] if m}
        read, written = kernel_read_write(module, inst, shapes)
        row = {"name": inst.name, "kind": inst.fusion_kind or inst.custom_call_target or inst.opcode, "runs": times,
               "ops": dict(sorted(ops.items())), "functions": sorted({frames[i] for i in ids if frames.get(i)}),
               "read": read, "written": written, "gemm": _is_gemm(inst) or any(_is_gemm(i) for i in inside)}
        split = gemm_prologue_epilogue(module, inst) if inst.opcode == "fusion" else None
        if split is not None:
            row.update(split)
        rows.append(row)
    return rows


def hlo_counts(hlo: str) -> dict[str, Any]:
    """Kernel counts of an optimized HLO module, per call of the program (an instruction in a loop
    body counts once per trip; `static_kernels` counts it once): kernels (instructions that do
    work in kernel computations), fusions by kind, GEMMs (unfused dots, GEMM custom calls, fusions holding a
    dot), all dots (fused or not) with their result shapes, custom calls by target, unfused
    copies and transposes, while loops, and the bytes every kernel reads and writes once
    (kernel_bytes: the traffic of a kernel-by-kernel schedule)."""
    module = parse_module(hlo)
    fusions: Counter[str] = Counter()
    custom_calls: Counter[str] = Counter()
    kernels_by_op: Counter[str] = Counter()
    gemm_kernels, kernel_runs, traffic = 0, 0, 0.0
    gemm_fusions = []
    shapes = module.shapes()
    static, in_loops = 0, 0
    for name, inst, times in kernels(module):
        static += 1
        kernel_runs += times
        in_loops += times if name != module.entry else 0
        kernels_by_op[inst.opcode] += times
        traffic += times * kernel_bytes(module, inst, shapes)
        if inst.opcode == "fusion":
            fusions[inst.fusion_kind or "unknown"] += times
            split = gemm_prologue_epilogue(module, inst)
            if split is not None:
                gemm_kernels += times
                gemm_fusions.append({"fusion": inst.name, "kind": inst.fusion_kind, "runs": times, **split})
        elif _is_gemm(inst):
            gemm_kernels += times
        if inst.custom_call_target:
            custom_calls[inst.custom_call_target] += times
    all_insts = module.instructions()
    dots = [inst for inst in all_insts if inst.opcode in ("dot", "scaled-dot")]
    return {
        "kernels": kernel_runs,
        "static_kernels": static,
        "loop_kernels": in_loops,
        "fusions": dict(fusions),
        "gemm_kernels": gemm_kernels,
        "dots": len(dots),
        "dot_shapes": sorted(re.sub(r"\{[^}]*\}", "", inst.shape) for inst in dots),
        "custom_calls": dict(custom_calls),
        "copies": kernels_by_op["copy"] + kernels_by_op["copy-start"],
        "transposes": kernels_by_op["transpose"],
        "unfused_ops": {op: n for op, n in kernels_by_op.items() if op not in ("fusion", "custom-call")},
        "while_loops": sum(1 for inst in all_insts if inst.opcode == "while"),
        "kernel_traffic_bytes": traffic,
        "gemm_fusions": gemm_fusions,
    }


# ---------------------------------------------------------------------------------------------
# What a compile-only GPU plan reports (jaxgpt_tools.gpu.compile_plan)

COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")


def plan_counts(hlo: str) -> dict[str, Any]:
    """Counts from an optimized GPU HLO text: fusions by kind, Triton/cuBLAS GEMMs, FP8 GEMMs
    (the FP8 operand types of each GEMM fusion or cuBLAS call that takes FP8 operands) and the
    scales around them (`fp8_scales`), collectives and the bytes of their results, custom calls
    by target, while loops. An FP8 GEMM here is one whose operands reach the kernel as FP8;
    inside a Triton GEMM fusion XLA may still convert them before the dot."""
    module = parse_module(hlo)
    instructions, shapes = module.instructions(), module.shapes()
    fusions: Counter[str] = Counter()
    collectives: Counter[str] = Counter()
    collective_bytes: Counter[str] = Counter()
    custom_calls: Counter[str] = Counter()
    triton, cublas, fp8 = 0, 0, []
    fp8_gemm_computations: dict[str, str] = {}  # called computation -> its FP8 operand types
    for inst in instructions:
        if inst.opcode == "fusion":
            fusion_kind = re.search(r"kind=(\w+)", inst.attrs)
            fusions[fusion_kind.group(1) if fusion_kind else "unknown"] += 1
            if re.search(r'"kind":"__triton\w*gemm', inst.attrs):
                triton += 1
                called = inst.called("calls")
                params = module.computations.get(called[0], []) if called else []
                types = sorted(p.dtype for p in params if p.opcode == "parameter" and FP8.fullmatch(p.dtype))
                if types:
                    fp8.append(" x ".join(types))
                    fp8_gemm_computations[called[0]] = " x ".join(types)
        target = inst.custom_call_target
        if target:
            custom_calls[target] += 1
            if target.startswith("__cublas"):
                cublas += 1
                types = sorted(t for name in inst.operands for t in re.findall(r"(\w+)\[", shapes.get(name, ""))
                               if FP8.fullmatch(t))
                if types:
                    fp8.append(" x ".join(types))
        # A synchronous collective, or the -done half of an asynchronous one, whose result type is
        # the data each device ends up with (the -start half also lists its operands).
        kind = inst.opcode.removesuffix("-done")
        if kind in COLLECTIVES:
            collectives[kind] += 1
            collective_bytes[kind] += shape_bytes(inst.shape)
    return {"fusions": dict(fusions), "triton_gemms": triton, "cublas_gemms": cublas, "fp8_gemms": fp8,
            "fp8_scales": fp8_scales(module, fp8_gemm_computations),
            "collectives": dict(collectives), "collective_bytes": dict(collective_bytes),
            "custom_calls": dict(custom_calls), "while_loops": sum(inst.opcode == "while" for inst in instructions)}


def _scalar_factor(body: dict[str, Instruction], name: str) -> float | None:
    """The scalar constant that instruction `name` multiplies by, through a broadcast; else None."""
    inst = body.get(name)
    if inst is None or inst.opcode != "multiply":
        return None
    for operand in inst.operands:
        factor = body.get(operand)
        if factor is not None and factor.opcode == "broadcast" and factor.operands:
            factor = body.get(factor.operands[0])
        if factor is not None and factor.opcode == "constant":
            # HLO prints 9 significant digits; as fp32 they read back as the exact constant.
            return float(np.float32(factor.args))
    return None


def fp8_scales(module: Module, fp8_gemm_computations: dict[str, str]) -> dict[str, dict[str, list[float]]]:
    """The scales an optimized HLO applies around FP8: {"quantize": {f8 type: [s, ...]},
    "rescale": {"a x b": [r, ...]}}. A quantize scale is the scalar constant a value is
    multiplied by right before its convert to an FP8 type (through an intermediate convert);
    a rescale is the constant a GEMM fusion (`fp8_gemm_computations`: called computation ->
    its FP8 operand types) multiplies its dot's result by. Sorted lists of the distinct values
    (XLA may clone one conversion into several fusions).

    Reads Triton GEMM fusions (what compile-only plans hold). A rescale applied outside the
    fusion (after a split-K reduction, as XLA does for small GEMMs with a long contraction) or
    by a cuBLAS FP8 call (scales as operands) is not followed."""
    quantize: dict[str, set[float]] = {}
    rescale: dict[str, set[float]] = {}
    for name, insts in module.computations.items():
        body = {inst.name: inst for inst in insts}
        for inst in insts:
            if inst.opcode == "convert" and FP8.fullmatch(inst.dtype):
                source = inst.operands[0]
                while source in body and body[source].opcode == "convert":
                    source = body[source].operands[0]
                factor = _scalar_factor(body, source)
                if factor is not None:
                    quantize.setdefault(inst.dtype, set()).add(factor)
            if name in fp8_gemm_computations and inst.opcode == "multiply":
                if any(operand in body and body[operand].opcode == "dot" for operand in inst.operands):
                    factor = _scalar_factor(body, inst.name)
                    if factor is not None:
                        rescale.setdefault(fp8_gemm_computations[name], set()).add(factor)
    return {"quantize": {k: sorted(v) for k, v in sorted(quantize.items())},
            "rescale": {k: sorted(v) for k, v in sorted(rescale.items())}}
