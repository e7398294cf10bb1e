"""Block-sparse flash attention for Hopper in Pallas Mosaic GPU: the record's attention, FA3-style.

Same allowed set, lists and numerics as `jaxgpt.kernels.flash_attention` (the Triton kernel), on
Hopper's own instructions. Each kernel runs one CTA per (head, 128-token block, sequence) (the
forward optionally `query_blocks` consecutive blocks per CTA, in turn) with three warpgroups:
two compute warpgroups of 64 rows each (the CTA's 128 rows are one mask block) and one memory
warpgroup that walks the block's lists and streams the walked operand through a
ring of `stages` shared-memory buffers with TMA copies, signalled by barriers (warp
specialisation). Matmuls are wgmma (bf16 or fp16 operands, fp32 accumulators in registers;
probabilities and dS stay in registers as the A operand). The walk, the ring, the warpgroups' own
tiles and the in-block masks the three kernels share are `mosaic_pipeline`'s.

  forward  query block i walks the key blocks of its lists (`KernelBlockLists.kv`): partial
           blocks first (document-causal mask), then full ones (no mask); online softmax in
           base 2 with fp32 running max and sum; writes the output and the log-sum-exp.
  dQ       the same walk; recomputes probabilities from the log-sum-exp.
  dK/dV    key block j walks the query blocks that listed it (`KernelBlockLists.q`).

Masking inside a partial block needs no per-key document ids: with non-decreasing document ids
(as `masks.document_ids` makes them, and as the block lists already assume), "k <= q and same
document" is "doc_start(q) <= k <= q", and equally "k <= q <= doc_end(k)". The query-side
kernels load one int32 vector of document starts for their rows, dK/dV one of document ends.

Shapes: q, k, v (B, T, H, D) with D in SUPPORTED_HEAD_DIMS, bf16 or fp16; doc_ids (B, T) int32,
non-decreasing along T; output (B, T, H, D) in q's dtype. The saved statistic is the base-2
log-sum-exp of the scaled scores, (B, H, T) fp32: lse2 = log2 sum_k 2^(c s_k), c = scale log2(e).

Where the forward loses time (a study on the CPU: compile-only PTX and ptxas reports, the list
statistics, the H200 lease's one timing; the cycle counts are estimates, not timings). The H200
timed the forward at 276 TFLOP/s (visited blocks' FLOPs) at W 14 and the backward at about 385.
At the bench's shape (T 65,536, 47 documents) a query block lists 8.9 key blocks on average at
W 14 (26% of them partial), 3.7 at W 4 (39%), 1 at W 1 (all partial).
  1. Softmax not overlapped with wgmma. Both compute warpgroups wait on the same `ready`
     barrier, so they issue QK^T together and then both run their softmax while the tensor
     cores idle; each wgmma is waited for right after its issue. Per warpgroup and 128-token
     step the two wgmmas are 4.2 MFLOP (about 1,000 tensor-core cycles of one SM) and the
     softmax is 8,192 exp2 on the SM's 16 MUFU lanes (about 500 cycles) plus about 5 FP32
     operations per score. dQ runs 3 wgmmas and dK/dV 4 per tile of exp2 (the forward 2), so
     the same serialisation costs the backward less: consistent with 385 against 276.
     Variant `pingpong` (FA3's inter-warpgroup schedule, as in tokamax's and jax's own Mosaic
     GPU attention): the warpgroups meet at a `turn` barrier after each QK^T issue and after
     each softmax, warpgroup 1 one meeting ahead, so one's softmax runs during the other's
     wgmmas; the next step's key tile is waited for while PV's wgmma runs (PTX: the turn and
     key waits sit between `wgmma.commit_group` and `wgmma.wait_group`). ptxas for sm_90a: 24 B
     spilled at step 128 (the default 16 B), none at step 64 (docs/BENCHMARKS.md).
  2. Short walks, one CTA per SM. 8.9 steps per CTA at W 14, and one CTA per SM (2 stages of
     128-token K and V tiles plus Q take 160 KB of shared memory, and 2 x 128 threads at 240
     registers plus 128 at 24 take the SM's 64K registers at any step), so each CTA's Q load,
     its first list reads and K/V copies (dependent global loads) and its epilogue (divide,
     store) are not hidden behind another CTA's work. Variant `query_blocks` (a step towards
     FA3's persistent kernel): a CTA walks that many consecutive query blocks, one ring across
     them, so the memory warpgroup copies the next block's first key tiles while the compute
     warpgroups finish the last one (their own Q copy still waits). ptxas: no spills at step
     64, but 108-124 B at step 128 (the loop over blocks holds more live values), so step 64
     is its natural pairing. Not done: a grid of one CTA per SM with a tile scheduler, and Q
     double-buffered so that its copy overlaps too.
  3. Masking costs only the partial blocks already: `consume` runs the masked steps (iotas,
     two compares and a select per score) and then the full blocks without a mask; under
     `pingpong` the mask hides behind the other warpgroup's wgmmas like the rest of the softmax.
  4. Rescaling the accumulator every step (64 multiplies per thread) even when no row's
     maximum moved; skipping it needs a warpgroup-uniform branch on register values. Not a
     variant.
  5. Tiles: step 128 halves the barrier round trips per listed block against 64; 3 stages fit
     at step 128. The sweep (`scripts/tile_sweep.py --implementation mosaic --kernels forward`)
     times (step, stages, pingpong, query_blocks); the default stays (128, 2, free-running, 1)
     until it has run on a GPU (docs/BENCHMARKS.md says which variant to read first).

Without a GPU the kernels run in Mosaic GPU's interpreter (shared memory, barriers and TMA
copies simulated, optionally with race detection). jax 0.10's interpreter cannot run wgmma on a
transposed or register operand, nor the register layouts (`layout_cast`, `load(layout=)`,
`broadcasted_iota(layout=)`), so interpreted kernels take those few operations from `mosaic_ops.Interpreted`
(jnp.dot on the same operands, plain loads and iotas); everything else (list walk, pipeline,
barriers, masking, softmax) is the code the GPU runs. `mosaic_ops.Compiled` is the Hopper path.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from jaxgpt import compat
from jaxgpt.config import BLOCK_SIZE
from jaxgpt.kernels.block_lists import KernelBlockLists, check_kernel_lists, kernel_block_lists
from jaxgpt.kernels.flash_attention import default_interpret, kernel_attention_vjp, softmax_backward_rows
from jaxgpt.kernels.mosaic_ops import Compiled, Interpreted
from jaxgpt.kernels.mosaic_pipeline import (
    COMPUTE_WARPGROUPS,
    MASK_BLOCK,
    WARPGROUP_ROWS,
    Rows,
    Walk,
    consume,
    key_side_mask,
    load_own,
    query_side_mask,
    ring_barriers,
    row_stream,
    specialise,
    store_own,
    tiled,
    token_stream,
)
from jaxgpt.masks import check_attention_inputs

# Multiples of 64 (128-byte rows of 16-bit values for the 128-byte swizzle); 256 would not fit 2 stages.
SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_DTYPES = (jnp.bfloat16, jnp.float16)  # wgmma's 16-bit operand types
LOG2E = math.log2(math.e)
# Below any finite scaled score (|q.k| * scale * log2 e stays far from 1e30): a row that has
# seen only masked keys shifts by this instead of -inf, so exp2 gives 0, not NaN.
NO_KEYS_YET = -1e30


@dataclass(frozen=True)
class MosaicKernelTiles:
    """One kernel's pipeline: `step` tokens of the walked side per step (64 or 128; a listed
    128-token block takes 128 // step steps) and `stages` shared-memory buffers in flight (>= 2:
    the memory warpgroup fills one while the compute warpgroups read another)."""

    step: int = 128
    stages: int = 2
    # Forward only: the two compute warpgroups take turns on the tensor cores (one's softmax
    # runs while the other's wgmma does), and the next key tile is waited for while the PV
    # wgmma runs; see the module docstring's study.
    pingpong: bool = False
    # Forward only: query blocks each CTA walks in turn (grid T / (128 x query_blocks)); the
    # memory warpgroup fetches the next block's first key tiles during this one's epilogue.
    query_blocks: int = 1

    def check(self, kernel: str) -> None:
        if self.step not in (64, 128):
            raise ValueError(f"mosaic {kernel}.step={self.step} must be 64 or 128 (a divisor of the 128-token "
                             "mask block that wgmma takes as N)")
        if self.stages < 2:
            raise ValueError(f"mosaic {kernel}.stages={self.stages} must be >= 2")
        if self.pingpong and kernel != "forward":
            raise ValueError(f"mosaic {kernel}.pingpong: only the forward kernel takes turns")
        if self.query_blocks < 1 or (self.query_blocks > 1 and kernel != "forward"):
            raise ValueError(f"mosaic {kernel}.query_blocks={self.query_blocks}: only the forward kernel walks "
                             "more than one block per CTA (and at least one)")


@dataclass(frozen=True)
class MosaicTiles:
    """Pipelines of the `forward`, `dq` and `dkdv` kernels (MosaicKernelTiles).

    The defaults compile for an H100 at D 128 within its shared memory and registers with
    little spilling (ptxas for sm_90a, compile-only: docs/BENCHMARKS.md, "Mosaic GPU attention kernel");
    no GPU has timed them yet. The backward kernels walk 64 tokens per step: a compute
    warpgroup holds its dQ (or dK and dV) accumulators beside S and dP, and 128-token steps
    spilled (dQ 272 bytes per thread, dK/dV 1,024). The forward fits 3 stages in shared memory."""

    forward: MosaicKernelTiles = MosaicKernelTiles(step=128, stages=2)
    dq: MosaicKernelTiles = MosaicKernelTiles(step=64, stages=2)
    dkdv: MosaicKernelTiles = MosaicKernelTiles(step=64, stages=2)

    def check(self) -> None:
        for kernel in ("forward", "dq", "dkdv"):
            getattr(self, kernel).check(kernel)


# ---------------------------------------------------------------------------------------------
# Kernels (one CTA per (head, 128-token block, sequence); threads: 2 compute + 1 memory)


@dataclass(frozen=True)
class _Static:
    scale: float
    tiles: MosaicTiles
    interpret: Any  # None (compile for the GPU) or InterpretGPUParams

    @property
    def ops(self) -> type[Compiled]:
        return Compiled if self.interpret is None else Interpreted


def _forward_kernel(pc_ref, pi_ref, fc_ref, fi_ref, q_ref, k_ref, v_ref, start_ref, o_ref, lse_ref,
                    q_smem, start_smem, lse_smem, k_smem, v_smem, own_bars, k_ready, v_ready, k_free, v_free,
                    *turn, static: _Static):
    """`turn` (pingpong only): one barrier both compute warpgroups arrive at, twice a step.
    With `query_blocks` > 1 the CTA walks that many query blocks in turn, one ring across them."""
    ops, launch = static.ops, static.tiles.forward
    batch, head = lax.axis_index("batch"), lax.axis_index("heads")
    lists = (pc_ref, pi_ref, fc_ref, fi_ref)
    if launch.query_blocks == 1:
        walked: Walk | Rows = Walk(lists, batch, lax.axis_index("blocks"), launch.step)
    else:
        walked = Rows(lists, batch, lax.axis_index("blocks") * launch.query_blocks, launch.query_blocks, launch.step)
    c = static.scale * LOG2E  # scores to base-2 exponents
    shape = (WARPGROUP_ROWS, launch.step)

    def pass_turn():
        """Both warpgroups meet here; warpgroup 1 runs one meeting ahead, so each one's wgmma
        issue pairs with the other's end of softmax and the tensor cores alternate between them."""
        plgpu.barrier_arrive(turn[0])
        plgpu.barrier_wait(turn[0])

    def one_block(warpgroup, first, walk: Walk, ring_offset):
        """One query block's 64 rows from `first`; its steps are ring steps ring_offset + i
        (ring_offset None: 0, the one block of a CTA)."""
        ring = (lambda i: i) if ring_offset is None else (lambda i: ring_offset + i)
        rows = pl.ds(first, WARPGROUP_ROWS)
        q_tile, start_tile, lse_tile = q_smem.at[warpgroup], start_smem.at[warpgroup], lse_smem.at[warpgroup]
        load_own([(q_ref.at[batch, rows, head], q_tile), (start_ref.at[batch, rows], start_tile)],
                  own_bars, 2 * warpgroup)
        doc_start = ops.load_rows(start_tile)

        def wait_keys(i):
            @pl.when(i < walk.total_steps)
            def _wait():
                plgpu.barrier_wait(k_ready.at[lax.rem(ring(i), launch.stages)])

        def step(masked, i, carry):
            acc, m, row_sum = carry
            slot = lax.rem(ring(i), launch.stages)
            if not launch.pingpong:  # pingpong waited for these keys during the previous step's PV
                plgpu.barrier_wait(k_ready.at[slot])
            s = ops.mma(None, q_tile, k_smem.at[slot], transpose_b=True,
                        issued=pass_turn if launch.pingpong else None)
            ops.release(k_free.at[slot], loaded=False)
            if masked:
                s = jnp.where(query_side_mask(ops, shape, first, walk.start(i), doc_start), s, -jnp.inf)
            m_new = jnp.maximum(m, s.max(axis=1) * c)
            shift = jnp.maximum(m_new, NO_KEYS_YET)
            alpha = jnp.exp2(m - shift)
            p = jnp.exp2(s * c - lax.broadcast_in_dim(shift, shape, [0]))
            row_sum = row_sum * alpha + p.sum(axis=1)
            acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])
            if launch.pingpong:
                # The softmax is finished before the turn passes (not moved past the barrier).
                acc, m_new, row_sum, p = lax.optimization_barrier((acc, m_new, row_sum, p.astype(v_ref.dtype)))
                plgpu.barrier_arrive(turn[0])
                plgpu.barrier_wait(v_ready.at[slot])
                plgpu.barrier_wait(turn[0])
            else:
                plgpu.barrier_wait(v_ready.at[slot])  # converting p after this wait spills less (16 B, not 60)
            acc = ops.mma(acc, p.astype(v_ref.dtype), v_smem.at[slot],
                          issued=functools.partial(wait_keys, i + 1) if launch.pingpong else None)
            ops.release(v_free.at[slot], loaded=False)
            return acc, m_new, row_sum

        carry = (ops.zeros((WARPGROUP_ROWS, v_ref.shape[-1])), ops.row_vector(-jnp.inf, WARPGROUP_ROWS),
                 ops.row_vector(0.0, WARPGROUP_ROWS))
        if launch.pingpong:
            wait_keys(jnp.int32(0))
            pl.when(warpgroup == 1)(pass_turn)
        acc, m, row_sum = consume(walk, step, carry)
        if launch.pingpong:  # warpgroup 0's last meeting, so both meet equally often
            pl.when(warpgroup == 0)(pass_turn)
        # Every query sees itself, so row_sum > 0. Q's buffer is free once the last QK^T has been read.
        q_tile[...] = (acc / lax.broadcast_in_dim(row_sum, acc.shape, [0])).astype(o_ref.dtype)
        lse_tile[...] = m + jnp.log(row_sum) * LOG2E
        # The TMA stores have read the tiles when this returns, so the next block may refill them.
        store_own([(q_tile, o_ref.at[batch, rows, head]), (lse_tile, lse_ref.at[batch, head, rows])])

    def compute(warpgroup, first):
        if isinstance(walked, Walk):
            one_block(warpgroup, first, walked, None)
            return

        def next_block(index, ring_offset):
            walk = walked.walk(index)
            one_block(warpgroup, first + index * MASK_BLOCK, walk, ring_offset)
            return ring_offset + walk.total_steps

        lax.fori_loop(0, walked.count, next_block, jnp.int32(0))

    streams = [token_stream(k_ref, batch, head, launch.step, k_smem, k_ready, k_free),
               token_stream(v_ref, batch, head, launch.step, v_smem, v_ready, v_free)]
    specialise(ops, walked, launch.stages, streams, compute)


def _dq_kernel(pc_ref, pi_ref, fc_ref, fi_ref, q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, start_ref,
               dq_ref, q_smem, do_smem, lse_smem, delta_smem, start_smem, k_smem, v_smem,
               own_bars, k_ready, v_ready, k_free, v_free, *, static: _Static):
    ops, launch = static.ops, static.tiles.dq
    batch, head = lax.axis_index("batch"), lax.axis_index("heads")
    walk = Walk((pc_ref, pi_ref, fc_ref, fi_ref), batch, lax.axis_index("blocks"), launch.step)
    c = static.scale * LOG2E
    shape = (WARPGROUP_ROWS, launch.step)

    def compute(warpgroup, first):
        rows = pl.ds(first, WARPGROUP_ROWS)
        q_tile, do_tile = q_smem.at[warpgroup], do_smem.at[warpgroup]
        lse_tile, delta_tile, start_tile = lse_smem.at[warpgroup], delta_smem.at[warpgroup], start_smem.at[warpgroup]
        load_own([(q_ref.at[batch, rows, head], q_tile), (do_ref.at[batch, rows, head], do_tile),
                   (lse_ref.at[batch, head, rows], lse_tile), (delta_ref.at[batch, head, rows], delta_tile),
                   (start_ref.at[batch, rows], start_tile)], own_bars, 5 * warpgroup)
        lse, delta, doc_start = ops.load_rows(lse_tile), ops.load_rows(delta_tile), ops.load_rows(start_tile)

        def step(masked, i, dq):
            slot = lax.rem(i, launch.stages)
            plgpu.barrier_wait(k_ready.at[slot])
            s = ops.mma(None, q_tile, k_smem.at[slot], transpose_b=True)
            if masked:
                s = jnp.where(query_side_mask(ops, shape, first, walk.start(i), doc_start), s, -jnp.inf)
            p = jnp.exp2(s * c - lax.broadcast_in_dim(lse, shape, [0]))
            plgpu.barrier_wait(v_ready.at[slot])
            dp = ops.mma(None, do_tile, v_smem.at[slot], transpose_b=True)
            ops.release(v_free.at[slot], loaded=False)
            ds = p * (dp - lax.broadcast_in_dim(delta, shape, [0]))
            dq = ops.mma(dq, ds.astype(k_ref.dtype), k_smem.at[slot])
            ops.release(k_free.at[slot], loaded=False)
            return dq

        dq = consume(walk, step, ops.zeros((WARPGROUP_ROWS, q_ref.shape[-1])))
        q_tile[...] = (dq * static.scale).astype(dq_ref.dtype)
        store_own([(q_tile, dq_ref.at[batch, rows, head])])

    streams = [token_stream(k_ref, batch, head, launch.step, k_smem, k_ready, k_free),
               token_stream(v_ref, batch, head, launch.step, v_smem, v_ready, v_free)]
    specialise(ops, walk, launch.stages, streams, compute)


def _dkdv_kernel(pc_ref, pi_ref, fc_ref, fi_ref, q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, end_ref,
                 dk_ref, dv_ref, k_smem, v_smem, end_smem, q_smem, do_smem, lse_smem, delta_smem,
                 own_bars, q_ready, do_ready, lse_ready, delta_ready, q_free, do_free, lse_free, delta_free,
                 *, static: _Static):
    ops, launch = static.ops, static.tiles.dkdv
    batch, head = lax.axis_index("batch"), lax.axis_index("heads")
    # This CTA's block is a key block; the lists are the q-side ones.
    walk = Walk((pc_ref, pi_ref, fc_ref, fi_ref), batch, lax.axis_index("blocks"), launch.step)
    c = static.scale * LOG2E
    shape = (WARPGROUP_ROWS, launch.step)  # keys by queries: the transposed scores

    def compute(warpgroup, first):
        rows = pl.ds(first, WARPGROUP_ROWS)
        k_tile, v_tile, end_tile = k_smem.at[warpgroup], v_smem.at[warpgroup], end_smem.at[warpgroup]
        load_own([(k_ref.at[batch, rows, head], k_tile), (v_ref.at[batch, rows, head], v_tile),
                   (end_ref.at[batch, rows], end_tile)], own_bars, 3 * warpgroup)
        doc_end = ops.load_rows(end_tile)

        def step(masked, i, carry):
            dk, dv = carry
            slot = lax.rem(i, launch.stages)
            plgpu.barrier_wait(q_ready.at[slot])
            st = ops.mma(None, k_tile, q_smem.at[slot], transpose_b=True)
            if masked:
                st = jnp.where(key_side_mask(ops, shape, first, walk.start(i), doc_end), st, -jnp.inf)
            plgpu.barrier_wait(lse_ready.at[slot])
            lse = ops.load_columns(lse_smem.at[slot])
            ops.release(lse_free.at[slot], loaded=True)
            pt = jnp.exp2(st * c - lax.broadcast_in_dim(lse, shape, [1]))
            plgpu.barrier_wait(do_ready.at[slot])
            dv = ops.mma(dv, pt.astype(do_ref.dtype), do_smem.at[slot])
            dpt = ops.mma(None, v_tile, do_smem.at[slot], transpose_b=True)
            ops.release(do_free.at[slot], loaded=False)
            plgpu.barrier_wait(delta_ready.at[slot])
            delta = ops.load_columns(delta_smem.at[slot])
            ops.release(delta_free.at[slot], loaded=True)
            dst = pt * (dpt - lax.broadcast_in_dim(delta, shape, [1]))
            dk = ops.mma(dk, dst.astype(q_ref.dtype), q_smem.at[slot])
            ops.release(q_free.at[slot], loaded=False)
            return dk, dv

        zeros = ops.zeros((WARPGROUP_ROWS, k_ref.shape[-1]))
        dk, dv = consume(walk, step, (zeros, zeros))
        k_tile[...] = (dk * static.scale).astype(dk_ref.dtype)
        v_tile[...] = dv.astype(dv_ref.dtype)
        store_own([(k_tile, dk_ref.at[batch, rows, head]), (v_tile, dv_ref.at[batch, rows, head])])

    streams = [token_stream(q_ref, batch, head, launch.step, q_smem, q_ready, q_free),
               row_stream(lse_ref, batch, head, launch.step, lse_smem, lse_ready, lse_free),
               token_stream(do_ref, batch, head, launch.step, do_smem, do_ready, do_free),
               row_stream(delta_ref, batch, head, launch.step, delta_smem, delta_ready, delta_free)]
    specialise(ops, walk, launch.stages, streams, compute)


# ---------------------------------------------------------------------------------------------
# plgpu.kernel plumbing


def _launch(kernel, static: _Static, out_type, scratch, q: jax.Array, name: str, blocks_per_cta: int = 1):
    """The kernel as a function of its GMEM operands: one CTA per (head, `blocks_per_cta` mask
    blocks, sequence) of q."""
    batch, seq_len, heads, _ = q.shape
    call = plgpu.kernel(
        functools.partial(kernel, static=static), out_type=out_type, scratch_types=scratch,
        grid=(heads, seq_len // (MASK_BLOCK * blocks_per_cta), batch), grid_names=("heads", "blocks", "batch"),
        num_threads=COMPUTE_WARPGROUPS + 1, thread_name="wg", kernel_name=name,
        # Row reductions stay within warps: no shared-memory scratch for cross-warp ones.
        compiler_params=plgpu.CompilerParams(approx_math=True, reduction_scratch_bytes=0), interpret=static.interpret,
    )
    return lambda *operands: jax.tree.map(lambda out: compat.vary_like(out, q), call(*operands))


def _forward(static: _Static, q, k, v, bounds, lists: KernelBlockLists):
    batch, seq_len, heads, dim = q.shape
    launch, rows = static.tiles.forward, (COMPUTE_WARPGROUPS, WARPGROUP_ROWS)
    scratch = [
        tiled((*rows, dim), q.dtype), plgpu.SMEM(rows, jnp.int32), plgpu.SMEM(rows, jnp.float32),
        tiled((launch.stages, launch.step, dim), k.dtype), tiled((launch.stages, launch.step, dim), v.dtype),
        plgpu.Barrier(num_arrivals=1, num_barriers=2 * COMPUTE_WARPGROUPS), *ring_barriers(launch.stages, 2),
    ]
    if launch.pingpong:
        scratch.append(plgpu.Barrier(num_arrivals=COMPUTE_WARPGROUPS, num_barriers=1))
    out_type = (jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((batch, heads, seq_len), jnp.float32))
    call = _launch(_forward_kernel, static, out_type, scratch, q, "mosaic_block_sparse_attention_fwd",
                   blocks_per_cta=launch.query_blocks)
    return call(*lists.kv, q, k, v, bounds.start)


def _backward(static: _Static, q, k, v, bounds, lists: KernelBlockLists, out, lse, d_out):
    dim, rows = q.shape[-1], (COMPUTE_WARPGROUPS, WARPGROUP_ROWS)
    delta = softmax_backward_rows(out, d_out)

    launch = static.tiles.dq
    scratch = [
        tiled((*rows, dim), q.dtype), tiled((*rows, dim), d_out.dtype), plgpu.SMEM(rows, jnp.float32),
        plgpu.SMEM(rows, jnp.float32), plgpu.SMEM(rows, jnp.int32),
        tiled((launch.stages, launch.step, dim), k.dtype), tiled((launch.stages, launch.step, dim), v.dtype),
        plgpu.Barrier(num_arrivals=1, num_barriers=5 * COMPUTE_WARPGROUPS), *ring_barriers(launch.stages, 2),
    ]
    d_q = _launch(_dq_kernel, static, jax.ShapeDtypeStruct(q.shape, q.dtype), scratch, q,
                  "mosaic_block_sparse_attention_dq")(*lists.kv, q, k, v, d_out, lse, delta, bounds.start)

    launch = static.tiles.dkdv
    scratch = [
        tiled((*rows, dim), k.dtype), tiled((*rows, dim), v.dtype), plgpu.SMEM(rows, jnp.int32),
        tiled((launch.stages, launch.step, dim), q.dtype), tiled((launch.stages, launch.step, dim), d_out.dtype),
        plgpu.SMEM((launch.stages, launch.step), jnp.float32), plgpu.SMEM((launch.stages, launch.step), jnp.float32),
        plgpu.Barrier(num_arrivals=1, num_barriers=3 * COMPUTE_WARPGROUPS), *ring_barriers(launch.stages, 4),
    ]
    out_type = (jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype))
    call = _launch(_dkdv_kernel, static, out_type, scratch, q, "mosaic_block_sparse_attention_dkdv")
    d_k, d_v = call(*lists.q, q, k, v, d_out, lse, delta, bounds.end)
    return d_q, d_k, d_v


class DocumentBounds(NamedTuple):
    """start / end: (B, T) int32, the first and the last token of each token's document."""

    start: jax.Array
    end: jax.Array


def document_bounds(doc_ids: jax.Array) -> DocumentBounds:
    """First and last token of each token's document, for (B, T) non-decreasing document ids."""
    positions = lax.broadcasted_iota(jnp.int32, doc_ids.shape, 1)
    opens = jnp.concatenate([jnp.ones_like(doc_ids[:, :1], bool), doc_ids[:, 1:] != doc_ids[:, :-1]], axis=1)
    closes = jnp.concatenate([doc_ids[:, 1:] != doc_ids[:, :-1], jnp.ones_like(doc_ids[:, :1], bool)], axis=1)
    start = lax.cummax(jnp.where(opens, positions, 0), axis=1)
    end = lax.cummin(jnp.where(closes, positions, doc_ids.shape[1] - 1), axis=1, reverse=True)
    return DocumentBounds(start, end)


_attention = kernel_attention_vjp(_forward, _backward)


def _check_kernel_limits(q, v, block_size: int, tiles: MosaicTiles) -> None:
    """What the Mosaic GPU kernels support beyond any attention call's inputs."""
    if block_size != MASK_BLOCK:
        raise ValueError(f"the mosaic attention kernel needs the record's {MASK_BLOCK}-token mask block "
                         f"(2 warpgroups of {WARPGROUP_ROWS} rows), got block_size={block_size}")
    if v.shape[-1] != q.shape[-1] or q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"the mosaic attention kernel supports q, k and v head dims equal and in "
                         f"{SUPPORTED_HEAD_DIMS}, got {q.shape[-1]} and {v.shape[-1]}")
    for name, array in (("q", q), ("v", v)):
        if array.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"the mosaic attention kernel takes bfloat16 or float16 (wgmma operands), got {name} "
                             f"in {array.dtype}; use the pallas backend for float32")
    tiles.check()
    if (q.shape[1] // MASK_BLOCK) % tiles.forward.query_blocks:
        raise ValueError(f"mosaic forward.query_blocks={tiles.forward.query_blocks} must divide the "
                         f"{q.shape[1] // MASK_BLOCK} mask blocks of T={q.shape[1]}")


def check_hopper(compute_capability: str | None) -> None:
    """ValueError unless a GPU of this compute capability runs the kernels: wgmma is Hopper's
    alone (sm_90a; Blackwell's tensor cores take tcgen05). None (no GPU device) passes."""
    if compute_capability is not None and not str(compute_capability).startswith("9."):
        raise ValueError(f"the mosaic attention kernel needs a Hopper GPU (compute capability 9.x, wgmma), "
                         f"this one has {compute_capability}; use --attention pallas")


def mosaic_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, doc_ids: jax.Array, window_blocks: int | jax.Array, *,
    scale: float = 0.12, block_size: int = BLOCK_SIZE, max_window_blocks: int = 14,
    lists: KernelBlockLists | None = None, tiles: MosaicTiles = MosaicTiles(), interpret: Any = None,
) -> jax.Array:
    """Document-causal block-window attention through the Mosaic GPU kernels; differentiable in q, k, v.

    q, k, v: (B, T, H, D) bf16 or fp16, D in SUPPORTED_HEAD_DIMS; doc_ids: (B, T) int,
    non-decreasing along T (`masks.document_ids`); window_blocks: W in 128-token blocks (an int
    in 0..max_window_blocks or a traced int32, clamped; 0 acts as 1). `lists`: from
    `kernel_block_lists(doc_ids, window_blocks, ...)`, to share them between layers; built here
    when None. interpret: None (Mosaic GPU's interpreter where kernels do not compile, see
    `flash_attention.default_interpret`), False (compile for the GPU), True or an
    `InterpretGPUParams` (interpret, with those parameters). Returns (B, T, H, D) in q's dtype.
    """
    check_attention_inputs(q, k, v, doc_ids, window_blocks, block_size=block_size, max_window_blocks=max_window_blocks)
    _check_kernel_limits(q, v, block_size, tiles)
    if lists is None:
        lists = kernel_block_lists(doc_ids, window_blocks, max_window_blocks=max_window_blocks, block_size=block_size)
    check_kernel_lists(lists, q.shape[0], q.shape[1], block_size)
    if interpret is None:
        interpret = default_interpret()
    if interpret is True:
        interpret = compat.gpu_interpret_params()
    if interpret:
        compat.cache_gpu_interpreter_compiles()
    elif jax.default_backend() == "gpu":
        check_hopper(getattr(jax.devices()[0], "compute_capability", None))
    static = _Static(float(scale), tiles, interpret or None)
    return _attention(static, q, k, v, document_bounds(doc_ids.astype(jnp.int32)), lists)
