"""Merged and separate QKV weights compute the same q, k, v: the fusion study's equality check, in
fp32 on this CPU, for jaxgpt (jit-compiled by XLA) and torch_ref (compiled by Inductor).

Both layouts get the same numbers (separate weights are the merged (3, D, D) tensor's slices) and
the same fp32 inputs; the check reports the largest absolute difference between their q, k and v
against the largest magnitude, and whether it is within TOLERANCE (relative): a merged GEMM and
three GEMMs may sum a row's products in another order, so equality is to rounding, not bits.
"""

from __future__ import annotations

from typing import Any

TOLERANCE = 1e-5  # relative to the outputs' largest magnitude: fp32 rounding of a D-term sum


def _verdict(diff: float, scale: float) -> dict[str, Any]:
    return {"max_abs_diff": diff, "max_abs": scale, "tolerance": TOLERANCE, "equal": diff <= TOLERANCE * max(scale, 1e-30)}


def xla_check(model_dim: int, num_heads: int, seq_len: int) -> dict[str, Any]:
    """jaxgpt's project under jax.jit, fp32 policy, merged against separate."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from jaxgpt import config as cfg
    from jaxgpt import model as model_lib
    from jaxgpt import rotary as rotary_lib

    outputs = []
    rng = np.random.default_rng(0)
    h = jnp.asarray(rng.standard_normal((1, seq_len, model_dim)), jnp.float32)
    ve = jnp.asarray(rng.standard_normal((1, seq_len, model_dim)), jnp.float32)
    for layout in ("merged", "separate"):  # same key: the same numbers in both layouts
        config = cfg.ModelConfig(model_dim=model_dim, num_heads=num_heads, qkv_layout=layout, dtype_policy="fp32",
                                 max_window_blocks=max(1, seq_len // 128), rope_max_len=max(seq_len, 128))
        attn = model_lib.Block(config, 0, rngs=nnx.Rngs(0)).attn
        cos, sin = rotary_lib.rotary_tables(config.head_dim, seq_len)
        rotary = (jnp.asarray(cos), jnp.asarray(sin))
        outputs.append(jax.jit(lambda a, x, e: a.project(x, e, rotary))(attn, h, ve))
    diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(*outputs, strict=True))
    return _verdict(diff, max(float(jnp.max(jnp.abs(a))) for a in outputs[0]))


def inductor_check(model_dim: int, num_heads: int, seq_len: int) -> dict[str, Any]:
    """torch_ref's project under torch.compile (Inductor, this CPU), fp32, merged against separate
    with the merged weight's slices copied into the separate one."""
    import torch

    from torch_ref.model import Block
    from torch_ref.rotary import rotary_tables

    torch.manual_seed(0)
    cos, sin = rotary_tables(model_dim // num_heads, seq_len)
    merged = Block(model_dim, num_heads, True, cos, sin, "merged")
    separate = Block(model_dim, num_heads, True, cos, sin, "separate")
    assert merged.attn is not None and separate.attn is not None  # both built with attention
    with torch.no_grad():
        for i, name in enumerate(("q_w", "k_w", "v_w")):
            getattr(separate.attn, name).copy_(merged.attn.qkv_w[i])
        separate.attn.get_parameter("lambdas").copy_(merged.attn.get_parameter("lambdas"))  # the variant's own
    generator = torch.Generator().manual_seed(0)
    h = torch.randn(1, seq_len, model_dim, generator=generator)
    ve = torch.randn(seq_len, model_dim, generator=generator)
    torch._dynamo.reset()
    with torch.no_grad():
        outs = [torch.compile(attn.project)(h, ve) for attn in (merged.attn, separate.attn)]
    diff = max(float((a - b).abs().max()) for a, b in zip(*outs, strict=True))
    return _verdict(diff, max(float(a.abs().max()) for a in outs[0]))


def check(compiler: str, model_dim: int, num_heads: int, seq_len: int) -> dict[str, Any]:
    """The equality check of one compiler ("xla" or "inductor") at one shape, with the shape."""
    run = {"xla": xla_check, "inductor": inductor_check}.get(compiler)
    if run is None:
        raise ValueError(f"unknown compiler {compiler!r}: xla or inductor")
    return {"compiler": compiler, "model_dim": model_dim, "num_heads": num_heads, "seq_len": seq_len,
            **run(model_dim, num_heads, seq_len)}
