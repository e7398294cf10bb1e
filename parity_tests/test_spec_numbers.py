"""Numbers that a shared misreading would change in both frameworks alike, held against the spec
itself where the records' own code cannot show them on a CPU (its bf16 paths are patched to fp32 in
the record-code column): each framework's value against the spec's statement, not against the other's."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from jaxgpt import layers as jax_layers
from torch_ref import layers as torch_layers


def test_the_as_run_rmsnorm_eps_on_bf16_inputs_is_bf16s_machine_epsilon():
    """LINEAGE.md 2.1: builds before the eps fix add the input type's epsilon, bf16's 2^-7, to the
    fp32 mean of squares; fp32 inputs (and the rule "fp32") keep fp32's 2^-23."""
    assert jax_layers.norm_eps(jnp.bfloat16, "as_run") == float(jnp.finfo(jnp.bfloat16).eps) == 2.0**-7
    assert torch_layers.norm_eps(torch.bfloat16, "as_run") == torch.finfo(torch.bfloat16).eps == 2.0**-7
    for eps in (jax_layers.norm_eps(jnp.float32, "as_run"), torch_layers.norm_eps(torch.float32, "as_run"),
                jax_layers.norm_eps(jnp.bfloat16, "fp32"), torch_layers.norm_eps(torch.bfloat16, "fp32")):
        assert eps == float(np.finfo(np.float32).eps) == 2.0**-23


def test_the_as_run_norm_of_a_small_bf16_vector_adds_2_to_the_minus_7():
    """The eps shows where the mean square is near it: x = 2^-4 everywhere (mean square 2^-8, exact in
    bf16) becomes 2^-4 / sqrt(2^-8 + 2^-7) = 1 / sqrt(3) under "as_run", rounded to bf16, in both frameworks."""
    x = np.full((1, 8), 2.0**-4, np.float32)
    expected = (x / np.sqrt(2.0**-8 + 2.0**-7)).astype(jnp.bfloat16).astype(np.float32)
    ours = np.asarray(jax_layers.norm(jnp.asarray(x, jnp.bfloat16), "as_run").astype(jnp.float32))
    theirs = torch_layers.norm(torch.from_numpy(x).bfloat16(), "as_run").float().numpy()
    np.testing.assert_array_equal(ours, expected)
    np.testing.assert_array_equal(theirs, expected)
