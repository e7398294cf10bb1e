"""The TorchInductor side of the fusion study: torch_ref's attention layer and one block under
torch.compile, with Inductor's generated code read back from its own debug trace.

The programs are the ones of jaxgpt_tools/fusion_xla.py (same parts, modes, layouts and shapes):
bf16 activations, fp32 weights cast at use, one document, window min(14, T / 128) blocks given
as torch_ref's CPU mask (SDPA with a dense (T, T) bool mask; on a GPU torch_ref uses flex).
"fwd" runs under torch.no_grad (Inductor's inference graph); "fwdbwd" is the training forward
graph plus the backward graph AOTAutograd splits off, both compiled by Inductor.

Inductor's code comes from `torch._inductor.config.trace` (what TORCH_COMPILE_DEBUG=1 turns
on): one folder per compiled graph with output_code.py, fx_graph_readable.py and the IR
before and after fusion. Counts are read from output_code.py's `call` function: generated
kernels (by kind and by the ops their names say they fused), extern kernels (GEMMs) and aten
fallbacks, each launch counted.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from jaxgpt_tools.fusion_xla import MODES, PARTS, Shape, program_name, run_programs
from jaxgpt_tools.timing import timed

TORCH_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "bool": 1, "int64": 8, "int32": 4, "uint8": 1,
               "float8_e4m3fn": 1, "float8_e5m2": 1}
FX_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "b8": 1, "i64": 8, "i32": 4, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1}


def _numel(dims: str) -> int:
    count = 1
    for dim in filter(None, (d.strip() for d in dims.split(","))):
        count *= int(dim)
    return count


def _call_body(code: str) -> list[str]:
    """Lines of output_code.py's `def call(self, args)` (or `def call(args)`) function."""
    lines = code.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"\s*def call\(", line)), None)
    if start is None:
        return []
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return body


def _kernel_kind(name: str, source: str) -> str:
    """pointwise / reduction / template (GEMM template) / persistent_reduction for a generated kernel."""
    for prefix, kind in (("triton_poi", "pointwise"), ("triton_red", "reduction"), ("triton_per", "persistent_reduction"),
                         ("triton_tem", "template")):
        if name.startswith(prefix):
            return kind
    return "reduction" if re.search(r"tmp_acc\d|welford", source) else "pointwise"


def read_output_code(code: str, input_types: dict[str, float]) -> dict[str, Any]:
    """Counts of one Inductor output_code.py: generated kernel launches by kind, the ops each
    kernel's name says it fused, extern (GEMM) launches, aten fallbacks, and the bytes every
    launch reads and writes once (its buffer arguments, whole; `input_types`: bytes of the graph's
    inputs by name)."""
    kernels = dict(re.findall(r"^(\w+) = async_compile\.\w+\((.*?)^'''", code, re.MULTILINE | re.DOTALL))
    kernels.update({name: "" for name in re.findall(r"^(\w+) = async_compile\.\w+\(", code, re.MULTILINE) if name not in kernels})
    sizes = dict(input_types)
    launches: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    extern: Counter[str] = Counter()
    fallbacks: Counter[str] = Counter()
    fused_ops: list[str] = []
    traffic = 0.0
    for line in _call_body(code):
        alloc = re.match(r"\s*(buf\d+) = empty_strided_\w+\(\(([\d, ]*)\), \([\d, ]*\), torch\.(\w+)\)", line)
        if alloc:
            sizes[alloc.group(1)] = _numel(alloc.group(2)) * TORCH_BYTES.get(alloc.group(3), 4)
            continue
        reuse = re.match(r"\s*(buf\d+) = (buf\d+|\w+); del \2\s+# reuse", line)
        if reuse:
            sizes[reuse.group(1)] = sizes.get(reuse.group(2), 0)
            continue
        call = re.match(r"\s*(?:\w+ = )?(extern_kernels\.\w+|torch\.ops\.\w+\.\w+(?:\.\w+)?|\w+)(?:\.run)?\((.*)", line)
        if not call:
            continue
        target, args = call.groups()
        if target.startswith("extern_kernels."):
            extern[target.split(".", 1)[1]] += 1
        elif target.startswith("torch.ops."):
            fallbacks[target[len("torch.ops."):]] += 1
        elif target in kernels:
            launches[target] += 1
            kinds[_kernel_kind(target, kernels[target])] += 1
            fused_ops.append(target)
        else:
            continue
        names = set(re.findall(r"\b(buf\d+|primals_\d+|arg\d+_\d+|tangents_\d+)\b", args))
        traffic += sum(sizes.get(name, 0) for name in names)
        # A fallback's outputs are named on the same line (bufN = torch.ops...): count them too.
        out = re.match(r"\s*(buf\d+) = ", line)
        if out and out.group(1) not in names:
            traffic += sizes.get(out.group(1), 0)
    return {
        "kernels": sum(launches.values()) + sum(extern.values()) + sum(fallbacks.values()),
        "generated_kernels": sum(launches.values()),
        "generated_by_kind": dict(kinds),
        "distinct_generated_kernels": len(launches),
        "extern_kernels": dict(extern),
        "gemm_kernels": sum(n for name, n in extern.items() if name in ("mm", "bmm", "addmm", "baddbmm", "_mm_plus_mm"))
                        + sum(n for name, n in fallbacks.items() if re.search(r"mm|matmul|linear", name)),
        "aten_fallbacks": dict(fallbacks),
        "fused_kernel_names": fused_ops,
        "kernel_traffic_bytes": traffic,
    }


def input_types(fx_readable: str) -> dict[str, float]:
    """Bytes of each input of an Inductor graph from fx_graph_readable.py's annotated signature."""
    out = {}
    for name, dtype, dims in re.findall(r'(\w+): "(\w+)\[([\d, ]*)\]', fx_readable):
        out.setdefault(name, _numel(dims) * FX_BYTES.get(dtype, 4))
    return out


def read_trace_dir(trace_dir: Path) -> list[dict[str, Any]]:
    """One record per compiled graph under an Inductor debug trace folder, ordered as compiled."""
    graphs = []
    for folder in sorted(trace_dir.rglob("output_code.py"), key=lambda p: p.stat().st_mtime):
        code = folder.read_text()
        readable = folder.with_name("fx_graph_readable.py")
        types = input_types(readable.read_text()) if readable.exists() else {}
        kind = re.search(r"_(inference|forward|backward)_", folder.parent.name)
        graphs.append({"graph": kind.group(1) if kind else folder.parent.name, "output_code": str(folder),
                       **read_output_code(code, types)})
    return graphs


def _merge_counts(graphs: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum of the per-graph counts (a fwd+bwd program is its forward and backward graphs)."""
    total: dict[str, Any] = {"kernels": 0, "generated_kernels": 0, "gemm_kernels": 0, "kernel_traffic_bytes": 0.0}
    for key in ("generated_by_kind", "extern_kernels", "aten_fallbacks"):
        merged: Counter[str] = Counter()
        for graph in graphs:
            merged.update(graph[key])
        total[key] = dict(merged)
    for graph in graphs:
        for key in ("kernels", "generated_kernels", "gemm_kernels", "kernel_traffic_bytes"):
            total[key] += graph[key]
    total["fused_kernel_names"] = [name for graph in graphs for name in graph["fused_kernel_names"]]
    return total


def build_module(part: str, layout: str, shape: Shape):
    """(module, example inputs) of torch_ref's attention layer or block; bf16 activations."""
    import torch

    from torch_ref import masks as masks_lib
    from torch_ref.model import Block, rotary_tables

    torch.manual_seed(0)
    cos, sin = rotary_tables(shape.model_dim // shape.num_heads, shape.seq_len)
    block = Block(shape.model_dim, shape.num_heads, True, cos, sin, layout)
    tokens = torch.zeros(shape.seq_len, dtype=torch.int64)
    tokens[0] = 50256  # one document
    docs = masks_lib.document_ids(tokens)
    lists = masks_lib.truncate_to_window(masks_lib.block_lists(docs), shape.window_blocks)
    mask = masks_lib.allowed_mask_from_block_lists(lists, docs)
    generator = torch.Generator().manual_seed(0)
    act = lambda *dims: torch.randn(*dims, generator=generator).bfloat16()  # noqa: E731
    h, ve = act(1, shape.seq_len, shape.model_dim), act(shape.seq_len, shape.model_dim)
    if part == "attn":
        return block.attn, (h, ve, mask)
    return block, (h, ve, act(1, shape.seq_len, shape.model_dim), mask)


def flops(module, inputs, mode: str) -> float:
    """FLOPs of the eager program by torch.utils.flop_counter: GEMMs and the attention ops it has
    formulas for (the CUDA flash / efficient / cuDNN kernels, not the CPU SDPA kernel)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        if mode == "fwd":
            with torch.no_grad():
                module(*inputs)
        else:
            out = module(*inputs)
            out.backward(torch.ones_like(out))
    module.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def compile_program(part: str, mode: str, layout: str, shape: Shape, *, out_dir: Path, repeats: int) -> dict[str, Any]:
    """torch.compile one program on this CPU, run it (which compiles), read Inductor's trace in
    out_dir/<program>/ and time it (median of `repeats` after a warm-up)."""
    import torch
    import torch._dynamo
    import torch._functorch.config
    import torch._inductor.config as inductor_config

    name = program_name(part, mode, layout, shape)
    trace_dir = out_dir / name
    module, inputs = build_module(part, layout, shape)
    if mode == "fwdbwd":
        inputs = tuple(x.requires_grad_(True) if x.is_floating_point() else x for x in inputs)
    torch._dynamo.reset()
    # No cache hits: a graph loaded from Inductor's or AOTAutograd's cache writes no trace.
    no_cache = {"fx_graph_cache": False, "fx_graph_remote_cache": False}
    with inductor_config.patch({"trace.enabled": True, "trace.debug_dir": str(trace_dir), **no_cache}), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        compiled = torch.compile(module)

        def run() -> None:
            if mode == "fwd":
                with torch.no_grad():
                    compiled(*inputs)
                return
            out = compiled(*inputs)
            out.backward(torch.ones_like(out))
            module.zero_grad(set_to_none=True)
            for x in inputs:
                x.grad = None

        compile_s, _ = timed(run)
    graphs = read_trace_dir(trace_dir)
    record: dict[str, Any] = {
        "compiler": "inductor", "device": "cpu", "part": part, "mode": mode, "layout": layout, "shape": asdict(shape),
        "compile_s": compile_s, "flops": flops(module, inputs, mode), **_merge_counts(graphs),
        "graphs": [{key: g[key] for key in ("graph", "kernels", "generated_kernels", "gemm_kernels", "output_code")}
                   for g in graphs],
    }
    if repeats > 0:  # the compiling call above was the warm-up
        record["median_ms"] = 1e3 * statistics.median([timed(run)[0] for _ in range(repeats)])
    return record


def run(shapes: list[Shape], *, out_dir: Path, repeats: int, log=print,
        parts=PARTS, modes=MODES) -> list[dict[str, Any]]:
    compile_one = functools.partial(compile_program, out_dir=out_dir, repeats=repeats)
    return run_programs(compile_one, shapes, log=log, parts=parts, modes=modes)
