"""Rotary position embeddings: the record's half-truncated tables and rotation, and the
lineage's full-frequency kinds with the records' own bf16 roundings (RECORD.md 2.7, LINEAGE.md
"Rotary tables"). Tables are built once on the host in numpy and cached."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np


def _bf16(values: np.ndarray) -> np.ndarray:
    """fp32 numpy values rounded to bf16 (nearest even), returned as fp32."""
    import ml_dtypes  # numpy's bf16, as used by jax

    return values.astype(ml_dtypes.bfloat16).astype(np.float32)


@functools.lru_cache(maxsize=8)
def rotary_tables(head_dim: int, max_len: int, kind: str = "half_truncated",
                  as_written: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin), each (max_len, head_dim // 2) float32 numpy, built once per shape and kind.

    "half_truncated" (Sub3Min, #18): frequencies (1/1024) ** linspace(0, 1, head_dim // 4) in
      fp32, then head_dim // 4 zeros (those dims pass through unrotated); angle t * freq in fp32.
    "full" (#8/#9): head_dim // 2 frequencies 1 / 10000 ** (2j / head_dim) in fp32, angle in fp32.
    "full_bf16_freq" (#15): the frequencies (1 / 10000) ** (2j / head_dim) rounded to bf16 (the
      model's .bfloat16()), angle t * freq in fp32 with exact t: torch.compile's reading
      (LINEAGE.md 5.3; inferred, not verified).
    "full_bf16_freq_eager": the same frequencies under eager type promotion: positions rounded to
      bf16 (multiples of 256 above 32768), their product with the frequencies rounded to bf16,
      cos/sin of that. The alternative reading of the same record.
    as_written: the "full" kinds' cos and sin are rounded to bf16 here, in every dtype policy, as
    the records' code does by its own hand (#8/#9's `.bfloat16()` on fp32 tables, #15's tables
    built from its bf16 buffer; docs/NUMERICS.md); False leaves them fp32 (a study), and a bf16
    activation dtype then rounds them at use.
    """
    if head_dim % 4:
        raise ValueError(f"rotary needs head_dim divisible by 4, got {head_dim}")
    positions = np.arange(max_len, dtype=np.float32)
    if kind == "half_truncated":
        quarter = head_dim // 4
        exponents = np.linspace(0.0, 1.0, quarter, dtype=np.float32)
        freq = np.power(np.float32(1.0 / 1024.0), exponents, dtype=np.float32)
        freq = np.concatenate([freq, np.zeros(quarter, np.float32)])
    elif kind == "full":
        exponents = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
        # 10000 ** e rounded to fp32 once (the value torch's fp32 pow gives; numpy's float32 pow is
        # off by an ulp on some exponents), then the fp32 reciprocal, as #8/#9's code computes it.
        freq = np.float32(1.0) / np.power(10000.0, exponents.astype(np.float64)).astype(np.float32)
    elif kind in ("full_bf16_freq", "full_bf16_freq_eager"):
        exponents = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
        freq = _bf16(np.power(np.float32(1.0 / 10000.0), exponents, dtype=np.float32))
        if kind == "full_bf16_freq_eager":
            positions = _bf16(positions)
    else:
        raise ValueError(f"unknown rotary kind {kind!r}")
    theta = positions[:, None] * freq[None, :]
    if kind == "full_bf16_freq_eager":
        theta = _bf16(theta)
    if kind == "half_truncated":
        cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    else:  # the correctly rounded fp32 cos/sin of the fp32 angle: bf16 rounding turns ulps into 2^-8 flips
        cos, sin = (f(theta.astype(np.float64)).astype(np.float32) for f in (np.cos, np.sin))
    if as_written and kind != "half_truncated":
        cos, sin = _bf16(cos), _bf16(sin)
    cos.flags.writeable = False  # shared through the cache
    sin.flags.writeable = False
    return cos, sin


def apply_rotary(x_BTHD: jax.Array, cos_TR: jax.Array, sin_TR: jax.Array, *, in_fp32: bool = True) -> jax.Array:
    """The record's half-split rotary: y1 = x1 c + x2 s, y2 = -x1 s + x2 c.

    x_BTHD: (B, T, H, Dh) any float dtype; cos_TR, sin_TR: (T, Dh // 2) fp32.
    in_fp32: x upcast to fp32 and the result cast back (Sub3Min, #18); False: the tables are
    cast to x's dtype and the rotation runs in it (#8-#15's bf16 tables and products).
    Returns (B, T, H, Dh) in x's dtype.
    """
    work = jnp.float32 if in_fp32 else x_BTHD.dtype
    x = x_BTHD.astype(work)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = (t.astype(work)[None, :, None, :] for t in (cos_TR, sin_TR))
    y1 = x1 * cos + x2 * sin
    y2 = x2 * cos - x1 * sin
    return jnp.concatenate([y1, y2], axis=-1).astype(x_BTHD.dtype)
