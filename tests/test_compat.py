"""jaxgpt.compat: each version shim does what its callers rely on, on the installed jax."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from jaxgpt import compat


def test_all_gather_invariant_leaves_shard_map_replicated():
    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
    x = jnp.arange(8.0).reshape(2, 4)  # device d holds row d
    gather = jax.jit(jax.shard_map(lambda row: compat.all_gather_invariant(row, "data", tiled=True),
                                   mesh=mesh, in_specs=P("data"), out_specs=P()))
    np.testing.assert_array_equal(np.asarray(gather(x)), np.asarray(x))  # every device holds both rows


def test_triton_params_carry_the_launch_settings():
    params = compat.triton_params(num_warps=4, num_stages=2)
    assert (params.num_warps, params.num_stages) == (4, 2)


def test_out_struct_has_the_requested_shape_and_dtype():
    out = compat.out_struct((3, 5), jnp.bfloat16, jnp.zeros((2, 2), jnp.float32))
    assert isinstance(out, jax.ShapeDtypeStruct) and out.shape == (3, 5) and out.dtype == jnp.bfloat16


def test_hlo_cost_analysis_counts_a_matmuls_flops():
    x = jax.ShapeDtypeStruct((64, 32), jnp.float32)
    compiled = jax.jit(lambda a: a @ a.T).lower(x).compile()
    cost = compat.hlo_cost_analysis(compiled)
    assert cost["flops"] >= 2 * 64 * 64 * 32  # one multiply and one add per term


def test_vary_like_types_a_value_as_varying_over_the_mesh_axes_of_another():
    """What Mosaic GPU kernel outputs need under shard_map's check (plgpu.kernel drops the type)."""
    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
    seen = {}

    def local(x):
        fresh = jnp.zeros(x.shape)  # invariant: made inside the shard_map
        seen["before"], seen["after"] = compat._varying_axes(fresh), compat._varying_axes(compat.vary_like(fresh, x))
        return compat.vary_like(fresh, x) + x

    jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P("data"), out_specs=P("data")))(jnp.ones(4))
    assert seen == {"before": frozenset(), "after": frozenset({"data"})}
    outside = jnp.ones(3)
    assert compat.vary_like(outside, outside) is outside


def test_gpu_interpreter_runs_each_thread_of_a_mosaic_gpu_kernel_with_one_compile():
    """With cache_gpu_interpreter_compiles, the interpreter still runs every thread of every
    grid point: each writes its own (block, thread) entry."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    compat.cache_gpu_interpreter_compiles()
    compat.cache_gpu_interpreter_compiles()  # idempotent

    def body(out_ref):
        block, thread = jax.lax.axis_index("block"), jax.lax.axis_index("thread")
        out_ref[block, thread] = 10 * block + thread

    kernel = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((3, 2), jnp.int32), grid=(3,), grid_names=("block",),
                          num_threads=2, thread_name="thread", interpret=compat.gpu_interpret_params())
    compat.reset_gpu_interpreter()
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)()), [[0, 1], [10, 11], [20, 21]])
