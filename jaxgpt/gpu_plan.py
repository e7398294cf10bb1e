"""Compile jaxgpt's training step for a GPU that is not here (XLA compile-only devices).

The jax CUDA plugin (`pip install -e .[gpu-aot]`, pinned to the core jax version) can compile
for a GPU described by a `GpuTargetConfigProto` text with no GPU and no driver present
(/work/shared/spec/GPU_COMPILE_NOTES.md). This module builds compile-only devices from the
description files in jaxgpt/devices/ (written from each device's published facts), lowers the
record's full training step (forward, backward, pmean, Muon, Adam, donation: train.compile_steps)
with abstract inputs on them, and reads the plan: memory, fusions, GEMMs, FP8 GEMMs, collectives.

Caveat carried by every number: compiled without a GPU, no autotuning (GEMM tiles are XLA's
placeholders; a real GPU autotunes and may pick other kernels). Plans are not timings.

JAX must be imported with JAX_PLATFORMS=cpu and JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 when no GPU is
present: `compile_only_environment()` sets both; scripts/gpu_plan.py calls it before importing jax.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEVICES_DIR = Path(__file__).parent / "devices"
CAVEAT = "compiled without a GPU, no autotuning"


def compile_only_environment() -> None:
    """Environment the CUDA plugin needs to load with no GPU; call before importing jax. Keeps
    JAX_PLATFORMS if the caller set it (on a GPU machine, set JAX_PLATFORMS=cuda to run there)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")


def device_names() -> list[str]:
    return sorted(p.stem for p in DEVICES_DIR.glob("*.txtpb"))


def target_config(device: str) -> str:
    path = DEVICES_DIR / f"{device.lower()}.txtpb"
    if not path.is_file():
        raise ValueError(f"unknown device {device!r}; choose one of {device_names()} (files in {DEVICES_DIR})")
    return path.read_text()


def plugin_available() -> bool:
    """Whether the jax CUDA plugin is installed (compile-only devices need it)."""
    import importlib.util

    return any(importlib.util.find_spec(name) is not None for name in ("jax_cuda13_plugin", "jax_cuda12_plugin"))


def compile_only_mesh(device: str, num_devices: int, axis: str):
    """A 1-D mesh of `num_devices` compile-only devices of the named kind."""
    from jax.experimental import topologies

    if not plugin_available():
        raise RuntimeError("the jax CUDA plugin is not installed: pip install -e '.[gpu-aot]' (make gpu-plan does)")
    topology = topologies.get_topology_desc(
        platform="cuda", target_config=target_config(device), topology=f"1x1x{num_devices}")
    return topologies.make_mesh(topology, (num_devices,), (axis,))


@dataclass(frozen=True)
class Plan:
    """What XLA planned for one device: bytes from memory_analysis, counts from the optimized HLO."""

    device: str
    num_devices: int
    temp_bytes: int
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    fusions: dict[str, int]
    triton_gemms: int
    cublas_gemms: int
    fp8_gemms: list[str]
    collectives: dict[str, int]
    while_loops: int
    roofline_ms: float | None  # None: XLA's cost analysis is not exposed for compile-only devices
    compile_s: float
    caveat: str = CAVEAT
    hlo: str = field(default="", repr=False)

    @property
    def total_bytes(self) -> int:
        """Peak the step needs on one device: temp + arguments + outputs not aliased to arguments."""
        return self.temp_bytes + self.argument_bytes + self.output_bytes - self.alias_bytes

    def summary(self) -> dict[str, Any]:
        gib = 1024**3
        return {
            "device": self.device, "num_devices": self.num_devices,
            "total_gib": round(self.total_bytes / gib, 3), "temp_gib": round(self.temp_bytes / gib, 3),
            "argument_gib": round(self.argument_bytes / gib, 3), "output_gib": round(self.output_bytes / gib, 3),
            "alias_gib": round(self.alias_bytes / gib, 3),
            "fusions": self.fusions, "triton_gemms": self.triton_gemms, "cublas_gemms": self.cublas_gemms,
            "fp8_gemms": self.fp8_gemms, "collectives": self.collectives, "while_loops": self.while_loops,
            "roofline_ms": self.roofline_ms, "compile_s": round(self.compile_s, 1), "caveat": self.caveat,
        }


_FP8 = re.compile(r"f8e[45]m[23]\w*")


def _parameter_types(hlo: str) -> dict[str, list[str]]:
    """name -> element types of the parameters of each computation of an HLO module text."""
    types = {}
    for header in re.finditer(r"^(?:ENTRY )?%?([\w.\-]+) \((.*)\) -> .*\{$", hlo, re.MULTILINE):
        types[header.group(1)] = re.findall(r": (\w+)\[", header.group(2))
    return types


def read_hlo(hlo: str) -> dict[str, Any]:
    """Counts from an optimized GPU HLO text: fusions by kind, Triton/cuBLAS GEMMs, FP8 GEMMs
    (the FP8 operand types of each GEMM fusion or cuBLAS call that takes FP8 operands),
    collectives, while loops. An FP8 GEMM here is one whose operands reach the kernel as FP8;
    inside a Triton GEMM fusion XLA may still convert them before the dot."""
    parameters = _parameter_types(hlo)
    fusions: Counter[str] = Counter()
    triton, cublas, fp8 = 0, 0, []
    for line in hlo.splitlines():
        kind = re.search(r" fusion\(.*kind=(\w+)", line)
        if kind:
            fusions[kind.group(1)] += 1
        if " fusion(" in line and re.search(r'"kind":"__triton\w*gemm', line):
            triton += 1
            called = re.search(r"calls=%?([\w.\-]+)", line)
            types = sorted(t for t in parameters.get(called.group(1), []) if _FP8.fullmatch(t)) if called else []
            if types:
                fp8.append(" x ".join(types))
        if "custom_call_target=\"__cublas" in line:
            cublas += 1
            operands = line.split("custom-call(", 1)[1] if "custom-call(" in line else ""
            types = sorted(_FP8.findall(operands))
            if types:
                fp8.append(" x ".join(types))
    collectives = Counter(m.group(1) for m in re.finditer(
        r"= \S+ (all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\(", hlo))
    return {"fusions": dict(fusions), "triton_gemms": triton, "cublas_gemms": cublas, "fp8_gemms": fp8,
            "collectives": dict(collectives), "while_loops": len(re.findall(r"= \S+ while\(", hlo))}


def plan_train_step(preset: Any, device: str = "h100", num_devices: int = 1,
                    compiler_options: dict[str, Any] | None = None) -> Plan:
    """Compile the record's training step (train.compile_steps) for `num_devices` compile-only
    devices of the named kind, each holding batch_tokens / num_devices tokens of `preset`."""
    import time

    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax.sharding import NamedSharding, PartitionSpec as P

    from jaxgpt import model as model_lib
    from jaxgpt import train as train_lib

    mesh = compile_only_mesh(device, num_devices, train_lib.AXIS)
    model = nnx.eval_shape(lambda: model_lib.GPT(train_lib.device_model_config(preset, num_devices), rngs=nnx.Rngs(0)))
    graph, abstract_params = model_lib.ModelGraph.split(model)
    optimizer = train_lib.make_optimizer(preset)
    compiled_steps = train_lib.compile_steps(mesh, graph, optimizer)
    rep, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P(train_lib.AXIS))
    spec = lambda x, sharding: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)
    params = jax.tree.map(lambda x: spec(x, rep), abstract_params)
    opt_state = jax.tree.map(lambda x: spec(x, rep), jax.eval_shape(optimizer.init, abstract_params))
    tokens = jax.ShapeDtypeStruct((preset.train.batch_tokens // preset.train.seq_len, preset.train.seq_len), jnp.int32,
                                  sharding=batch)
    window = jax.ShapeDtypeStruct((), jnp.int32, sharding=rep)
    start = time.perf_counter()
    compiled = compiled_steps.train.lower(params, opt_state, tokens, tokens, window).compile(compiler_options or {})
    compile_s = time.perf_counter() - start
    memory = compiled.memory_analysis()
    hlo = compiled.as_text()
    return Plan(
        device=device, num_devices=num_devices,
        temp_bytes=memory.temp_size_in_bytes, argument_bytes=memory.argument_size_in_bytes,
        output_bytes=memory.output_size_in_bytes, alias_bytes=memory.alias_size_in_bytes,
        roofline_ms=None, compile_s=compile_s, hlo=hlo, **read_hlo(hlo),
    )
