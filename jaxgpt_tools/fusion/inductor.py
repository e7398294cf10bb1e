"""The TorchInductor side of the fusion study: torch_ref's QKV path and one block under
torch.compile, with Inductor's generated code read back from its own debug trace.

The programs are the ones of jaxgpt_tools/fusion/xla.py (same parts, modes, layouts and shapes):
the QKV path is `CausalSelfAttention.project` (q, k, v at the attention kernel's inputs); the
block's attention is torch_ref's for the device (SDPA with a dense (T, T) bool mask on a CPU,
compiled flex attention with the record's BlockMask on CUDA). bf16 activations, fp32 weights
cast at use, one document, window min(14, T / 128) blocks. "fwd" runs under torch.no_grad
(Inductor's inference graph); "fwdbwd" is the training forward graph plus the backward graph
AOTAutograd splits off, both compiled by Inductor, for fixed random output cotangents.

Inductor's code comes from `torch._inductor.config.trace` (what TORCH_COMPILE_DEBUG=1 turns
on): one folder per compiled graph with output_code.py, fx_graph_readable.py and the IR
before and after fusion. Each launch in output_code.py's `call` function is one row of the
launch table (launch_table): a generated kernel (named after the aten ops it fused), an extern
kernel (GEMMs) or an aten fallback, with the bytes it reads and writes; the graph's input sizes
come from the same file's `get_args`.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from jaxgpt_tools.common.timing import timed
from jaxgpt_tools.fusion.artifacts import stored
from jaxgpt_tools.fusion.byte_model import TORCH_BYTES
from jaxgpt_tools.fusion.xla import (
    FWDBWD_RETURNS,
    LAYOUTS,
    MODES,
    PARTS,
    Compiled,
    Deadline,
    Shape,
    Timing,
    program_name,
    run_programs,
)


def _numel(dims: str) -> int:
    """Elements of a tensor whose sizes are written "4, 8" (empty: a scalar, 1)."""
    return math.prod(int(d) for d in dims.split(",") if d.strip())


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


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call's argument text (up to its closing paren)."""
    args, depth, current = [], 0, ""
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        if char == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        args.append(current.strip())
    return args


def _pointer_roles(source: str) -> list[str]:
    """'read' / 'written' / 'both' / '' (not a buffer) for each parameter of a generated kernel,
    by Inductor's names: in_ptr (read), out_ptr (written), in_out_ptr (both), a GEMM template's
    arg_A / arg_B (read); C++ kernels name them in `kernel(...)`, Triton kernels in their `def`."""
    signature = (re.search(r'extern "C"\s+void\s+kernel\((.*?)\)', source, re.DOTALL)
                 or re.search(r"^def \w+\((.*?)\):", source, re.MULTILINE | re.DOTALL))
    roles = []
    for param in _split_args(signature.group(1)) if signature else []:
        # A Triton parameter may carry an annotation (XBLOCK : tl.constexpr); C++ types hold "::".
        words = re.findall(r"\w+", re.split(r"(?<!:):(?!:)", param)[0])
        name = words[-1] if words else ""
        roles.append("both" if name.startswith("in_out_ptr") else "read" if name.startswith(("in_ptr", "arg_"))
                     else "written" if name.startswith("out_ptr") else "")
    return roles


GEMM_EXTERNS = ("mm", "bmm", "addmm", "baddbmm", "_mm_plus_mm")


def launch_table(code: str, input_types: dict[str, tuple[float, float, str]]) -> list[dict[str, Any]]:
    """One row per launch in an Inductor output_code.py's `call`, in order: name; kind (a
    generated kernel's pointwise / reduction / persistent_reduction / template, `extern` for an
    extern call, `fallback` for an aten op); whether it is a GEMM; bytes it reads and writes, each
    buffer argument whole and once (a `reinterpret_tensor` view as its view), and those buffers as
    [elements, dtype] (`reads`, `writes`). A generated kernel's arguments are read or written by
    their names in its signature (in_ptr, out_ptr, in_out_ptr); an extern call writes its `out=`;
    `input_types`: (elements, bytes each, dtype) of the graph's inputs and constants."""
    sources = dict(re.findall(r"^(\w+) = async_compile\.\w+\((.*?)^'''", code, re.MULTILINE | re.DOTALL))
    sources.update({name: "" for name in re.findall(r"^(\w+) = async_compile\.\w+\(", code, re.MULTILINE) if name not in sources})
    sizes: dict[str, tuple[float, float, str]] = dict(input_types)  # name -> (elements, bytes per element, dtype)
    unknown = (0, 0, "")

    def buffer(arg: str) -> tuple[float, float, str]:
        view = re.match(r"reinterpret_tensor\((\w+), \(([\d, ]*)\)", arg)
        if view:
            _, each, dtype = sizes.get(view.group(1), unknown)
            return _numel(view.group(2)), each, dtype
        return sizes.get(arg.strip(), unknown)

    def moved(args) -> tuple[float, list]:
        found = [buffer(a) for a in dict.fromkeys(args)]
        found = [b for b in found if b[1]]
        return sum(n * each for n, each, _ in found), [[n, dtype] for n, _, dtype in found]

    rows: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}  # fallback results not yet sized
    for line in _call_body(code):
        alloc = re.match(r"\s*(buf\d+) = empty_strided_\w+\(\(([\d, ]*)\), \([\d, ]*\), torch\.(\w+)\)", line)
        if alloc:
            sizes[alloc.group(1)] = (_numel(alloc.group(2)), TORCH_BYTES.get(alloc.group(3), 4), alloc.group(3))
            continue
        alias = re.match(r"\s*(buf\d+) = reinterpret_tensor\((\w+), \(([\d, ]*)\)", line)
        if alias:
            _, each, dtype = sizes.get(alias.group(2), unknown)
            sizes[alias.group(1)] = (_numel(alias.group(3)), each, dtype)
            continue
        reuse = re.match(r"\s*(buf\d+) = (buf\d+|\w+); del \2\s+# reuse", line)
        if reuse:
            sizes[reuse.group(1)] = sizes.get(reuse.group(2), unknown)
            continue
        plain = re.match(r"\s*(buf\d+) = (buf\d+)\s*$", line)
        if plain and plain.group(2) in pending:  # a fallback's result under another name
            pending[plain.group(1)] = pending[plain.group(2)]
            continue
        checked = re.match(r"\s*assert_size_stride\((buf\d+), \(([\d, ]*)\)", line)
        if checked and checked.group(1) in pending and checked.group(1) not in sizes:
            _size_result(pending.pop(checked.group(1)), checked.group(1), _numel(checked.group(2)), sizes)
            continue
        row = _launch(line, sources, moved)
        if row is not None:
            rows.append(row)
            result = re.match(r"\s*(buf\d+) = torch\.ops\.", line)
            if result and result.group(1) not in sizes:  # an aten fallback's result: sized by its assert
                pending[result.group(1)] = row
    return rows


def _size_result(row: dict[str, Any], name: str, numel: int, sizes: dict[str, tuple[float, float, str]]) -> None:
    """An aten fallback's result, sized by the assert_size_stride after it, in its first input's dtype."""
    dtype = row["reads"][0][1] if row["reads"] else "float32"
    sizes[name] = (numel, TORCH_BYTES.get(dtype, 4), dtype)
    row["written"] += numel * TORCH_BYTES.get(dtype, 4)
    row["writes"].append([numel, dtype])


def _launch(line: str, sources: dict[str, str], moved) -> dict[str, Any] | None:
    """The launch row of one line of `call` (None: not a launch); `moved(args)` sizes buffers."""
    call = re.match(r"\s*(?:(buf\d+) = )?(extern_kernels\.\w+|torch\.ops\.\w+\.\w+(?:\.\w+)?|\w+)(?:\.run)?\((.*)", line)
    if not call:
        return None
    result, target, rest = call.groups()
    args = _split_args(rest)
    positional = [a for a in args if not re.match(r"\w+=", a)]
    keywords = dict(a.split("=", 1) for a in args if re.match(r"\w+=", a))
    if target.startswith("extern_kernels."):
        kind, name = "extern", target.split(".", 1)[1]
        reads, writes = positional, [keywords.get("out", "")] + ([result] if result else [])
        gemm = name in GEMM_EXTERNS
    elif target.startswith("torch.ops."):
        kind, name = "fallback", target[len("torch.ops."):]
        reads, writes = positional, [result] if result else []
        gemm = bool(re.search(r"\.(mm|bmm|addmm|matmul|linear|_linear_pointwise)\b", name))
    elif target in sources:
        kind, name = _kernel_kind(target, sources[target]), target
        # not strict: a Triton kernel's trailing constexpr parameters (XBLOCK...) take no argument
        roles_of = list(zip(positional, _pointer_roles(sources[target]), strict=False))
        reads = [a for a, role in roles_of if role in ("read", "both")]
        writes = [a for a, role in roles_of if role in ("written", "both")]
        gemm = kind == "template"
    else:
        return None
    (read, read_buffers), (written, written_buffers) = moved(reads), moved([w for w in writes if w])
    return {"name": name, "kind": kind, "gemm": gemm, "read": read, "written": written,
            "reads": read_buffers, "writes": written_buffers}


def read_output_code(code: str, input_types: dict[str, tuple[float, float, str]]) -> dict[str, Any]:
    """Counts of one Inductor output_code.py, from its launch_table (kept as `launches`):
    generated kernel launches by kind, extern launches, aten fallbacks, GEMMs, and the bytes
    every launch reads and writes once."""
    launches = launch_table(code, input_types)
    generated = [row for row in launches if row["kind"] not in ("extern", "fallback")]
    return {
        "kernels": len(launches),
        "generated_kernels": len(generated),
        "generated_by_kind": dict(Counter(row["kind"] for row in generated)),
        "distinct_generated_kernels": len({row["name"] for row in generated}),
        "extern_kernels": dict(Counter(row["name"] for row in launches if row["kind"] == "extern")),
        "gemm_kernels": sum(row["gemm"] for row in launches),
        "aten_fallbacks": dict(Counter(row["name"] for row in launches if row["kind"] == "fallback")),
        "kernel_traffic_bytes": sum(row["read"] + row["written"] for row in launches),
        "launches": launches,
    }


def input_types(code: str) -> dict[str, tuple[float, float, str]]:
    """(elements, bytes per element, dtype) of each input of an Inductor graph, from its output
    code's `get_args()` (`name = rand_strided((sizes), (strides), device=..., dtype=torch.T)`),
    and of each constant (a frozen parameter: `name = None  # device(...) torch.T (sizes) ...`)."""
    found = re.findall(r"^\s+(\w+) = rand_strided\(\(([\d, ]*)\), \([\d, ]*\), device='\w+(?::\d+)?', dtype=torch\.(\w+)\)",
                       code, re.MULTILINE)
    found += re.findall(r"^(\w+) = None  # device\([^)]*\) torch\.(\w+) \(([\d, ]*)\)", code, re.MULTILINE)
    out: dict[str, tuple[float, float, str]] = {}
    for name, first, second in found:
        dims, dtype = (first, second) if not first.isidentifier() else (second, first)
        out[name] = (_numel(dims), TORCH_BYTES.get(dtype, 4), dtype)
    return out


def read_code(code: str) -> dict[str, Any]:
    """read_output_code with the graph's input sizes from the same output code."""
    return read_output_code(code, input_types(code))


def read_trace_dir(trace_dir: Path) -> list[dict[str, Any]]:
    """One record per compiled graph under an Inductor debug trace folder, ordered as compiled."""
    graphs = []
    for folder in sorted(trace_dir.rglob("output_code.py"), key=lambda p: p.stat().st_mtime):
        kind = re.search(r"_(inference|forward|backward)_", folder.parent.name)
        graphs.append({"graph": kind.group(1) if kind else folder.parent.name, "output_code": stored(folder),
                       **read_code(folder.read_text())})
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
    total["kernel_table"] = [{**row, "graph": graph["graph"]} for graph in graphs for row in graph["launches"]]
    return total


def inductor_record(part: str, mode: str, layout: str, shape: Shape, *, variant: str, options: dict[str, Any] | None,
                    trace_dir: Path, device: str, compile_s: float, flops: float | None) -> dict[str, Any]:
    """The record of one compiled program from its Inductor trace folder: counts summed over its
    graphs, each graph's output code, and (QKV path) the launch table."""
    graphs = read_trace_dir(trace_dir)
    record: dict[str, Any] = {
        "compiler": "inductor", "device": device, "part": part, "mode": mode, "layout": layout,
        "shape": asdict(shape), "variant": variant, "inductor_options": options or {},
        "attention": None if part == "qkv" else ("sdpa" if device == "cpu" else "flex"),
        "returns": FWDBWD_RETURNS if mode == "fwdbwd" else "outputs", "compile_s": compile_s, "flops": flops,
        **_merge_counts(graphs),
        "graphs": [{key: g[key] for key in ("graph", "kernels", "generated_kernels", "gemm_kernels", "output_code")}
                   for g in graphs],
    }
    if part != "qkv":
        del record["kernel_table"]
    return record


def project_flat(attn, h, ve):
    """torch_ref's CausalSelfAttention.project (separate weights) with its input flattened to
    (T, D) before the three linears, the 2-D input Inductor's batch_linear_lhs pass takes
    (group_batch_fusion.is_linear_node_can_be_fused); the rest as project does it."""
    import torch.nn.functional as F

    from torch_ref.layers import norm

    seq_len = h.shape[1]
    flat = h.reshape(seq_len, -1)
    q, k, v = (F.linear(flat, w.type_as(flat)).view(1, seq_len, attn.num_heads, -1) for w in (attn.q_w, attn.k_w, attn.v_w))
    v = attn.lambdas[0] * v + attn.lambdas[1] * ve.view_as(v)
    eps = attn.config.lineage.rms_norm_eps
    return attn.rotary(norm(q, eps)), attn.rotary(norm(k, eps)), v


def build_module(part: str, layout: str, shape: Shape, device: str = "cpu", flat: bool = False):
    """(callable, module, example inputs) of torch_ref's QKV path (CausalSelfAttention.project:
    q, k, v (1, T, H, Dh); `flat`: project_flat, separate weights only) or block; bf16
    activations on `device`. The block's attention is torch_ref's for that device: SDPA with a
    dense (T, T) mask on a CPU, compiled flex attention with the record's BlockMask on CUDA."""
    import torch

    from torch_ref import masks as masks_lib
    from torch_ref.model import Block
    from torch_ref.rotary import rotary_tables

    torch.manual_seed(0)
    cos, sin = rotary_tables(shape.model_dim // shape.num_heads, shape.seq_len)
    block = Block(shape.model_dim, shape.num_heads, True, cos, sin, layout).to(device)
    generator = torch.Generator().manual_seed(0)
    act = lambda *dims: torch.randn(*dims, generator=generator).bfloat16().to(device)  # noqa: E731
    h, ve = act(1, shape.seq_len, shape.model_dim), act(shape.seq_len, shape.model_dim)
    if part == "qkv":
        assert block.attn is not None  # built with attention
        if flat:
            if layout != "separate":
                raise ValueError("the flattened-input QKV path has separate weights only")
            return functools.partial(project_flat, block.attn), block.attn, (h, ve)
        return block.attn.project, block.attn, (h, ve)
    tokens = torch.zeros(shape.seq_len, dtype=torch.int64, device=device)
    tokens[0] = 50256  # one document
    docs = masks_lib.document_ids(tokens)
    lists = masks_lib.truncate_to_window(masks_lib.block_lists(docs), shape.window_blocks)
    build = masks_lib.allowed_mask_from_block_lists if device == "cpu" else masks_lib.build_block_mask
    mask = build(lists, docs)
    return block, block, (h, ve, act(1, shape.seq_len, shape.model_dim), mask)


def _outputs(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


def flops(fn, module, inputs, mode: str) -> float:
    """FLOPs of the eager program by torch.utils.flop_counter: GEMMs and the attention ops it has
    formulas for (the CUDA flash / efficient / cuDNN kernels, not the CPU SDPA kernel)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        if mode == "fwd":
            with torch.no_grad():
                fn(*inputs)
        else:
            outs = _outputs(fn(*inputs))
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
    module.zero_grad(set_to_none=True)
    for x in inputs:
        if isinstance(x, torch.Tensor):
            x.grad = None
    return float(counter.get_total_flops())


def device_label(device: str) -> str:
    """"cpu", or the CUDA device's kind ("h100" for an H100)."""
    import torch

    if device == "cpu":
        return "cpu"
    name = torch.cuda.get_device_name()
    return "h100" if "H100" in name else name.lower().replace(" ", "-")


def compile_program(part: str, mode: str, layout: str, shape: Shape, *, out_dir: Path, device: str = "cpu",
                    options: dict[str, Any] | None = None, variant: str = "default", flat: bool = False,
                    alone: bool = False) -> Compiled:
    """torch.compile one program on `device` (with Inductor config `options`, a variant named
    `variant`), run it (which compiles) and read Inductor's trace in out_dir/<program>/; returns
    its record, runner and profiler. `alone`: a program compiled without its other layout."""
    import torch
    import torch._dynamo
    import torch._functorch.config
    import torch._inductor.config as inductor_config

    name = program_name(part, mode, layout, shape, variant)
    trace_dir = out_dir / name
    fn, module, inputs = build_module(part, layout, shape, device, flat)
    if mode == "fwdbwd":
        inputs = tuple(x.requires_grad_(True) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                       for x in inputs)
    generator = torch.Generator().manual_seed(1)
    cotangents: list = []
    if layout == LAYOUTS[0] or alone:
        # A fresh start per pair of layouts, never between them: a reset would make the pair's first
        # program compile again, outside its config patch, when it is timed. The other layout's
        # module is a new instance, so it compiles anew rather than hitting this cache. A program
        # alone (an untimed ablation) starts afresh too: Dynamo would reuse the default's graph.
        torch._dynamo.reset()
    # No cache hits: a graph loaded from Inductor's or AOTAutograd's cache writes no trace.
    no_cache = {"fx_graph_cache": False, "fx_graph_remote_cache": False}
    with inductor_config.patch({"trace.enabled": True, "trace.debug_dir": str(trace_dir), **no_cache, **(options or {})}), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        compiled = torch.compile(fn)

        def run() -> None:
            if mode == "fwd":
                with torch.no_grad():
                    compiled(*inputs)
            else:
                outs = _outputs(compiled(*inputs))
                if not cotangents:  # fixed cotangents, drawn once
                    cotangents.extend(torch.randn(o.shape, generator=generator).to(o) for o in outs)
                torch.autograd.backward(outs, cotangents)
                module.zero_grad(set_to_none=True)
                for x in inputs:
                    if isinstance(x, torch.Tensor):
                        x.grad = None
            if device != "cpu":
                torch.cuda.synchronize()

        compile_s, _ = timed(run)
    record = inductor_record(part, mode, layout, shape, variant=variant, options=options, trace_dir=trace_dir,
                             device=device_label(device), compile_s=compile_s, flops=flops(fn, module, inputs, mode))
    record["torch_threads"] = torch.get_num_threads()
    return Compiled(record, run, lambda trace_dir: profile_kernels(run, trace_dir, cuda=device != "cpu"))


def profile_kernels(run, trace_dir: Path, *, cuda: bool, calls: int = 3) -> dict[str, Any]:
    """Each kernel's mean time per call over `calls` calls under torch.profiler (GPU kernels on
    CUDA; on a CPU, torch's operators and Inductor's kernels as the profiler records them)."""
    from torch.profiler import ProfilerActivity, profile

    from jaxgpt_tools.gpu.trace_kernels import rank

    run()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            run()
    trace_dir.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_dir / "trace.json"))
    ranking = rank(trace_dir / "trace.json")
    return {"kind": ranking.kind, "calls": calls,
            "kernels": [{"name": k.name, "ms_per_call": k.total_ms / calls, "launches_per_call": k.calls / calls}
                        for k in ranking.kernels]}


def run(shapes: list[Shape], *, out_dir: Path, timing: Timing | None, log=print, parts=PARTS, modes=MODES,
        device: str = "cpu", options: dict[str, Any] | None = None, variant: str = "default",
        profile_dir: Path | None = None, layouts=LAYOUTS, flat: bool = False,
        deadline: Deadline | None = None) -> list[dict[str, Any]]:
    compile_one = functools.partial(compile_program, out_dir=out_dir, device=device, options=options, variant=variant,
                                    flat=flat, alone=tuple(layouts) != tuple(LAYOUTS))
    return run_programs(compile_one, shapes, timing=timing, profile_dir=profile_dir, log=log, parts=parts, modes=modes,
                        layouts=layouts, deadline=deadline, variant=variant)
