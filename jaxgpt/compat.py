"""Version shims: the one place where jaxgpt reaches past JAX's public API or follows names that
moved between releases (jax 0.10 and 0.11)."""

from __future__ import annotations

import inspect

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
