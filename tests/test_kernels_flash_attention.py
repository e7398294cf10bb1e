"""jaxgpt.kernels.flash_attention (Pallas, interpret mode on the CPU) against the `dense` backend.

Sizes stay tiny (T = 512 = 4 mask blocks, 2 heads of 16) because interpret mode runs each
kernel program as traced JAX; tiles smaller than the 128-token mask block make every list
entry span several kernel tiles, as on the GPU. Names contain "pallas" (`pytest -k pallas`).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgpt import attention, compat, masks
from jaxgpt.kernels.block_lists import kernel_block_lists
from jaxgpt.kernels.flash_attention import KernelTiles, Tiles, flash_attention
from jaxgpt.testing import record_like_attention_inputs

T, HEADS, DIM, CAP = 512, 2, 16, 3
TILES = Tiles(forward=KernelTiles(64, 32), dq=KernelTiles(64, 32), dkdv=KernelTiles(32, 64))
LAYOUTS = {
    "crossing_block_edges": [5, 130, 131, 300],  # documents straddle block edges; block 2 has no full blocks
    "no_eot": [],
    "starts_with_eot": [0, 400],
}


def _inputs(layout, dtype=jnp.float32, batch=1, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 1000, size=(batch, T))
    tokens[:, LAYOUTS[layout]] = 50256
    q, k, v = (jnp.asarray(rng.standard_normal((batch, T, HEADS, DIM)), dtype) for _ in range(3))
    return q, k, v, masks.document_ids(jnp.asarray(tokens))


def _grads(fn, q, k, v):
    """Gradients of a position-weighted sum, so every output row gets its own cotangent."""
    weights = jnp.sin(jnp.arange(T, dtype=jnp.float32))[None, :, None, None]
    return jax.grad(lambda q, k, v: (fn(q, k, v).astype(jnp.float32) * weights).sum(), argnums=(0, 1, 2))(q, k, v)


def _pallas(ids, window):
    return lambda q, k, v: flash_attention(q, k, v, ids, window, max_window_blocks=CAP, tiles=TILES)


def _dense(ids, window):
    return lambda q, k, v: attention.dense_attention(q, k, v, ids, window)


def _rel(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.slow
@pytest.mark.parametrize("layout,window", [("crossing_block_edges", 0), ("crossing_block_edges", 1),
                                           ("crossing_block_edges", 2), ("crossing_block_edges", CAP),
                                           ("no_eot", 2), ("starts_with_eot", CAP)])
def test_pallas_fp32_outputs_and_gradients_equal_dense(layout, window):
    q, k, v, ids = _inputs(layout)
    # fp32 throughout; only the summation order differs (online softmax, per-tile sums): 1e-5.
    assert _rel(_pallas(ids, window)(q, k, v), _dense(ids, window)(q, k, v)) < 1e-5
    for got, want in zip(_grads(_pallas(ids, window), q, k, v), _grads(_dense(ids, window), q, k, v)):
        assert _rel(got, want) < 1e-5


@pytest.mark.slow
def test_pallas_bf16_within_two_bf16_rounding_steps_of_dense():
    q, k, v, ids = _inputs("crossing_block_edges", jnp.bfloat16)
    out, ref = _pallas(ids, 2)(q, k, v), _dense(ids, 2)(q, k, v)
    # Both round p to bf16 for the PV product (relative 2^-9 each, against different running
    # maxima) and round the output to bf16 (2^-9): at most about 2 bf16 steps (2 * 2^-8) of the
    # largest output. Measured 0.0078 abs (max |out| ~1.9) on an H100 at T = 8192.
    assert _rel(out, ref) <= 2 * 2.0**-8
    for got, want in zip(_grads(_pallas(ids, 2), q, k, v), _grads(_dense(ids, 2), q, k, v)):
        # Gradients add bf16 roundings of p, dS and dO products: bf16 level, 2e-2 of the largest
        # entry (measured on an H100: <= 6.3e-3 at T = 8192, windows 1..14).
        assert _rel(got, want) < 2e-2


@pytest.mark.slow
def test_pallas_traced_window_compiles_once_and_is_shared_by_jit_and_shard_map():
    """The window is a traced value: one compilation serves windows 1 and 3; under shard_map
    each of 2 devices attends over its own sequence with lists built from its own doc ids."""
    q, k, v, ids = _inputs("crossing_block_edges", batch=2)
    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))

    def local(q, k, v, ids, window):
        lists = kernel_block_lists(ids, window, max_window_blocks=CAP)
        return flash_attention(q, k, v, ids, window, max_window_blocks=CAP, tiles=TILES, lists=lists)

    spec = P("data")
    # check_vma=False: Pallas's interpreter cannot carry varying-axes types (jaxgpt.train does the same on a CPU).
    step = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, spec, P()), out_specs=spec, check_vma=False))
    put = lambda x: jax.device_put(x, NamedSharding(mesh, spec))
    for window in (1, 3):
        got = step(put(q), put(k), put(v), put(ids), jnp.int32(window))
        assert _rel(got, _dense(ids, window)(q, k, v)) < 1e-5
    assert step._cache_size() == 1


def test_pallas_is_the_attention_backend():
    q, k, v, ids = _inputs("starts_with_eot")
    got = attention.attention(q, k, v, ids, 2, backend="pallas", max_window_blocks=CAP)
    assert _rel(got, _dense(ids, 2)(q, k, v)) < 1e-5


def test_pallas_bad_input_gets_a_clear_error():
    q, k, v, ids = _inputs("no_eot")
    with pytest.raises(ValueError, match="multiple of block_size 128"):
        flash_attention(q[:, :200], k[:, :200], v[:, :200], ids[:, :200], 1)
    with pytest.raises(ValueError, match="forward.block_k=48 must be a power of two >= 16 that divides"):
        flash_attention(q, k, v, ids, 1, tiles=Tiles.uniform(block_k=48))
    with pytest.raises(ValueError, match="dkdv.block_q=256"):
        flash_attention(q, k, v, ids, 1, tiles=Tiles(dkdv=KernelTiles(block_q=256)))
    with pytest.raises(ValueError, match="dq.num_warps=3 must be a power of two"):
        flash_attention(q, k, v, ids, 1, tiles=Tiles(dq=KernelTiles(num_warps=3)))
    wide = jnp.zeros((1, T, HEADS, 24), jnp.float32)
    with pytest.raises(ValueError, match="head dim in .* got 24"):
        flash_attention(wide, wide, v, ids, 1)
    other = kernel_block_lists(masks.document_ids(jnp.zeros((1, 1024), jnp.int32)), 1)
    with pytest.raises(ValueError, match=r"block list kv.kv_num_blocks has shape \(1, 8\); T=512 needs \(B, N\)"):
        flash_attention(q, k, v, ids, 1, lists=other)


def test_pallas_kernels_lower_to_triton_for_a_gpu_on_this_cpu():
    """Lowering for CUDA needs no GPU: forward, dQ and dK/dV become Triton custom calls. (This
    cannot catch what only Triton's compiler sees; the gpu-marked test runs the kernels.)"""
    shape = jax.ShapeDtypeStruct((1, 1024, 2, 128), jnp.bfloat16)
    ids = jax.ShapeDtypeStruct((1, 1024), jnp.int32)

    def fwd_bwd(q, k, v, ids, window):
        fn = lambda q, k, v: flash_attention(q, k, v, ids, window, interpret=False).astype(jnp.float32).sum()
        return jax.grad(fn, argnums=(0, 1, 2))(q, k, v)

    window = jax.ShapeDtypeStruct((), jnp.int32)
    text = compat.lower_for_gpu(jax.jit(fwd_bwd), shape, shape, shape, ids, window).as_text()
    assert text.count("__gpu$xla.gpu.triton") == 3


# A different tile and launch setting for each kernel (the forward as the H100 sweep's fastest
# forward: 128/128 tiles, 8 warps); each also differs from the defaults (64/64, 4 warps, 2 stages).
PER_KERNEL = Tiles(forward=KernelTiles(128, 128, num_warps=8), dq=KernelTiles(32, 64, num_stages=1),
                   dkdv=KernelTiles(64, 32, num_warps=2, num_stages=3))


@pytest.mark.slow  # about 8 s: interpreted forward, dQ and dK/dV with three tilings
def test_pallas_per_kernel_tiles_give_the_same_outputs_and_gradients():
    q, k, v, ids = _inputs("crossing_block_edges")
    pallas = lambda q, k, v: flash_attention(q, k, v, ids, 2, max_window_blocks=CAP, tiles=PER_KERNEL)
    # fp32 throughout; tiles change only the summation order (online softmax, per-tile sums): 1e-5.
    assert _rel(pallas(q, k, v), _dense(ids, 2)(q, k, v)) < 1e-5
    for got, want in zip(_grads(pallas, q, k, v), _grads(_dense(ids, 2), q, k, v)):
        assert _rel(got, want) < 1e-5


def test_pallas_each_kernel_launches_with_its_own_tiles_warps_and_stages():
    """Lowered for CUDA (no GPU needed), each Triton call carries its kernel's settings: the grid
    counts that kernel's tiles of T = 1024 and num_warps / num_stages are its own."""
    shape = jax.ShapeDtypeStruct((1, 1024, 2, 128), jnp.bfloat16)
    ids = jax.ShapeDtypeStruct((1, 1024), jnp.int32)

    def fwd_bwd(q, k, v, ids, window):
        fn = lambda q, k, v: flash_attention(q, k, v, ids, window, tiles=PER_KERNEL, interpret=False)
        return jax.grad(lambda q, k, v: fn(q, k, v).astype(jnp.float32).sum(), argnums=(0, 1, 2))(q, k, v)

    window = jax.ShapeDtypeStruct((), jnp.int32)
    text = compat.lower_for_gpu(jax.jit(fwd_bwd), shape, shape, shape, ids, window).as_text()
    calls = re.findall(r'grid_z = (\d+) : i32.*?name = "block_sparse_attention_(\w+)".*?'
                       r"num_stages = (\d+) : i32.*?num_warps = (\d+) : i32", text)
    # forward: 1024 / 128 query tiles; dQ: 1024 / 32 query tiles; dK/dV: 1024 / 32 key tiles.
    assert sorted(calls) == sorted([("8", "fwd", "2", "8"), ("32", "dq", "1", "4"), ("32", "dkdv", "3", "2")]), calls


@pytest.mark.gpu
def test_pallas_on_gpu_matches_dense_at_8192_and_blocked_at_65536():
    rng = np.random.default_rng(0)
    for seq_len, reference, windows in ((8192, attention.dense_attention, (1, 7, 14)),
                                        (65536, attention.blocked_attention, (1, 14))):
        ids, q, k, v = record_like_attention_inputs(seq_len, rng)
        for window in windows:
            got = flash_attention(q, k, v, ids, window)
            want = reference(q, k, v, ids, window)
            assert _rel(got, want) <= 2 * 2.0**-8  # bound of the bf16 CPU test above
