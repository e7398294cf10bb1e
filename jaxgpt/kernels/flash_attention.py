"""Block-sparse flash attention in Pallas (Triton lowering): the record's FlexAttention call.

For each query tile the forward kernel walks only the key blocks in its query block's lists
(`KernelBlockLists.kv`): partial blocks with the document-causal mask, full blocks without it,
keeping fp32 running max / sum / accumulator (online softmax) and writing the log-sum-exp.
The backward recomputes probabilities from the log-sum-exp: dQ walks the same lists; dK and dV
walk, for each key tile, the query blocks that listed its key block (`KernelBlockLists.q`).
Nothing of O(T^2) size is formed, and the window costs only the blocks it lists.

Shapes: q, k (B, T, H, Dh); v (B, T, H, Dv); doc_ids (B, T) int32; output (B, T, H, Dv) in q's
dtype; log-sum-exp (B, H, T) fp32. The mask block is 128 tokens (the record's); kernel tiles
(`Tiles`: one `KernelTiles` per kernel) are powers of two that divide it. On a CPU the kernels
run in Pallas interpret mode.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from jaxgpt.compat import out_struct, triton_params
from jaxgpt.config import BLOCK_SIZE
from jaxgpt.kernels.block_lists import KernelBlockLists, check_kernel_lists, kernel_block_lists
from jaxgpt.masks import check_attention_inputs

SUPPORTED_HEAD_DIMS = (16, 32, 64, 128, 256)  # Triton dots want power-of-two sizes >= 16


_COMPILED_KERNELS: contextvars.ContextVar[bool] = contextvars.ContextVar("jaxgpt_compiled_kernels", default=False)


def default_interpret() -> bool:
    """Interpret the kernels (run them as plain JAX) unless the default backend is a GPU or
    `compiled_kernels()` is active."""
    return not _COMPILED_KERNELS.get() and jax.default_backend() != "gpu"


@contextlib.contextmanager
def compiled_kernels() -> Iterator[None]:
    """Within this context, kernels traced with interpret=None lower to Triton even where the
    default backend is a CPU: for compiling to compile-only GPU devices (jaxgpt_tools.gpu.compile_plan)."""
    token = _COMPILED_KERNELS.set(True)
    try:
        yield
    finally:
        _COMPILED_KERNELS.reset(token)


@dataclass(frozen=True)
class KernelTiles:
    """One kernel's tile sizes (tokens) and Triton launch settings.

    block_q / block_k: the query and key tile. The forward and dQ kernels run one program per
    query tile and walk key tiles; the dK/dV kernel runs one program per key tile and walks
    query tiles. Each must be a power of two >= 16 that divides the mask block. num_warps (a
    power of two) and num_stages (software-pipelining depth, >= 1) go to Triton as they are;
    the Pallas CPU interpreter ignores them.
    """

    block_q: int = 64
    block_k: int = 64
    num_warps: int = 4
    num_stages: int = 2

    def check(self, mask_block: int, kernel: str) -> None:
        for name in ("block_q", "block_k"):
            size = getattr(self, name)
            if size < 16 or size & (size - 1) or mask_block % size:
                raise ValueError(f"kernel tile {kernel}.{name}={size} must be a power of two >= 16 that divides the "
                                 f"mask block {mask_block}")
        if self.num_warps < 1 or self.num_warps & (self.num_warps - 1):
            raise ValueError(f"{kernel}.num_warps={self.num_warps} must be a power of two")
        if self.num_stages < 1:
            raise ValueError(f"{kernel}.num_stages={self.num_stages} must be >= 1")


@dataclass(frozen=True)
class Tiles:
    """Launch settings of each of the three kernels: `forward`, `dq` and `dkdv` (KernelTiles);
    the mask block stays 128. `Tiles.uniform(...)` gives all three the same settings."""

    # Defaults: the fastest fwd+bwd of the tile sweep (scripts/tile_sweep.py) on an H100 at the
    # record's shapes, W 14, when one setting served all three kernels (docs/BENCHMARKS.md, "Tile
    # sweep" and "Per-kernel settings": 3 stages overflow the backward kernels' shared memory; the
    # forward alone prefers 128/128 tiles and 8 warps); they stay until a per-kernel sweep runs on a GPU.
    forward: KernelTiles = KernelTiles()
    dq: KernelTiles = KernelTiles()
    dkdv: KernelTiles = KernelTiles()

    @classmethod
    def uniform(cls, block_q: int = 64, block_k: int = 64, num_warps: int = 4, num_stages: int = 2) -> Tiles:
        """The same tiles and launch settings for the forward, dQ and dK/dV kernels."""
        same = KernelTiles(block_q, block_k, num_warps, num_stages)
        return cls(forward=same, dq=same, dkdv=same)

    def check(self, mask_block: int) -> None:
        for kernel in ("forward", "dq", "dkdv"):
            getattr(self, kernel).check(mask_block, kernel)


def _scores(q: jax.Array, k: jax.Array, scale: float) -> jax.Array:
    """(bq, Dh) x (bk, Dh) -> (bq, bk) fp32 scaled scores."""
    s = lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    return s * scale


def _allowed(q_pos, q_doc, k_pos, k_doc) -> jax.Array:
    """The record's mask_mod on a tile: (bq, bk) bool, k <= q and the same document."""
    return (k_pos[None, :] <= q_pos[:, None]) & (k_doc[None, :] == q_doc[:, None])


def _key_tile(q, q_pos, q_doc, k_ref, v_ref, kdoc_ref, start, block_k: int, scale: float, masked: bool):
    """Keys and values of the tile at `start` and its (bq, bk) fp32 scores, masked in a partial block."""
    k = k_ref[pl.ds(start, block_k), :]
    v = v_ref[pl.ds(start, block_k), :]
    s = _scores(q, k, scale)
    if masked:
        k_pos = start + lax.broadcasted_iota(jnp.int32, (block_k,), 0)
        s = jnp.where(_allowed(q_pos, q_doc, k_pos, kdoc_ref[pl.ds(start, block_k)]), s, -jnp.inf)
    return k, v, s


def _walk(count_ref, index_ref, row: jax.Array, tiles_per_block: int, tile: int, mask_block: int,
          visit, carry):
    """For each of the first count[row] listed blocks, call visit(start, carry) per tile."""

    def one_block(entry, carry):
        block = index_ref[row, entry]
        for sub in range(tiles_per_block):  # static: the tiles of one mask block
            carry = visit(block * mask_block + sub * tile, carry)
        return carry

    return lax.fori_loop(0, count_ref[row], one_block, carry)


# ---------------------------------------------------------------------------------------------
# Kernels (one program per (batch, head, tile))


def _forward_kernel(pc_ref, pi_ref, fc_ref, fi_ref, q_ref, k_ref, v_ref, qdoc_ref, kdoc_ref,
                    o_ref, lse_ref, *, scale, block_q, block_k, mask_block):
    first = pl.program_id(2) * block_q
    row = first // mask_block
    q = q_ref[...]
    q_pos = first + lax.broadcasted_iota(jnp.int32, (block_q,), 0)
    q_doc = qdoc_ref[...]

    def visit(masked):
        def step(start, carry):
            m, row_sum, acc = carry
            _, v, s = _key_tile(q, q_pos, q_doc, k_ref, v_ref, kdoc_ref, start, block_k, scale, masked)
            m_new = jnp.maximum(m, jnp.max(s, axis=1))
            # A row that has seen only masked keys keeps m = -inf: shift by 0 so exp gives 0, not NaN.
            shift = jnp.where(m_new == -jnp.inf, 0.0, m_new)
            alpha = jnp.exp(m - shift)
            p = jnp.exp(s - shift[:, None])
            pv = jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
            return m_new, alpha * row_sum + jnp.sum(p, axis=1), alpha[:, None] * acc + pv

        return step

    carry = (jnp.full((block_q,), -jnp.inf, jnp.float32), jnp.zeros((block_q,), jnp.float32),
             jnp.zeros((block_q, v_ref.shape[-1]), jnp.float32))
    tiles = mask_block // block_k
    carry = _walk(pc_ref, pi_ref, row, tiles, block_k, mask_block, visit(True), carry)
    m, row_sum, acc = _walk(fc_ref, fi_ref, row, tiles, block_k, mask_block, visit(False), carry)
    o_ref[...] = (acc / row_sum[:, None]).astype(o_ref.dtype)  # every query sees itself: row_sum > 0
    lse_ref[...] = m + jnp.log(row_sum)


def _dq_kernel(pc_ref, pi_ref, fc_ref, fi_ref, q_ref, k_ref, v_ref, qdoc_ref, kdoc_ref,
               do_ref, lse_ref, delta_ref, dq_ref, *, scale, block_q, block_k, mask_block):
    first = pl.program_id(2) * block_q
    row = first // mask_block
    q, do = q_ref[...], do_ref[...]
    lse, delta = lse_ref[...], delta_ref[...]
    q_pos = first + lax.broadcasted_iota(jnp.int32, (block_q,), 0)
    q_doc = qdoc_ref[...]

    def visit(masked):
        def step(start, dq):
            k, v, s = _key_tile(q, q_pos, q_doc, k_ref, v_ref, kdoc_ref, start, block_k, scale, masked)
            p = jnp.exp(s - lse[:, None])
            dp = lax.dot_general(do, v, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
            ds = p * (dp - delta[:, None])
            return dq + jnp.dot(ds.astype(k.dtype), k, preferred_element_type=jnp.float32)

        return step

    dq = jnp.zeros(q.shape, jnp.float32)
    tiles = mask_block // block_k
    dq = _walk(pc_ref, pi_ref, row, tiles, block_k, mask_block, visit(True), dq)
    dq = _walk(fc_ref, fi_ref, row, tiles, block_k, mask_block, visit(False), dq)
    dq_ref[...] = (dq * scale).astype(dq_ref.dtype)


def _dkdv_kernel(pc_ref, pi_ref, fc_ref, fi_ref, q_ref, k_ref, v_ref, qdoc_ref, kdoc_ref,
                 do_ref, lse_ref, delta_ref, dk_ref, dv_ref, *, scale, block_q, block_k, mask_block):
    first = pl.program_id(2) * block_k
    row = first // mask_block  # this tile's key block; the lists here are the q-side ones
    k, v = k_ref[...], v_ref[...]
    k_pos = first + lax.broadcasted_iota(jnp.int32, (block_k,), 0)
    k_doc = kdoc_ref[...]
    transposed = (((0,), (0,)), ((), ()))  # contract the query axis: A^T @ B

    def visit(masked):
        def step(start, carry):
            dk, dv = carry
            q = q_ref[pl.ds(start, block_q), :]
            do = do_ref[pl.ds(start, block_q), :]
            lse = lse_ref[pl.ds(start, block_q)]
            delta = delta_ref[pl.ds(start, block_q)]
            s = _scores(q, k, scale)
            if masked:
                q_pos = start + lax.broadcasted_iota(jnp.int32, (block_q,), 0)
                s = jnp.where(_allowed(q_pos, qdoc_ref[pl.ds(start, block_q)], k_pos, k_doc), s, -jnp.inf)
            p = jnp.exp(s - lse[:, None])
            dv = dv + lax.dot_general(p.astype(do.dtype), do, transposed, preferred_element_type=jnp.float32)
            dp = lax.dot_general(do, v, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
            ds = p * (dp - delta[:, None])
            dk = dk + lax.dot_general(ds.astype(q.dtype), q, transposed, preferred_element_type=jnp.float32)
            return dk, dv

        return step

    carry = (jnp.zeros(k.shape, jnp.float32), jnp.zeros(v.shape, jnp.float32))
    tiles = mask_block // block_q
    carry = _walk(pc_ref, pi_ref, row, tiles, block_q, mask_block, visit(True), carry)
    dk, dv = _walk(fc_ref, fi_ref, row, tiles, block_q, mask_block, visit(False), carry)
    dk_ref[...] = (dk * scale).astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)


# ---------------------------------------------------------------------------------------------
# pallas_call plumbing


@dataclass(frozen=True)
class _Static:
    scale: float
    mask_block: int
    tiles: Tiles
    interpret: bool


def _list_specs(lists, n_blocks: int, width: int):
    """Specs of (partial counts, partial indices, full counts, full indices) for grid (B, H, tile)."""
    counts = pl.BlockSpec((None, n_blocks), lambda b, h, t: (b, 0))
    indices = pl.BlockSpec((None, n_blocks, width), lambda b, h, t: (b, 0, 0))
    return [counts, indices, counts, indices], list(lists)


def _token_spec(tile: int | None, seq_len: int, dim: int):
    """(B, T, H, dim) -> one head's tile of `tile` tokens (or the whole sequence when None)."""
    if tile is None:
        return pl.BlockSpec((None, seq_len, None, dim), lambda b, h, t: (b, 0, h, 0))
    return pl.BlockSpec((None, tile, None, dim), lambda b, h, t: (b, t, h, 0))


def _doc_spec(tile: int | None, seq_len: int):
    if tile is None:
        return pl.BlockSpec((None, seq_len), lambda b, h, t: (b, 0))
    return pl.BlockSpec((None, tile), lambda b, h, t: (b, t))


def _row_spec(tile: int | None, seq_len: int):
    """(B, H, T) fp32 per-query statistics (log-sum-exp, delta)."""
    if tile is None:
        return pl.BlockSpec((None, None, seq_len), lambda b, h, t: (b, h, 0))
    return pl.BlockSpec((None, None, tile), lambda b, h, t: (b, h, t))


def _call(kernel, static: _Static, launch: KernelTiles, grid, in_specs, out_specs, out_shape, name: str):
    return pl.pallas_call(
        kernel, grid=grid, in_specs=in_specs, out_specs=out_specs, out_shape=out_shape,
        interpret=static.interpret, name=name,
        compiler_params=None if static.interpret else triton_params(launch.num_warps, launch.num_stages),
    )


def _forward(static: _Static, q, k, v, doc_ids, lists: KernelBlockLists):
    batch, seq_len, heads, head_dim = q.shape
    value_dim = v.shape[-1]
    n_blocks, width = lists.kv.kv_indices.shape[1:]
    launch = static.tiles.forward
    bq, bk = launch.block_q, launch.block_k
    list_specs, list_args = _list_specs(lists.kv, n_blocks, width)
    kernel = functools.partial(_forward_kernel, scale=static.scale, block_q=bq, block_k=bk, mask_block=static.mask_block)
    return _call(
        kernel, static, launch, (batch, heads, seq_len // bq),
        list_specs + [_token_spec(bq, seq_len, head_dim), _token_spec(None, seq_len, head_dim),
                      _token_spec(None, seq_len, value_dim), _doc_spec(bq, seq_len), _doc_spec(None, seq_len)],
        [_token_spec(bq, seq_len, value_dim), _row_spec(bq, seq_len)],
        [out_struct((batch, seq_len, heads, value_dim), q.dtype, q), out_struct((batch, heads, seq_len), jnp.float32, q)],
        "block_sparse_attention_fwd",
    )(*list_args, q, k, v, doc_ids, doc_ids)


def _backward(static: _Static, q, k, v, doc_ids, lists: KernelBlockLists, out, lse, d_out):
    batch, seq_len, heads, head_dim = q.shape
    value_dim = v.shape[-1]
    n_blocks, width = lists.kv.kv_indices.shape[1:]
    delta = softmax_backward_rows(out, d_out)
    tiles = static.tiles
    common = dict(scale=static.scale, mask_block=static.mask_block)

    bq, bk = tiles.dq.block_q, tiles.dq.block_k
    specs, args = _list_specs(lists.kv, n_blocks, width)
    d_q = _call(
        functools.partial(_dq_kernel, block_q=bq, block_k=bk, **common), static, tiles.dq,
        (batch, heads, seq_len // bq),
        specs + [_token_spec(bq, seq_len, head_dim), _token_spec(None, seq_len, head_dim),
                 _token_spec(None, seq_len, value_dim), _doc_spec(bq, seq_len), _doc_spec(None, seq_len),
                 _token_spec(bq, seq_len, value_dim), _row_spec(bq, seq_len), _row_spec(bq, seq_len)],
        _token_spec(bq, seq_len, head_dim), out_struct(q.shape, q.dtype, q), "block_sparse_attention_dq",
    )(*args, q, k, v, doc_ids, doc_ids, d_out, lse, delta)

    bq, bk = tiles.dkdv.block_q, tiles.dkdv.block_k
    specs, args = _list_specs(lists.q, n_blocks, width)
    d_k, d_v = _call(
        functools.partial(_dkdv_kernel, block_q=bq, block_k=bk, **common), static, tiles.dkdv,
        (batch, heads, seq_len // bk),
        specs + [_token_spec(None, seq_len, head_dim), _token_spec(bk, seq_len, head_dim),
                 _token_spec(bk, seq_len, value_dim), _doc_spec(None, seq_len), _doc_spec(bk, seq_len),
                 _token_spec(None, seq_len, value_dim), _row_spec(None, seq_len), _row_spec(None, seq_len)],
        [_token_spec(bk, seq_len, head_dim), _token_spec(bk, seq_len, value_dim)],
        [out_struct(k.shape, k.dtype, k), out_struct(v.shape, v.dtype, v)],
        "block_sparse_attention_dkdv",
    )(*args, q, k, v, doc_ids, doc_ids, d_out, lse, delta)
    return d_q, d_k, d_v


def softmax_backward_rows(out: jax.Array, d_out: jax.Array) -> jax.Array:
    """delta_i = sum_d dO_id O_id, the softmax backward's row term: (B, T, H, D) x2 -> (B, H, T) fp32."""
    return jnp.einsum("bthd,bthd->bht", d_out.astype(jnp.float32), out.astype(jnp.float32))


def kernel_attention_vjp(forward, backward):
    """attention(static, q, k, v, masking, lists) -> out, differentiable in q, k, v, from a
    kernel pair: forward(static, q, k, v, masking, lists) -> (out, lse) and backward(static, q,
    k, v, masking, lists, out, lse, d_out) -> (dq, dk, dv). `static` is hashable; `masking`
    (what the kernels mask with) and `lists` are integers, so they get no cotangent."""

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def attention(static, q, k, v, masking, lists):
        return forward(static, q, k, v, masking, lists)[0]

    def attention_fwd(static, q, k, v, masking, lists):
        out, lse = forward(static, q, k, v, masking, lists)
        return out, (q, k, v, masking, lists, out, lse)

    def attention_bwd(static, residuals, d_out):
        return (*backward(static, *residuals, d_out), None, None)

    attention.defvjp(attention_fwd, attention_bwd)
    return attention


_attention = kernel_attention_vjp(_forward, _backward)


def _check_kernel_limits(q, v, mask_block: int, tiles: Tiles) -> None:
    """What the kernels support beyond any attention call's inputs (masks.check_attention_inputs)."""
    for name, dim in (("head dim", q.shape[-1]), ("value head dim", v.shape[-1])):
        if dim not in SUPPORTED_HEAD_DIMS:
            raise ValueError(f"the pallas attention kernel supports a {name} in {SUPPORTED_HEAD_DIMS}, got {dim}")
    tiles.check(mask_block)


def flash_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, doc_ids: jax.Array, window_blocks: int | jax.Array, *,
    scale: float = 0.12, block_size: int = BLOCK_SIZE, max_window_blocks: int = 14,
    lists: KernelBlockLists | None = None, tiles: Tiles = Tiles(), interpret: bool | None = None,
) -> jax.Array:
    """Document-causal block-window attention through the Pallas kernels; differentiable in q, k, v.

    q, k: (B, T, H, Dh); v: (B, T, H, Dv); doc_ids: (B, T) int; window_blocks: W in 128-token
    blocks (an int in 0..max_window_blocks, or a traced int32 clamped to it; 0 acts as 1). `lists`: the
    lists from `kernel_block_lists(doc_ids, window_blocks, ...)`, to share them between layers;
    built here when None. Returns (B, T, H, Dv) in q's dtype; softmax statistics are fp32.
    """
    check_attention_inputs(q, k, v, doc_ids, window_blocks, block_size=block_size, max_window_blocks=max_window_blocks)
    _check_kernel_limits(q, v, block_size, tiles)
    if lists is None:
        lists = kernel_block_lists(doc_ids, window_blocks, max_window_blocks=max_window_blocks, block_size=block_size)
    check_kernel_lists(lists, q.shape[0], q.shape[1], block_size)
    static = _Static(float(scale), block_size, tiles, default_interpret() if interpret is None else interpret)
    return _attention(static, q, k, v, doc_ids.astype(jnp.int32), lists)
