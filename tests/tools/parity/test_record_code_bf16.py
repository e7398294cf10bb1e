"""jaxgpt_tools.parity.record_code_bf16's parts that need no record log: the floor's reordering and
its inverse, and the FlexAttention reading (record_standins.kernel_attention). (The records' own
bf16 code against both frameworks: parity_tests/test_record_code_bf16.py.)"""

from __future__ import annotations

import numpy as np
import torch

from jaxgpt_tools.parity import record_code_bf16 as bf16
from jaxgpt_tools.parity.record_standins import kernel_attention


def _state(d: int = 8) -> dict:
    g = torch.Generator().manual_seed(0)
    shapes = {"embed.weight": (16, d), "value_embeds.embed.0.weight": (16, d), "blocks.0.attn.c_q.weight": (d, d),
              "blocks.0.attn.c_proj.weight": (d, d), "blocks.0.mlp.c_fc.weight": (4 * d, d),
              "blocks.0.mlp.c_proj.weight": (d, 4 * d), "blocks.0.lambdas": (2,), "lm_head.weight": (16, d)}
    return {key: torch.randn(shape, generator=g) for key, shape in shapes.items()}


def test_permutation_moves_the_stream_and_hidden_axes_and_undoes_exactly():
    state = _state()
    axes = bf16.permutation_axes(state, 8, seed=1)
    assert "value_embeds.embed.0.weight" not in axes and "blocks.0.lambdas" not in axes  # head space, scalars
    assert sorted(a for a, _ in axes["blocks.0.mlp.c_proj.weight"]) == [0, 1]  # stream rows and hidden columns
    moved = bf16.permuted(state, axes)
    assert not torch.equal(moved["embed.weight"], state["embed.weight"])
    back = bf16.permuted({k: v.numpy() for k, v in moved.items()}, axes, inverse=True)
    assert all(np.array_equal(back[k], state[k].numpy()) for k in state)
    # the MLP is the same function: relu(x Wfc^T)^2 Wproj^T with x's coordinates permuted alike
    # In float64, so that the check is of the function, not of fp32's summation order (which moved
    # one element of an unseeded draw by 2.5e-5 relative).
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    mlp = lambda s, x: (torch.relu(x @ s["blocks.0.mlp.c_fc.weight"].double().T).square()  # noqa: E731
                        @ s["blocks.0.mlp.c_proj.weight"].double().T)
    stream = axes["embed.weight"][0][1]
    torch.testing.assert_close(mlp(moved, x[:, stream]), mlp(state, x)[:, stream], rtol=1e-12, atol=1e-12)  # float64 order


def test_kernel_attention_is_the_masked_softmax_in_fp32_and_rounds_bf16_once():
    draws = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 8, generator=draws) for _ in range(3))
    allowed = torch.ones(16, 16, dtype=torch.bool).tril()
    reference = torch.softmax((q @ k.transpose(-2, -1) * 0.12).masked_fill(~allowed, float("-inf")), -1) @ v
    torch.testing.assert_close(kernel_attention(q, k, v, allowed, 0.12), reference, rtol=1e-5, atol=1e-6)  # fp32 order
    out = kernel_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), allowed, 0.12)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), reference, rtol=2e-2, atol=2e-2)  # bf16 inputs and probabilities
