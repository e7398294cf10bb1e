"""jaxgpt_tools.fusion.xla (scripts/fusion_xla.py): the programs of the fusion study (the whole study
runs in test_fusion_report.py)."""

from __future__ import annotations

import jax.numpy as jnp

from jaxgpt_tools.fusion import xla as fusion_xla


def test_window_is_the_records_fourteen_blocks_or_the_whole_sequence():
    assert fusion_xla.SHAPES["tiny"].window_blocks == 1
    assert fusion_xla.SHAPES["record_cpu"].window_blocks == 14 and fusion_xla.SHAPES["record_gpu"].window_blocks == 14


def test_programs_take_bf16_activations_and_fwdbwd_a_cotangent():
    shape = fusion_xla.SHAPES["tiny"]
    head = (1, 128, 2, 32)  # (1, T, H, Dh): q, k and v at the attention kernel's inputs
    for part, inputs, outputs in (("qkv", 2, [head] * 3), ("block", 3, [(1, 128, 64)])):
        _, fwd_args, _, _ = fusion_xla.build_program(part, "fwd", "merged", shape)
        _, bwd_args, _, _ = fusion_xla.build_program(part, "fwdbwd", "separate", shape)
        assert len(fwd_args) == 1 + inputs and len(bwd_args) == 2 + inputs  # params, activations[, cotangent]
        *activations, cotangent = bwd_args[1:]
        assert all(a.shape == (1, 128, 64) and a.dtype == jnp.bfloat16 for a in activations)
        cotangents = list(cotangent) if isinstance(cotangent, tuple) else [cotangent]
        assert [c.shape for c in cotangents] == outputs and all(c.dtype == jnp.bfloat16 for c in cotangents)
    assert fusion_xla.program_name("qkv", "fwd", "merged", shape) == "qkv_fwd_merged_tiny"
