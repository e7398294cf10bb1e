"""The one place where Pallas names that moved between JAX releases are resolved.

jax 0.10 and 0.11 both expose `jax.experimental.pallas.triton.CompilerParams`; older releases
called it `TritonCompilerParams`. Without Triton compiler params a GPU `pallas_call` is lowered
through Mosaic GPU, which this kernel is not written for.
"""

from __future__ import annotations

import inspect

import jax
from jax.experimental import pallas as pl  # noqa: F401  (re-exported for the kernels)
from jax.experimental.pallas import triton as pl_triton

TritonParams = getattr(pl_triton, "CompilerParams", None) or getattr(pl_triton, "TritonCompilerParams")


def triton_params(num_warps: int, num_stages: int) -> object:
    """Compiler params that select the Triton lowering on GPUs."""
    return TritonParams(num_warps=num_warps, num_stages=num_stages)


def default_interpret() -> bool:
    """Interpret (run the kernel as plain JAX) unless the default backend is a GPU."""
    return jax.default_backend() != "gpu"


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
