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


# jax 0.10 and 0.11 name it CompilerParams, older releases TritonCompilerParams (by getattr: the
# jax that mypy checks against has no such attribute). Without Triton compiler params a GPU
# pallas_call is lowered through Mosaic GPU instead.
_TritonParams = getattr(pallas_triton, "CompilerParams", None) or getattr(pallas_triton, "TritonCompilerParams")  # noqa: B009


def triton_params(num_warps: int, num_stages: int) -> Any:
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


def gpu_interpret_params(**params: Any) -> Any:
    """Parameters that run a Mosaic GPU kernel in its CPU interpreter (`interpret=` of
    `plgpu.kernel`): `InterpretGPUParams`, private in jax 0.10 and 0.11."""
    from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams

    return InterpretGPUParams(**params)


def reset_gpu_interpreter() -> None:
    """Clear Mosaic GPU's interpreter state; needed after a kernel raised inside it."""
    from jax._src.pallas.mosaic_gpu.interpret import gpu_callbacks

    gpu_callbacks.reset_gpu_interpret_mode_state()


def gpu_interpreter_races_found() -> bool:
    """Whether Mosaic GPU's interpreter saw a data race (with InterpretGPUParams(detect_races=True))."""
    from jax._src.pallas.mosaic_gpu.interpret import gpu_callbacks

    return bool(gpu_callbacks.get_races().races_found)


def cache_gpu_interpreter_compiles() -> None:
    """Compile each interpreted Mosaic GPU kernel body once, not once per thread and grid point.

    jax 0.10 and 0.11's GPU interpreter runs a CTA's threads by compiling the kernel's jaxpr
    afresh in every thread of every grid point (thread_map._run_jaxpr: a new `jax.jit` each
    time, and executables with host callbacks never enter the persistent cache): seconds per
    grid point for the attention kernels (docs/BENCHMARKS.md, Mosaic GPU section). This keeps one executable per (jaxpr,
    argument types); the threads run it concurrently, as they ran their own copies. Leaves
    the interpreter alone where its private entry point is not the one this wraps."""
    import threading

    from jax._src.pallas.mosaic.interpret import thread_map

    original = getattr(thread_map, "_run_jaxpr", None)
    if original is None or getattr(original, "jaxgpt_cached", False):
        return
    if list(inspect.signature(original).parameters) != ["jaxpr", "consts", "args"]:
        return
    executables: dict[tuple, list] = {}  # key -> [jaxpr (kept alive: its id is the key), executable, lock]
    guard = threading.Lock()

    def run_jaxpr(jaxpr, consts, *args):
        types = tuple((x.shape, str(x.dtype)) for x in jax.tree.leaves((consts, args)))
        with guard:
            entry = executables.setdefault((id(jaxpr), types), [jaxpr, None, threading.Lock()])
        with entry[2]:
            if entry[1] is None:
                run = lambda consts, *args: jax.core.eval_jaxpr(jaxpr, consts, *args)
                entry[1] = jax.jit(run).lower(consts, *args).compile()
        entry[1](consts, *args)

    run_jaxpr.jaxgpt_cached = True  # type: ignore[attr-defined]  # a marker on the patched function
    thread_map._run_jaxpr = run_jaxpr


def _varying_axes(x: Any) -> frozenset:
    """The shard_map mesh axes `x` varies over (jax 0.10/0.11: the aval's `mat.varying`;
    earlier releases: `vma`); empty outside shard_map."""
    aval = jax.typeof(x)
    if hasattr(aval, "mat"):
        return frozenset(aval.mat.varying)
    return frozenset(getattr(aval, "vma", ()))


def vary_like(x: jax.Array, like: jax.Array) -> jax.Array:
    """`x` typed as varying over the shard_map axes `like` varies over. Mosaic GPU kernels
    (`plgpu.kernel`) drop the varying-axes type of their outputs, which a custom_vjp under
    shard_map's check then refuses; the values are already per-device."""
    missing = _varying_axes(like) - _varying_axes(x)
    return jax.lax.pcast(x, tuple(sorted(missing)), to="varying") if missing else x


def mosaic_gpu_load(ref: Any, layout: Any) -> jax.Array:
    """`plgpu.load` of a whole SMEM ref into registers of `layout`: jax 0.10 takes the index as a
    required argument (`()` for the whole ref), jax 0.11 deprecates passing it at all."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    if inspect.signature(plgpu.load).parameters["idx"].default is inspect.Parameter.empty:
        return plgpu.load(ref, (), layout=layout)
    return plgpu.load(ref, layout=layout)  # type: ignore[call-arg]  # jax 0.11's signature (0.10's: above)


def distributed_client() -> Any:
    """The jax.distributed client of this process (its key-value store reaches every process
    through the coordinator), None before `jax.distributed.initialize`. jax 0.10 and 0.11 keep
    it private."""
    from jax._src import distributed

    return distributed.global_state.client


def save_has_ended(manager: Any) -> bool:
    """Whether an orbax CheckpointManager's last asynchronous save has ended (written or failed),
    found without waiting or asking the other processes: its finalize thread is gone. orbax's
    public `is_saving_in_progress` synchronises the processes; the thread is private in orbax
    0.11 and 0.12. False when this orbax keeps it elsewhere (the failure then surfaces at the
    next save or at the end instead)."""
    thread = getattr(manager, "_finalize_thread", None)
    if thread is None or not hasattr(thread, "map"):
        return False
    return bool(thread.map(lambda t: t is None or not t.is_alive()))
