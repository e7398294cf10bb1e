"""The warp-specialised pipeline the Mosaic GPU attention kernels (jaxgpt.kernels.mosaic_attention)
share: the CTA's threads (two compute warpgroups of 64 rows, one memory warpgroup), the walk of
one row's block lists (or of consecutive rows in turn, `Rows`: the forward's query_blocks), the
memory warpgroup's ring of TMA copies into shared memory with its barriers, the compute
warpgroups' own tiles in and out, and the document-causal mask inside a partial block. Each
kernel supplies only its compute warpgroups' step."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

MASK_BLOCK = 128  # the CTA's rows: one mask block
WARPGROUP_ROWS = 64  # wgmma's M per warpgroup
COMPUTE_WARPGROUPS = MASK_BLOCK // WARPGROUP_ROWS
MEMORY_WARPGROUP = COMPUTE_WARPGROUPS  # the last thread of the CTA
# Register split of Hopper's 64K per SM among 2 x 128 compute and 128 memory threads.
COMPUTE_REGISTERS, MEMORY_REGISTERS = 240, 24


class Walk:
    """The pipeline steps of one CTA: its row's partial list, then its full list, each listed
    128-token block cut into 128 // step steps. Scalars read from the (B, N[, C]) list arrays."""

    def __init__(self, lists, batch, row, step: int):
        partial_counts, self._partial, full_counts, self._full = lists
        self._batch, self._row, self._step = batch, row, step
        self._width = self._partial.shape[-1]
        self._steps_per_block = MASK_BLOCK // step
        self.partial_blocks = partial_counts[batch, row]
        self.masked_steps = self.partial_blocks * self._steps_per_block
        self.total_steps = (self.partial_blocks + full_counts[batch, row]) * self._steps_per_block

    def start(self, step_index: jax.Array) -> jax.Array:
        """First token of the tile that pipeline step `step_index` walks."""
        entry, sub = lax.div(step_index, self._steps_per_block), lax.rem(step_index, self._steps_per_block)
        last = self._width - 1  # the branch not taken reads a clamped, unused entry
        in_partial = self._partial[self._batch, self._row, jnp.minimum(entry, last)]
        in_full = self._full[self._batch, self._row, jnp.clip(entry - self.partial_blocks, 0, last)]
        block = jnp.where(entry < self.partial_blocks, in_partial, in_full)
        return block * MASK_BLOCK + sub * self._step


class Rows:
    """`count` consecutive rows (mask blocks) from `first` that one CTA walks in turn, their
    ring steps numbered on from one row to the next (the forward's `query_blocks`)."""

    def __init__(self, lists, batch, first, count: int, step: int):
        self._lists, self._batch, self._step = lists, batch, step
        self.first, self.count = first, count

    def walk(self, index: jax.Array) -> Walk:
        return Walk(self._lists, self._batch, self.first + index, self._step)


@dataclass(frozen=True)
class Stream:
    """One operand the memory warpgroup streams: `source(start)` is the GMEM view of the tile at
    token `start`; `buffers` (stages, ...) SMEM; `ready` / `free`: one barrier per stage (TMA
    completion; both compute warpgroups done with it)."""

    source: Callable[[jax.Array], Any]
    buffers: Any
    ready: Any
    free: Any


def _issue(walk: Walk, first_ring_step, stages: int, streams: list[Stream]) -> None:
    """The memory warpgroup's copies for one row's steps, numbered on the ring from
    `first_ring_step` (0, or the steps of the rows before it): each waits until its stage's
    buffers are free (after the ring's first `stages` steps), then starts the TMA copies."""

    def issue(step, carry):
        ring_step = first_ring_step + step
        slot = lax.rem(ring_step, stages)
        start = walk.start(step)
        for stream in streams:
            @pl.when(ring_step >= stages)
            def _wait_free():
                plgpu.barrier_wait(stream.free.at[slot])

            plgpu.copy_gmem_to_smem(stream.source(start), stream.buffers.at[slot], stream.ready.at[slot])
        return carry

    lax.fori_loop(0, walk.total_steps, issue, None)


def _observe_releases(total_steps, stages: int, streams: list[Stream]) -> None:
    """Wait on the ring's last `stages` releases too, so every barrier phase is waited on exactly once."""

    def observe_release(ring_step, carry):
        for stream in streams:
            plgpu.barrier_wait(stream.free.at[lax.rem(ring_step, stages)])
        return carry

    lax.fori_loop(jnp.maximum(total_steps - stages, 0), total_steps, observe_release, None)


def produce(walk: Walk, stages: int, streams: list[Stream]) -> None:
    """The memory warpgroup over one row's steps: each step's TMA copies into its stage once the
    stage is free, then the last releases observed."""
    _issue(walk, 0, stages, streams)
    _observe_releases(walk.total_steps, stages, streams)


def produce_rows(rows: Rows, stages: int, streams: list[Stream]) -> None:
    """`produce` over each row of `rows` in turn, one ring across them: a row's first tiles are
    copied as soon as the previous row's last ones free their slots (during its epilogue)."""

    def one_row(row, done):
        walk = rows.walk(row)
        _issue(walk, done, stages, streams)
        return done + walk.total_steps

    _observe_releases(lax.fori_loop(0, rows.count, one_row, jnp.int32(0)), stages, streams)


def consume(walk: Walk, step_fn: Callable, carry):
    """Compute warpgroups: masked steps (partial blocks), then unmasked ones (full blocks)."""
    carry = lax.fori_loop(0, walk.masked_steps, functools.partial(step_fn, True), carry)
    return lax.fori_loop(walk.masked_steps, walk.total_steps, functools.partial(step_fn, False), carry)


def load_own(copies: list[tuple[Any, Any]], barriers: Any, first_barrier: jax.Array) -> None:
    """A compute warpgroup's resident tiles: one TMA copy (gmem view, smem) per barrier, then wait."""
    for offset, (source, target) in enumerate(copies):
        plgpu.copy_gmem_to_smem(source, target, barriers.at[first_barrier + offset])
    for offset in range(len(copies)):
        plgpu.barrier_wait(barriers.at[first_barrier + offset])


def store_own(copies: list[tuple[Any, Any]]) -> None:
    """Write a compute warpgroup's results (smem, gmem view) with TMA and wait for the writes."""
    plgpu.commit_smem()
    for source, target in copies:
        plgpu.copy_smem_to_gmem(source, target)
    plgpu.wait_smem_to_gmem(0)


def query_side_mask(ops, shape, first_query, first_key, doc_start):
    """(64, step) bool for query rows from `first_query` against keys from `first_key`:
    doc_start(q) <= k <= q. doc_start: (64,) int32 per row."""
    rows, cols = ops.iota(shape, 0), ops.iota(shape, 1)
    causal = cols - rows <= first_query - first_key
    return causal & (cols >= lax.broadcast_in_dim(doc_start - first_key, shape, [0]))


def key_side_mask(ops, shape, first_key, first_query, doc_end):
    """(64, step) bool for key rows from `first_key` against queries from `first_query`:
    k <= q <= doc_end(k). doc_end: (64,) int32 per row."""
    rows, cols = ops.iota(shape, 0), ops.iota(shape, 1)
    causal = cols - rows >= first_key - first_query
    return causal & (cols <= lax.broadcast_in_dim(doc_end - first_query, shape, [0]))


def token_stream(ref, batch, head, step: int, buffers, ready, free) -> Stream:
    """`step` tokens of one head of a (B, T, H, D) operand per pipeline step."""
    return Stream(lambda start: ref.at[batch, pl.ds(start, step), head], buffers, ready, free)


def row_stream(ref, batch, head, step: int, buffers, ready, free) -> Stream:
    """`step` tokens of one head of a (B, H, T) per-query statistic per pipeline step."""
    return Stream(lambda start: ref.at[batch, head, pl.ds(start, step)], buffers, ready, free)


def specialise(ops, walk: Walk | Rows, stages: int, streams: list[Stream], compute: Callable) -> None:
    """Warp specialisation: the memory warpgroup streams `streams` along `walk` (one row, or
    each of `Rows` in turn); each compute warpgroup runs compute(warpgroup, first), `first`
    the first of its 64 rows (tokens) in the CTA's (first) mask block."""
    warpgroup = lax.axis_index("wg")

    @pl.when(warpgroup == MEMORY_WARPGROUP)
    def _memory():
        ops.set_registers(MEMORY_REGISTERS, increase=False)
        if isinstance(walk, Rows):
            produce_rows(walk, stages, streams)
        else:
            produce(walk, stages, streams)

    @pl.when(warpgroup < COMPUTE_WARPGROUPS)
    def _compute():
        ops.set_registers(COMPUTE_REGISTERS, increase=True)
        first_block = walk.first if isinstance(walk, Rows) else lax.axis_index("blocks")
        compute(warpgroup, first_block * MASK_BLOCK + warpgroup * WARPGROUP_ROWS)


def tiled(shape: tuple[int, ...], dtype) -> Any:
    """SMEM for wgmma operands: (8, 64) tiles with the 128-byte swizzle (rows of 64 16-bit values)."""
    return plgpu.SMEM(shape, dtype, transforms=(plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128)))


def ring_barriers(stages: int, streams: int) -> list[Any]:
    """`ready` barriers (one TMA arrival) then `free` barriers (both compute warpgroups) per stream."""
    ready = [plgpu.Barrier(num_arrivals=1, num_barriers=stages) for _ in range(streams)]
    free = [plgpu.Barrier(num_arrivals=COMPUTE_WARPGROUPS, num_barriers=stages) for _ in range(streams)]
    return ready + free
