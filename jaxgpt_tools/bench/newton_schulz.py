"""Benchmark the record's Newton-Schulz work: one Muon step's NS over all hidden matrices,
on one device and split round-robin over the devices of a mesh (jaxgpt.muon's distributed path).
The library of `scripts/bench_ns.py` and of bench.py's `newton_schulz` suite.

On a CPU the split needs N virtual host devices, set before JAX starts, which is why this module
imports JAX only inside its functions. Virtual devices
share the machine's cores, so on a CPU the split shows the per-device work shrinking, not a
wall-clock speedup; on N real accelerators the per-device time is the one that counts.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxgpt_tools.common.timing import time_calls

# The record's Muon leaves (RECORD.md 5): (shape, count).
RECORD_SHAPES: tuple[tuple[tuple[int, ...], int], ...] = (
    ((3, 768, 768), 11),
    ((768, 768), 11),
    ((3072, 768), 12),
    ((768, 3072), 12),
)


def scaled_record_shapes(scale: int) -> tuple[tuple[tuple[int, ...], int], ...]:
    """RECORD_SHAPES with each matrix's two dims divided by `scale` (quick runs)."""
    return tuple((tuple(d // scale if i >= len(s) - 2 else d for i, d in enumerate(s)), n) for s, n in RECORD_SHAPES)


def bench_newton_schulz(
    shapes: Sequence[tuple[tuple[int, ...], int]] = RECORD_SHAPES,
    *,
    devices: int | None = None,
    repeats: int = 3,
    ns_steps: int = 5,
    dtype: str = "bf16",
    seed: int = 0,
) -> dict:
    """Time NS over `count` random matrices of each shape, single-device and split.

    Args:
      shapes: (shape, count) pairs; shapes are (..., rows, cols).
      devices: mesh size for the split run (None: all visible devices; 1 skips the split run).
      repeats: timed runs after the first (compiling) one; the median is reported.
      ns_steps, dtype: NS iterations and working dtype ("bf16" or "fp32").

    Returns:
      dict with the config, `single_s` / `split_s` (median seconds per full NS pass),
      `*_first_s` (compile + first run), the matrix counts, and FLOP totals
      (`flops_single` for one device doing all matrices; `flops_per_device_split` for one device
      of the split, padding slots included).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxgpt.muon import newton_schulz, orthogonalize_local

    ns_dtype = {"bf16": jnp.bfloat16, "fp32": jnp.float32}[dtype]
    available = jax.devices()
    world = len(available) if devices is None else devices
    if world > len(available):
        raise ValueError(f"asked for {world} devices but JAX sees {len(available)} ({available[0].platform})")
    rng = np.random.default_rng(seed)
    leaves = [
        jnp.asarray(rng.standard_normal(shape).astype(np.float32))
        for shape, count in shapes
        for _ in range(count)
    ]

    def ns(x):
        return newton_schulz(x, ns_steps, dtype=ns_dtype)

    single = jax.jit(lambda xs: orthogonalize_local(xs, ns))
    single_timing = time_calls(lambda: jax.block_until_ready(single(leaves)), repeats)
    result = {
        "backend": available[0].platform,
        "device_kind": available[0].device_kind,
        "dtype": dtype,
        "ns_steps": ns_steps,
        "shapes": [[list(shape), count] for shape, count in shapes],
        "matrices": len(leaves),
        "flops_single": sum(_ns_flops(x.shape, ns_steps) for x in leaves),
        "single_first_s": single_timing["first_s"],
        "single_s": single_timing["median_ms"] / 1e3,
        "devices": world,
    }
    if world > 1:
        result.update(_split_run(leaves, ns, available[:world], repeats=repeats, ns_steps=ns_steps))
        result["split_speedup"] = result["single_s"] / result["split_s"]
    return result


def _ns_flops(shape: tuple[int, ...], ns_steps: int) -> int:
    """Matmul FLOPs of `ns_steps` NS iterations on a leaf of `shape` (as NS orients it)."""
    import numpy as np

    from jaxgpt.muon import ns_shape

    *batch, rows, cols = ns_shape(shape)
    per_matrix = 2 * (rows * rows * cols + rows * rows * rows + rows * rows * cols)
    return int(np.prod(batch, dtype=np.int64)) * per_matrix * ns_steps


def _split_run(leaves: list, ns, devices: list, *, repeats: int, ns_steps: int) -> dict:
    """The same NS split round-robin over a mesh of `devices`: its timings, the FLOPs of one
    device's share (padding slots included) and the leaves' groups by shape."""
    import jax
    import numpy as np
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    from jaxgpt.muon import ns_shape, orthogonalize_split

    world = len(devices)
    mesh = Mesh(np.array(devices), ("data",))
    split = jax.jit(
        jax.shard_map(
            lambda xs: orthogonalize_split(xs, ns, "data", "psum"),
            mesh=mesh, in_specs=P(), out_specs=P(),
        )
    )
    split_timing = time_calls(lambda: jax.block_until_ready(split(leaves)), repeats)
    groups: dict[tuple[int, ...], int] = {}
    for x in leaves:
        groups[ns_shape(x.shape)] = groups.get(ns_shape(x.shape), 0) + 1
    return dict(
        split_first_s=split_timing["first_s"],
        split_s=split_timing["median_ms"] / 1e3,
        flops_per_device_split=sum(-(-n // world) * _ns_flops(shape, ns_steps) for shape, n in groups.items()),
        groups={"x".join(map(str, shape)): n for shape, n in groups.items()},
    )
