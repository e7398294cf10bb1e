"""Newton-Schulz where its constants show: a gradient of tiny norm (the eps added to the Frobenius
norm is then a large part of it), fp32 so that both frameworks agree to rounding (RECORD.md 5)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from jaxgpt.muon import newton_schulz
from torch_ref.muon import zeropower_via_newtonschulz5


@pytest.mark.parametrize("norm", [1e-6, 1e-7, 1e-5])
def test_a_tiny_gradient_is_normalised_by_its_norm_plus_1e_7(norm):
    """|G| of 1e-7..1e-5: X0 = G / (|G| + 1e-7) holds the eps at 10-50% of the norm, so any other
    eps (or one added to the squared norm) moves the orthogonalised output by far more than rounding."""
    G = np.random.default_rng(3).standard_normal((32, 48)).astype(np.float32)
    G *= np.float32(norm / np.linalg.norm(G))
    ours = np.asarray(newton_schulz(jnp.asarray(G), 5, dtype=jnp.float32))
    theirs = zeropower_via_newtonschulz5(torch.from_numpy(G), 5, dtype=torch.float32).numpy()
    assert np.linalg.norm(ours - theirs) <= 1e-5 * np.linalg.norm(theirs)
