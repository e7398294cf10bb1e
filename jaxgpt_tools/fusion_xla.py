"""The XLA side of the fusion study: jaxgpt's attention layer and one block, compiled and read
(the library of `scripts/fusion_xla.py`).

Programs (jaxgpt_tools/fusion_inductor.py names them the same way for Inductor):
  part "attn":  the attention layer (QKV projection, split, value-embedding mix, QK RMSNorm,
                rotary, attention, output projection) on a normed input h (1, T, D);
  part "block": one whole block (x0 mix, norm, attention, norm, MLP, residuals);
  mode "fwd":   the forward; "fwdbwd": forward and the gradients w.r.t. parameters and inputs
                for a fixed output cotangent (jax.vjp);
  layout "merged" (the record's one (3D, D) GEMM) or "separate" (three (D, D) GEMMs).
Activations are bf16 and weights fp32 cast at use (the record's policy); one document; the
window is min(14, T / 128) blocks. Imports no torch, so it runs in the GPU compile-only venv.
"""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from jaxgpt.hlo import hlo_counts
from jaxgpt_tools.artifacts import repo_relative_paths
from jaxgpt_tools.timing import time_calls

PARTS = ("attn", "block")
MODES = ("fwd", "fwdbwd")
LAYOUTS = ("merged", "separate")


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
}


def program_name(part: str, mode: str, layout: str, shape: Shape) -> str:
    return f"{part}_{mode}_{layout}_{shape.name}"


def build_program(part: str, mode: str, layout: str, shape: Shape):
    """(function, example args as ShapeDtypeStructs, concrete-args maker). The function takes
    (params, h, ve[, x0], [cotangent]) and returns the output (fwd) or all gradients (fwdbwd)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from jaxgpt import config as cfg
    from jaxgpt import model as model_lib

    config = cfg.ModelConfig(model_dim=shape.model_dim, num_heads=shape.num_heads, qkv_layout=layout,
                             max_window_blocks=shape.window_blocks, rope_max_len=max(shape.seq_len, 128))
    block = model_lib.Block(config, 0, rngs=nnx.Rngs(0))
    module = block.attn if part == "attn" else block
    graphdef, params = nnx.split(module)
    cos, sin = model_lib.rotary_tables(config.head_dim, shape.seq_len)
    rotary = (jnp.asarray(cos), jnp.asarray(sin))
    window = shape.window_blocks

    def forward(params, h, ve, x0=None):
        doc_ids = jnp.zeros(h.shape[:2], jnp.int32)
        layer = nnx.merge(graphdef, params)
        if part == "attn":
            return layer(h, ve, doc_ids, window, rotary)
        return layer(h, ve, x0, doc_ids, window, rotary)

    act = jax.ShapeDtypeStruct((1, shape.seq_len, shape.model_dim), jnp.bfloat16)
    inputs = [act, act] if part == "attn" else [act, act, act]
    abstract_params = jax.tree.map(lambda p: jax.ShapeDtypeStruct(p.shape, p.dtype), params)
    if mode == "fwd":
        fn, args = forward, [abstract_params, *inputs]
    else:
        def fn(params, *rest):
            *acts, cotangent = rest
            _, pull = jax.vjp(forward, params, *acts)
            return pull(cotangent)

        args = [abstract_params, *inputs, act]

    def concrete():
        rng = np.random.default_rng(0)
        values = [params] + [jnp.asarray(rng.standard_normal(a.shape), a.dtype) for a in args[1:]]
        return values

    return fn, args, concrete


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


def compile_program(part: str, mode: str, layout: str, shape: Shape, *, device: str | None, out_dir: Path,
                    repeats: int) -> dict[str, Any]:
    """Compile one program on this CPU (device None; then also timed) or for a compile-only GPU
    (device "h100": not run); write its optimized HLO to out_dir and return its record."""
    import jax

    fn, args, concrete = build_program(part, mode, layout, shape)
    start = time.perf_counter()
    if device is None:
        compiled = jax.jit(fn).lower(*args).compile()
    else:
        from jax.sharding import NamedSharding, PartitionSpec as P

        from jaxgpt import gpu_plan

        mesh = gpu_plan.compile_only_mesh(device, 1, "x")
        placed = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, P())), args)
        compiled = jax.jit(fn).lower(*placed).compile()
    compile_s = time.perf_counter() - start
    hlo = repo_relative_paths(compiled.as_text())  # its FileNames table holds the sources' absolute paths
    name = program_name(part, mode, layout, shape)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.hlo.txt").write_text(hlo)
    record: dict[str, Any] = {
        "compiler": "xla", "device": device or jax.devices()[0].platform, "part": part, "mode": mode, "layout": layout,
        "shape": asdict(shape), "compile_s": compile_s, **cost(compiled), **memory(compiled), **hlo_counts(hlo),
        "hlo": str(out_dir / f"{name}.hlo.txt"),
    }
    if device is None and repeats > 0:  # runs where it was compiled (this CPU, or a real GPU)
        values = concrete()
        record["median_ms"] = time_calls(lambda: jax.block_until_ready(compiled(*values)), repeats)["median_ms"]
    return record


def run_programs(compile_one: Callable[..., dict[str, Any]], shapes: list[Shape], *, log=print, parts=PARTS,
                 modes=MODES) -> list[dict[str, Any]]:
    """compile_one(part, mode, layout, shape) for every program, in the study's order, logged."""
    records = []
    for shape in shapes:
        for part in parts:
            for mode in modes:
                for layout in LAYOUTS:
                    record = compile_one(part, mode, layout, shape)
                    log(f"{record['compiler']} {record['device']} {program_name(part, mode, layout, shape)}: "
                        f"{record['kernels']} kernels, {record['gemm_kernels']} GEMMs, compile {record['compile_s']:.1f} s"
                        + (f", {record['median_ms']:.2f} ms" if "median_ms" in record else ""))
                    records.append(record)
    return records


def run(shapes: list[Shape], *, device: str | None, out_dir: Path, repeats: int, log=print,
        parts=PARTS, modes=MODES) -> list[dict[str, Any]]:
    compile_one = functools.partial(compile_program, device=device, out_dir=out_dir, repeats=repeats)
    return run_programs(compile_one, shapes, log=log, parts=parts, modes=modes)
