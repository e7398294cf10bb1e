"""The operations of the Mosaic GPU attention kernels (jaxgpt.kernels.mosaic_attention) that
jax 0.10's GPU interpreter lacks, twice: compiled for Hopper (`Compiled`: wgmma with fp32
register accumulators, wgmma's register layouts) and as plain JAX for Mosaic GPU's CPU
interpreter (`Interpreted`), so that the same kernel bodies run in both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from jaxgpt import compat


class Compiled:
    """wgmma with fp32 register accumulators; register layouts of wgmma's fragments."""

    @staticmethod
    def mma(acc: jax.Array | None, a: Any, b: Any, transpose_b: bool = False,
            issued: Callable[[], None] | None = None) -> jax.Array:
        """acc + a @ b (b^T with transpose_b) in fp32. a: SMEM ref or (M, K) registers; b: SMEM ref.
        acc None: a fresh zero accumulator. `issued`: run after the wgmma is issued and before
        its result is waited for, so that its waits overlap the tensor cores' work."""
        # The ref viewed transposed: jax 0.10 and 0.11 both have it (0.11 deprecates plgpu.transpose_ref).
        b = b.transpose((1, 0)) if transpose_b else b
        if acc is None:
            def scoped(acc_ref):
                plgpu.wgmma(acc_ref, a, b)
                if issued is not None:
                    issued()
                return acc_ref[...]

            return pl.run_scoped(scoped, plgpu.ACC((a.shape[0], b.shape[1]), jnp.float32))

        def accumulate(acc_ref):
            plgpu.wgmma(acc_ref, a, b)
            if issued is not None:
                issued()

        return pl.run_state(accumulate)(plgpu.ACC.init(acc))

    @staticmethod
    def zeros(shape: tuple[int, int]) -> jax.Array:
        return plgpu.layout_cast(jnp.zeros(shape, jnp.float32), plgpu.Layout.WGMMA)

    @staticmethod
    def row_vector(value: float, rows: int) -> jax.Array:
        return plgpu.layout_cast(jnp.full((rows,), value, jnp.float32), plgpu.Layout.WGMMA.reduce(1))

    @staticmethod
    def load_rows(ref: Any) -> jax.Array:
        """A (M,) SMEM vector as one value per accumulator row."""
        return compat.mosaic_gpu_load(ref, plgpu.Layout.WGMMA.reduce(1))

    @staticmethod
    def load_columns(ref: Any) -> jax.Array:
        """A (N,) SMEM vector as one value per accumulator column."""
        return compat.mosaic_gpu_load(ref, plgpu.Layout.WGMMA.reduce(0))

    @staticmethod
    def iota(shape: tuple[int, int], dimension: int) -> jax.Array:
        return plgpu.broadcasted_iota(jnp.int32, shape, dimension, layout=plgpu.Layout.WGMMA)

    @staticmethod
    def set_registers(count: int, increase: bool) -> None:
        plgpu.set_max_registers(count, action="increase" if increase else "decrease")

    @staticmethod
    def release(free: Any, loaded: bool) -> None:
        """Hand a ring slot back to the memory warpgroup. `loaded`: this warpgroup read it with
        plain loads (not wgmma), so a proxy fence first orders those reads before the TMA
        copy that will overwrite the slot (wgmma and TMA both work in the async proxy)."""
        if loaded:
            plgpu.commit_smem()
        plgpu.barrier_arrive(free)


class Interpreted(Compiled):
    """The same operations as plain JAX for jax 0.10's Mosaic GPU interpreter: jnp.dot on the
    same bf16 operands with fp32 accumulation, loads and iotas without register layouts."""

    @staticmethod
    def mma(acc: jax.Array | None, a: Any, b: Any, transpose_b: bool = False,
            issued: Callable[[], None] | None = None) -> jax.Array:
        a, b = a[...], b[...]  # `[...]` reads a ref and leaves a register value as it is
        b = b.T if transpose_b else b
        product = jnp.dot(a, b, preferred_element_type=jnp.float32)
        if issued is not None:  # after the operands are read, as after a wgmma's issue
            issued()
        return product if acc is None else acc + product

    @staticmethod
    def zeros(shape: tuple[int, int]) -> jax.Array:
        return jnp.zeros(shape, jnp.float32)

    @staticmethod
    def row_vector(value: float, rows: int) -> jax.Array:
        return jnp.full((rows,), value, jnp.float32)

    @staticmethod
    def load_rows(ref: Any) -> jax.Array:
        return ref[...]

    load_columns = load_rows

    @staticmethod
    def iota(shape: tuple[int, int], dimension: int) -> jax.Array:
        return lax.broadcasted_iota(jnp.int32, shape, dimension)

    @staticmethod
    def release(free: Any, loaded: bool) -> None:
        del loaded  # every read here is a plain load (jnp.dot stands in for wgmma)
        Compiled.release(free, loaded=True)
