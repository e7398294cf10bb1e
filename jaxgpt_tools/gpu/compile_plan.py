"""Compile jaxgpt's training step for a GPU that is not here (XLA compile-only devices).

The jax CUDA plugin (`pip install -e .[gpu-aot]`, pinned to the core jax version) can compile
for a GPU described by a `GpuTargetConfigProto` text with no GPU and no driver present
(docs/spec/GPU_COMPILE_NOTES.md). This module builds compile-only devices from the
description files in devices/ beside this module (written from each device's published facts), lowers the
record's full training step (forward, backward, pmean, Muon, Adam, donation: train.compile_steps)
with abstract inputs on them, and reads the plan: memory (XLA's memory_analysis) and, through
jaxgpt_tools.common.hlo.plan_counts, fusions, GEMMs, FP8 GEMMs, collectives.

Caveat carried by every number: compiled without a GPU, no autotuning (GEMM tiles are XLA's
placeholders; a real GPU autotunes and may pick other kernels). Plans are not timings.

JAX must be imported with JAX_PLATFORMS=cpu and JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 when no GPU is
present: `compile_only_environment()` sets both; scripts/gpu_plan.py calls it before importing jax.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxgpt.kernels.flash_attention import compiled_kernels
from jaxgpt.muon import Collective
from jaxgpt_tools.common import hlo as hlo_lib

DEVICES_DIR = Path(__file__).parent / "devices"
CAVEAT = "compiled without a GPU, no autotuning"
# Published dense bf16 tensor-core rate (FLOP/s) and memory bandwidth (bytes/s) of each device,
# the two ceilings of the roofline bound.
PEAKS = {"h100": (989e12, 3.35e12), "h200": (989e12, 4.8e12), "a100": (312e12, 2.039e12)}
PARTS = ("step", "block", "attention", "head")


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
    collective_bytes: dict[str, int]
    custom_calls: dict[str, int]
    flops: float | None  # XLA's HLO cost analysis; custom calls (cuBLAS, Pallas kernels) count 0
    bytes_accessed: float | None
    compile_s: float
    caveat: str = CAVEAT
    hlo: str = field(default="", repr=False)
    fp8_scales: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # see jaxgpt_tools.common.hlo.fp8_scales

    @property
    def roofline_ms(self) -> dict[str, float] | None:
        """Lower bound of the program's time from its FLOPs and bytes at the device's peaks:
        max(compute, memory); None without a cost analysis or known peaks."""
        if self.flops is None or self.device not in PEAKS:
            return None
        flop_rate, byte_rate = PEAKS[self.device]
        compute, memory = 1e3 * self.flops / flop_rate, 1e3 * (self.bytes_accessed or 0) / byte_rate
        return {"bound": round(max(compute, memory), 2), "compute": round(compute, 2), "memory": round(memory, 2)}

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
            "fp8_gemms": self.fp8_gemms, "fp8_scales": self.fp8_scales, "collectives": self.collectives,
            "collective_mib": {k: round(v / 2**20, 2) for k, v in self.collective_bytes.items()},
            "while_loops": self.while_loops, "flops": self.flops, "bytes_accessed": self.bytes_accessed,
            "roofline_ms": (self.roofline_ms or {}).get("bound"), "roofline": self.roofline_ms,
            "custom_calls": self.custom_calls, "compile_s": round(self.compile_s, 1), "caveat": self.caveat,
        }


def plan_train_step(preset: Any, device: str = "h100", num_devices: int = 1,
                    compiler_options: dict[str, Any] | None = None, muon_collective: Collective = "all_gather") -> Plan:
    """Compile the record's training step (train.compile_steps) for `num_devices` compile-only
    devices of the named kind, each holding batch_tokens / num_devices tokens of `preset`.
    `muon_collective` ("all_gather", the record's, or "psum") is how Muon shares its
    Newton-Schulz results between the devices (muon.orthogonalize_split)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxgpt import model as model_lib
    from jaxgpt import params as params_lib
    from jaxgpt import step as train_lib

    mesh = compile_only_mesh(device, num_devices, train_lib.AXIS)
    model = nnx.eval_shape(lambda: model_lib.GPT(train_lib.device_model_config(preset, num_devices), rngs=nnx.Rngs(0)))
    graph, abstract_params = params_lib.ModelGraph.split(model)
    optimizer, compiled_steps = train_lib.prepare_steps(preset, mesh, graph, muon_collective=muon_collective)
    rep, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P(train_lib.AXIS))
    spec = lambda x, sharding: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)
    params = jax.tree.map(lambda x: spec(x, rep), abstract_params)
    opt_state = jax.tree.map(lambda x: spec(x, rep), jax.eval_shape(optimizer.init, abstract_params))
    tokens = jax.ShapeDtypeStruct((preset.train.batch_tokens // preset.train.seq_len, preset.train.seq_len), jnp.int32,
                                  sharding=batch)
    window = jax.ShapeDtypeStruct((), jnp.int32, sharding=rep)
    with compiled_kernels():  # a pallas backend lowers to Triton for the GPU, not to its CPU interpreter
        lowered = compiled_steps.train.lower(params, opt_state, tokens, tokens, window)
    return _compile_plan(lowered, device, num_devices, compiler_options)


def _compile_plan(lowered: Any, device: str, num_devices: int, compiler_options: dict[str, Any] | None) -> Plan:
    import time

    from jaxgpt import compat

    start = time.perf_counter()
    compiled = lowered.compile(compiler_options or {})
    compile_s = time.perf_counter() - start
    memory = compiled.memory_analysis()
    cost = compat.hlo_cost_analysis(compiled) or {}
    hlo = compiled.as_text()
    return Plan(
        device=device, num_devices=num_devices,
        temp_bytes=memory.temp_size_in_bytes, argument_bytes=memory.argument_size_in_bytes,
        output_bytes=memory.output_size_in_bytes, alias_bytes=memory.alias_size_in_bytes,
        flops=cost.get("flops"), bytes_accessed=cost.get("bytes accessed"), compile_s=compile_s, hlo=hlo,
        **hlo_lib.plan_counts(hlo),
    )


def plan_part(preset: Any, part: str, device: str = "h100", compiler_options: dict[str, Any] | None = None) -> Plan:
    """Compile one part of the record's step, forward + backward, for one compile-only device:
    "attention" (the attention call alone on (1, T, H, Dh) bf16 q, k, v), "block" (layer 0's
    block: attention, value-embedding mix, MLP) or "head" (FP8 head + soft-capped CE over T
    tokens, chunked as the preset says). T is the preset's sequence length."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax.sharding import SingleDeviceSharding

    from jaxgpt import attention as attention_lib
    from jaxgpt import layers as layers_lib
    from jaxgpt import loss as loss_lib
    from jaxgpt import masks
    from jaxgpt import model as model_lib
    from jaxgpt import rotary as rotary_lib
    from jaxgpt import step as train_lib

    if part not in PARTS or part == "step":
        raise ValueError(f"unknown part {part!r}; choose one of {PARTS[1:]} (or plan_train_step for the step)")
    mesh = compile_only_mesh(device, 1, train_lib.AXIS)
    on_device = SingleDeviceSharding(mesh.devices.flat[0])
    config = train_lib.device_model_config(preset, 1)
    seq, dim, heads, head_dim = preset.train.seq_len, config.model_dim, config.num_heads, config.head_dim
    act = layers_lib.compute_dtype(config)
    spec = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=on_device)
    tokens = spec((1, seq), jnp.int32)
    window = spec((), jnp.int32)

    def grads_of(loss, *args):
        with compiled_kernels():
            return jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(args) - 2)))).lower(*args)

    if part == "attention":
        def loss(q, k, v, tokens, window):
            out = attention_lib.attention(q, k, v, masks.document_ids(tokens), window,
                                          backend=config.attention_backend, max_window_blocks=config.max_window_blocks)
            return out.astype(jnp.float32).sum()

        qkv = spec((1, seq, heads, head_dim), act)
        lowered = grads_of(loss, qkv, qkv, qkv, tokens, window)
    elif part == "head":
        def loss(x, w, tokens, window):  # type: ignore[misc]  # each part's own loss, one per branch
            del window
            return loss_lib.head_loss(x, w, tokens.reshape(-1), use_fp8=config.dtype_policy == "record",
                                       cap=config.logit_cap, temperature=config.logit_cap_temperature,
                                       chunk_tokens=config.loss_chunk_tokens, fp8_grad_scale=config.fp8_grad_scale)

        lowered = grads_of(loss, spec((seq, dim), act), spec((config.padded_vocab_size, dim), jnp.float32), tokens, window)
    else:
        block = nnx.eval_shape(lambda: model_lib.Block(config, 0, rngs=nnx.Rngs(0)))
        graph, abstract = nnx.split(block)
        cos, sin = (jnp.asarray(t) for t in rotary_lib.rotary_tables(head_dim, config.rope_max_len))

        def loss(params, x, ve, tokens, window):
            out = nnx.merge(graph, params)(x, ve, x, masks.document_ids(tokens), window, (cos[:seq], sin[:seq]))
            return out.astype(jnp.float32).sum()

        params = jax.tree.map(lambda a: spec(a.shape, a.dtype), abstract)
        x = spec((1, seq, dim), act)
        lowered = grads_of(loss, params, x, x, tokens, window)
    return _compile_plan(lowered, device, 1, compiler_options)


def plan_preset(preset_name: str = "record", device: str = "h100", num_devices: int = 1, *, part: str = "step",
                attention: str | None = None, batch_tokens: int | None = None, muon_collective: Collective = "all_gather",
                hlo_dir: str | Path = "runs/gpu_plan") -> dict[str, Any]:
    """The plan of a named preset as `scripts/gpu_plan.py` prints it: the step (or one `part`) on
    `num_devices` compile-only devices, each with batch_tokens / num_devices tokens (default: the
    preset's batch_tokens / 8 per device, at least one sequence); the optimized HLO written into
    `hlo_dir`. `attention` None: the preset's backend as it resolves on a GPU ("auto" -> the kernel)."""
    compile_only_environment()
    from jaxgpt import config as cfg
    from jaxgpt import presets
    from jaxgpt.lineage import attention_backend

    preset = presets.get_preset(preset_name)
    batch_tokens = batch_tokens or max(preset.train.batch_tokens // 8, preset.train.seq_len) * num_devices
    with compiled_kernels():  # the plan is a GPU's: the preset's "auto" resolves as it would there
        attention = attention or attention_backend(preset.model)
    model = cfg.replace(preset.model, attention_backend=attention)
    preset = cfg.Preset(model=model, optim=preset.optim,
                        train=cfg.replace(preset.train, batch_tokens=batch_tokens, devices=num_devices))
    if part == "step":
        plan = plan_train_step(preset, device, num_devices, muon_collective=muon_collective)
    else:
        plan = plan_part(preset, part, device)
    hlo_dir = Path(hlo_dir)
    hlo_dir.mkdir(parents=True, exist_ok=True)
    suffix = "" if muon_collective == "all_gather" else f"_muon_{muon_collective}"
    hlo_path = hlo_dir / (f"{preset_name}_{attention}_{device}_x{plan.num_devices}_"
                          f"{'train_step' + suffix if part == 'step' else part}.hlo.txt")
    hlo_path.write_text(plan.hlo)
    return {"preset": preset_name, "part": part, "attention": attention,
            "batch_tokens": batch_tokens if part == "step" else preset.train.seq_len,
            **({"muon_collective": muon_collective} if part == "step" else {}), **plan.summary(), "hlo": str(hlo_path)}
