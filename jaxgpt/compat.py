"""Version shims: the one place where jaxgpt reaches past JAX's public API or follows names that
moved between releases (jax 0.10 and 0.11)."""

from __future__ import annotations

import inspect
from typing import Any

import jax
from jax.experimental.pallas import triton as pallas_triton


def _all_gather_invariant():
    public = getattr(jax.lax, "all_gather_invariant", None)
    if public is not None:
        return public
    from jax._src.lax import parallel  # jax 0.10 keeps it private

    return parallel.all_gather_invariant


all_gather_invariant = _all_gather_invariant()
"""`jax.lax.all_gather` whose result shard_map types as replicated over the axis (Varying ->
Invariant), so it can leave a shard_map with out_specs P() under the default check_vma=True.
Same HLO all-gather; its transpose is a dynamic slice instead of a reduce-scatter."""


# jax 0.10 and 0.11 name it CompilerParams, older releases TritonCompilerParams. Without Triton
# compiler params a GPU pallas_call is lowered through Mosaic GPU instead.
_TritonParams = getattr(pallas_triton, "CompilerParams", None) or getattr(pallas_triton, "TritonCompilerParams")


def triton_params(num_warps: int, num_stages: int) -> object:
    """Pallas compiler params that select the Triton lowering on GPUs."""
    return _TritonParams(num_warps=num_warps, num_stages=num_stages)


def out_struct(shape: tuple[int, ...], dtype: object, like: jax.Array) -> jax.ShapeDtypeStruct:
    """A pallas_call output shape that varies across shard_map's mesh axes as `like` does.

    shard_map's varying-axes check needs it; jax 0.10 names the field `manual_axis_type`
    (the aval's `mat`), earlier releases `vma`.
    """
    aval = jax.typeof(like)
    fields = inspect.signature(jax.ShapeDtypeStruct).parameters
    for field, attribute in (("manual_axis_type", "mat"), ("vma", "vma")):
        if field in fields and hasattr(aval, attribute):
            return jax.ShapeDtypeStruct(shape, dtype, **{field: getattr(aval, attribute)})
    return jax.ShapeDtypeStruct(shape, dtype)


def hlo_cost_analysis(compiled: Any) -> dict[str, float] | None:
    """XLA's HLO cost analysis (flops, bytes accessed) of a compiled program's optimized module.

    `Compiled.cost_analysis()` returns None for the CUDA plugin's compile-only devices; the same
    analysis then runs over the optimized module through the CPU client (a private jaxlib entry
    point in jax 0.10 and 0.11). Custom calls (cuBLAS GEMMs, Pallas kernels) count no flops.
    """
    cost = compiled.cost_analysis()
    if cost:
        return cost[0] if isinstance(cost, (list, tuple)) else cost
    from jax._src.lib import _jax

    modules = compiled.runtime_executable().hlo_modules()
    return _jax.hlo_module_cost_analysis(jax.devices("cpu")[0].client, modules[0])


# jax 0.11 reads the GPU that Pallas's Triton lowering targets from the abstract mesh's device;
# jax 0.10 fell back to compute capability 9.0 when no GPU is present.
_H100 = ("NVIDIA H100", 132)  # device kind and SM count, as an H100 reports them


def lower_for_gpu(jitted: Any, *args: Any) -> Any:
    """`jitted.trace(*args).lower(lowering_platforms=("cuda",))` for an H100, without a GPU.

    `jitted`: a `jax.jit` function; `args`: its arguments (ShapeDtypeStructs will do). Kernels
    lower for compute capability 9.0 under jax 0.10 and 0.11 (0.11 takes the target device from
    the abstract mesh in place while tracing).
    """
    import importlib.util

    if importlib.util.find_spec("jax._src.pallas.triton.gpu_info") is None:  # jax 0.10
        return jitted.trace(*args).lower(lowering_platforms=("cuda",))
    device = jax.sharding.AbstractDevice(device_kind=_H100[0], num_cores=_H100[1], platform="gpu")
    mesh = jax.sharding.AbstractMesh((1,), ("gpu",), abstract_device=device)
    with jax.sharding.use_abstract_mesh(mesh):
        return jitted.trace(*args).lower(lowering_platforms=("cuda",))
