"""Version shims: the one place where jaxgpt reaches past JAX's public API (jax 0.10 and 0.11)."""

from __future__ import annotations

import jax


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
