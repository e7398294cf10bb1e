"""The XLA side of the fusion study: jaxgpt's QKV path and one block, compiled and read (the
library of `scripts/fusion_xla.py`).

Programs (jaxgpt_tools/fusion/inductor.py builds the same ones from torch_ref):
  part "qkv":   the QKV path alone, cut at the attention kernel's inputs: projection (one merged
                or three separate GEMMs), split, value mix (lambdas, value embedding), QK RMSNorm,
                rotary; `CausalSelfAttention.project` on a normed input h (1, T, D) and ve;
                returns q, k, v (1, T, H, Dh). Attention itself is left out, so it costs the
                same (nothing) on both layouts and both compilers.
  part "block": one whole block (x0 mix, norms, attention, MLP, residuals), the context row;
                its attention is the backend "auto" picks where it is compiled (the Pallas kernel
                for a GPU, compile-only included; the blocked kernel on a CPU);
  mode "fwd":   the forward; "fwdbwd": forward and backward, returning the outputs and the
                gradients w.r.t. the program's parameters and inputs for a fixed output
                cotangent (jax.vjp), what a training step keeps, as Inductor's graphs do;
  layout "merged" (the record's one (3D, D) GEMM) or "separate" (three (D, D) GEMMs).
Activations are bf16 and weights fp32 cast at use (the record's policy); one document; the
window is min(14, T / 128) blocks. Imports no torch, so it runs in the GPU compile-only venv.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, cast

from jaxgpt_tools.common.artifacts import repo_relative_paths
from jaxgpt_tools.common.hlo import hlo_counts, kernel_table, kernels, parse_module
from jaxgpt_tools.common.timing import timed
from jaxgpt_tools.fusion.artifacts import stored

PARTS = ("qkv", "block")
MODES = ("fwd", "fwdbwd")
LAYOUTS = ("merged", "separate")
COMPILE_ONLY = "h100-compile-only"  # the device label of XLA's compile-only H100
# What a forward+backward program returns in both compilers (a record's `returns`): what a training
# step keeps of the path (Inductor's forward graph returns the outputs, its backward the gradients).
FWDBWD_RETURNS = "outputs and gradients"


@dataclass(frozen=True)
class Shape:
    name: str
    model_dim: int
    num_heads: int
    seq_len: int

    @property
    def window_blocks(self) -> int:
        return min(14, self.seq_len // 128)


SHAPES = {
    "tiny": Shape("tiny", 64, 2, 128),  # CI
    "small": Shape("small", 128, 2, 256),
    "record_cpu": Shape("record_cpu", 768, 6, 2048),  # the record's width, a CPU-sized T
    "record_gpu": Shape("record_gpu", 768, 6, 65536),  # the record's per-device sequence
    # The GPU leg's QKV path around the dot merger's switch at D 768 (T 21,461 by the 64 MiB rule,
    # FUSION.md's sweep): well below it, either side of it.
    "record_t16384": Shape("record_t16384", 768, 6, 16384),
    "record_t21376": Shape("record_t21376", 768, 6, 21376),
    "record_t21504": Shape("record_t21504", 768, 6, 21504),
}


class Compiled(NamedTuple):
    """A compiled program: its record, a call that runs it once and blocks (None where it was
    only compiled), and a profiler (trace folder -> kernel times; None likewise)."""
    record: dict[str, Any]
    run: Callable[[], Any] | None
    profile: Callable[[Path], dict[str, Any]] | None


@dataclass(frozen=True)
class Timing:
    """How long to time each program: repeats chosen so that they take about `target_s`,
    within [min_repeats, max_repeats], after the compiling call and one warm call. A timing is
    *idle* when the 1-minute load average, before and after it, is at most this process's cores
    plus `idle_margin` (its own threads count in the load; on 2 cores with 1 pinned, 1.5: the
    other core mostly free); before each pair it waits up to `idle_wait_s` for that."""
    target_s: float = 3.0
    min_repeats: int = 5
    max_repeats: int = 101
    idle_margin: float = 0.5
    idle_wait_s: float = 0.0


@dataclass
class Deadline:
    """When a run starts no new program (time.perf_counter() seconds; None: never), so that a run
    inside one device command ends with what it made written rather than killed with nothing; the
    programs it did not start, by name, in `not_started`."""
    at: float | None = None
    not_started: list[str] = field(default_factory=list)

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        return cls(None if seconds is None else time.perf_counter() + seconds)

    def passed(self) -> bool:
        return self.at is not None and time.perf_counter() >= self.at


def load_limit(timing: Timing) -> float:
    """The highest 1-minute load average an idle timing allows."""
    return len(os.sched_getaffinity(0)) + timing.idle_margin


def wait_for_idle(timing: Timing, poll_s: float = 5.0) -> float:
    """Wait up to timing.idle_wait_s for the 1-minute load average to fall to load_limit;
    returns the load average then."""
    deadline = time.monotonic() + timing.idle_wait_s
    load = os.getloadavg()[0]
    while load > load_limit(timing) and time.monotonic() < deadline:
        time.sleep(poll_s)
        load = os.getloadavg()[0]
    return load


def program_name(part: str, mode: str, layout: str, shape: Shape, variant: str = "default") -> str:
    return f"{part}_{mode}_{layout}_{shape.name}" + ("" if variant == "default" else f"_{variant}")


def measure(runs: list[Callable[[], Any]], timing: Timing) -> list[dict[str, Any]]:
    """Time compiled programs (each call blocks until its result is ready) interleaved, one call
    of each per round, so that a shared machine's changing load falls on all of them alike: one
    warm call each sizes the rounds; per program the median, quartiles and extremes of its timed
    calls, with the 1-minute load average before and after and whether the timing was idle."""
    load_before = wait_for_idle(timing)
    probe = max(timed(run)[0] for run in runs)
    repeats = max(timing.min_repeats, min(timing.max_repeats, math.ceil(timing.target_s / max(probe, 1e-6))))
    runs_ms: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for run, times in zip(runs, runs_ms, strict=True):
            times.append(1e3 * timed(run)[0])
    load_after = os.getloadavg()[0]
    out = []
    for times in runs_ms:
        quartiles = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
        out.append({"median_ms": statistics.median(times), "p25_ms": quartiles[0], "p75_ms": quartiles[2],
                    "min_ms": min(times), "max_ms": max(times), "repeats": len(times),
                    "load_1m": [load_before, load_after], "interleaved_with": len(runs) - 1,
                    "load_limit": load_limit(timing), "idle": max(load_before, load_after) <= load_limit(timing)})
    return out


def kernel_rows(hlo: str) -> list[dict[str, Any]]:
    """jaxgpt_tools.common.hlo.kernel_table with each kernel's operand types and result type (layouts
    dropped): what its bytes are made of, e.g. a GEMM reading an f32 copy of h."""
    module = parse_module(hlo)
    shapes = module.shapes()
    bare = lambda shape: re.sub(r"\{[^}]*\}", "", shape)  # noqa: E731
    rows = kernel_table(hlo)
    for row, (_, inst, _) in zip(rows, kernels(module), strict=True):
        row["operands"] = [bare(shapes.get(name, "")) for name in dict.fromkeys(inst.operands)]
        row["result"] = bare(inst.shape)
    return rows


def build_program(part: str, mode: str, layout: str, shape: Shape):
    """(function, example args as ShapeDtypeStructs, concrete-args maker, attention backend or
    None). The function takes (params, h, ve[, x0][, cotangent]) and returns the output (fwd) or
    (the output, the gradients of params and inputs) (fwdbwd: FWDBWD_RETURNS)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from jaxgpt import attention as attention_lib
    from jaxgpt import config as cfg
    from jaxgpt import model as model_lib
    from jaxgpt import rotary as rotary_lib

    config = cfg.ModelConfig(model_dim=shape.model_dim, num_heads=shape.num_heads, qkv_layout=cast(cfg.QKVLayout, layout),
                             max_window_blocks=shape.window_blocks, rope_max_len=max(shape.seq_len, 128),
                             attention_backend="auto")
    block = model_lib.Block(config, 0, rngs=nnx.Rngs(0))
    cos, sin = rotary_lib.rotary_tables(config.head_dim, shape.seq_len)
    rotary = (jnp.asarray(cos), jnp.asarray(sin))
    window = shape.window_blocks
    act = jax.ShapeDtypeStruct((1, shape.seq_len, shape.model_dim), jnp.bfloat16)
    if part == "qkv":
        # c_proj is not on the path: kept out of the parameters so that it gets no (zero) gradient.
        graphdef, unused, params = nnx.split(block.attn, nnx.PathContains("c_proj"), ...)  # type: ignore[misc]  # 2 filters: 3 parts

        def forward_qkv(params, h, ve):
            return nnx.merge(graphdef, unused, params).project(h, ve, rotary)

        forward: Callable[..., Any] = forward_qkv

        inputs = [act, act]
        head = jax.ShapeDtypeStruct((1, shape.seq_len, shape.num_heads, config.head_dim), jnp.bfloat16)
        cotangent: Any = (head, head, head)
        backend = None
    else:
        graphdef, params = nnx.split(block)

        def forward_block(params, h, ve, x0):
            doc_ids = jnp.zeros(h.shape[:2], jnp.int32)
            return nnx.merge(graphdef, params)(h, ve, x0, doc_ids, window, rotary)

        forward = forward_block

        inputs, cotangent = [act, act, act], act
        backend = attention_lib.resolve_backend(config.attention_backend)
    abstract_params = jax.tree.map(lambda p: jax.ShapeDtypeStruct(p.shape, p.dtype), params)
    if mode == "fwd":
        fn, args = forward, [abstract_params, *inputs]
    else:
        def fn(params, *rest):
            # What a training step keeps: the outputs (attention's q, k, v, or the block's output,
            # which the next layer reads) and the gradients of the parameters and inputs; without
            # the outputs XLA would drop their last kernels' writes, which Inductor's forward makes.
            *acts, cotangent = rest
            outputs, pull = jax.vjp(forward, params, *acts)
            return outputs, pull(cotangent)

        args = [abstract_params, *inputs, cotangent]

    def concrete():
        rng = np.random.default_rng(0)
        return [params] + jax.tree.map(lambda a: jnp.asarray(rng.standard_normal(a.shape), a.dtype), args[1:])

    return fn, args, concrete, backend


def cost(compiled) -> dict[str, float]:
    """XLA's cost analysis: flops and bytes accessed (None where the backend has none)."""
    try:
        analysis = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - compile-only backends may not implement it
        return {}
    if isinstance(analysis, list):  # older jax: one dict per computation
        analysis = analysis[0] if analysis else {}
    if not analysis:
        return {}
    return {"flops": float(analysis.get("flops", 0.0)), "bytes_accessed": float(analysis.get("bytes accessed", 0.0))}


def memory(compiled) -> dict[str, int]:
    analysis = compiled.memory_analysis()
    if analysis is None:
        return {}
    return {"temp_bytes": analysis.temp_size_in_bytes, "argument_bytes": analysis.argument_size_in_bytes,
            "output_bytes": analysis.output_size_in_bytes}


def device_label(device: str | None) -> str:
    """The results' name of where a program was compiled: `COMPILE_ONLY` for the compile-only
    H100, else this machine's jax backend ("cpu", or "gpu" with its device kind, e.g. "h100")."""
    if device is not None:
        return COMPILE_ONLY
    import jax

    first = jax.devices()[0]
    if first.platform == "cpu":
        return "cpu"
    return "h100" if "H100" in first.device_kind else first.device_kind.lower().replace(" ", "-")


def compile_program(part: str, mode: str, layout: str, shape: Shape, *, device: str | None, out_dir: Path,
                    compiler_options: dict[str, Any] | None = None, variant: str = "default") -> Compiled:
    """Compile one program on this machine (device None: it can then run) or for a compile-only
    GPU (device "h100"), with XLA `compiler_options` (an ablation, named `variant`); write its
    optimized HLO to out_dir and return its record, with its runner and profiler where it runs."""
    import jax

    from jaxgpt.kernels.flash_attention import compiled_kernels

    # For a compile-only GPU the Pallas attention lowers to Triton, not to its CPU interpreter.
    with compiled_kernels() if device is not None else contextlib.nullcontext():
        fn, args, concrete, backend = build_program(part, mode, layout, shape)
        if device is not None:
            from jax.sharding import NamedSharding
            from jax.sharding import PartitionSpec as P

            from jaxgpt_tools.gpu import compile_plan as gpu_plan

            on_device = NamedSharding(gpu_plan.compile_only_mesh(device, 1, "x"), P())
            args = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=on_device), args)
        compile_s, compiled = timed(lambda: jax.jit(fn).lower(*args).compile(compiler_options or {}))
    hlo = repo_relative_paths(compiled.as_text() or "")  # its FileNames table holds the sources' absolute paths
    name = program_name(part, mode, layout, shape, variant)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.hlo.txt").write_text(hlo)
    record: dict[str, Any] = {
        "compiler": "xla", "device": device_label(device), "part": part, "mode": mode, "layout": layout,
        "shape": asdict(shape), "variant": variant, "compiler_options": compiler_options or {}, "attention": backend,
        "returns": FWDBWD_RETURNS if mode == "fwdbwd" else "outputs",
        "compile_s": compile_s, **cost(compiled), **memory(compiled), **hlo_counts(hlo),
        "hlo": stored(out_dir / f"{name}.hlo.txt"),
    }
    if part == "qkv":
        record["kernel_table"] = kernel_rows(hlo)
    if device is not None:  # compile only: nothing to run
        return Compiled(record, None, None)
    values = concrete()
    run = lambda: jax.block_until_ready(compiled(*values))  # noqa: E731
    return Compiled(record, run, lambda trace_dir: profile_kernels(run, trace_dir))


def profile_kernels(run: Callable[[], Any], trace_dir: Path, calls: int = 5) -> dict[str, Any]:
    """Each kernel's mean time per call over `calls` calls under jax.profiler
    (jaxgpt_tools.gpu.trace_kernels: GPU kernels on a GPU, XLA's ops on a CPU)."""
    import jax

    from jaxgpt_tools.gpu.trace_kernels import rank

    run()
    with jax.profiler.trace(str(trace_dir)):
        for _ in range(calls):
            run()
    ranking = rank(trace_dir)
    return {"kind": ranking.kind, "calls": calls,
            "kernels": [{"name": k.name, "ms_per_call": k.total_ms / calls, "launches_per_call": k.calls / calls}
                        for k in ranking.kernels]}


def run_programs(compile_one: Callable[..., Compiled], shapes: list[Shape], *, timing: Timing | None = None,
                 profile_dir: Path | None = None, log=print, parts=PARTS, modes=MODES,
                 layouts=LAYOUTS, deadline: Deadline | None = None, variant: str = "default") -> list[dict[str, Any]]:
    """compile_one(part, mode, layout, shape) for every program, in the study's order, logged;
    the layouts of each program timed interleaved with `timing` where they run, and profiled
    per kernel into `profile_dir`; no pair started once `deadline` has passed (its names in
    `deadline.not_started`, each `variant`'s program name)."""
    records = []
    for shape in shapes:
        for part in parts:
            for mode in modes:
                if deadline is not None and deadline.passed():
                    deadline.not_started += [program_name(part, mode, layout, shape, variant) for layout in layouts]
                    continue
                pair = [compile_one(part, mode, layout, shape) for layout in layouts]
                runs = [c.run for c in pair if c.run is not None]
                if timing is not None and len(runs) == len(pair):
                    for compiled, measured in zip(pair, measure(runs, timing), strict=True):
                        compiled.record["time"] = measured
                for compiled in pair:
                    record = compiled.record
                    name = program_name(part, mode, record["layout"], shape, record.get("variant", "default"))
                    if profile_dir is not None and compiled.profile is not None:
                        record["kernel_times"] = compiled.profile(profile_dir / name)
                    timed = record.get("time")
                    log(f"{record['compiler']} {record['device']} {name}: {record['kernels']} kernels, "
                        f"{record['gemm_kernels']} GEMMs, compile {record['compile_s']:.1f} s"
                        + (f", {timed['median_ms']:.3g} ms median of {timed['repeats']}" if timed else ""))
                    records.append(record)
    return records


def run(shapes: list[Shape], *, device: str | None, out_dir: Path, timing: Timing | None, log=print,
        parts=PARTS, modes=MODES, compiler_options: dict[str, Any] | None = None, variant: str = "default",
        profile_dir: Path | None = None, deadline: Deadline | None = None) -> list[dict[str, Any]]:
    compile_one = functools.partial(compile_program, device=device, out_dir=out_dir,
                                    compiler_options=compiler_options, variant=variant)
    return run_programs(compile_one, shapes, timing=timing, profile_dir=profile_dir, log=log, parts=parts, modes=modes,
                        deadline=deadline, variant=variant)
