"""jaxgpt.attention: dense vs blocked, gradients, causality, document isolation, dtypes, scale."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpt import masks
from jaxgpt.attention import attention
from jaxgpt.config import BLOCK_SIZE, EOT_ID

BATCH, HEADS, HEAD_DIM = 2, 2, 16
NUM_BLOCKS = 8
SEQ_LEN = NUM_BLOCKS * BLOCK_SIZE
MAX_WINDOW = 6  # > NUM_BLOCKS / 2 so the padding in front of the first blocks is exercised
BACKENDS = ("dense", "blocked")


def _doc_ids(eot_rows: list[list[int]], seq_len: int = SEQ_LEN) -> jax.Array:
    tokens = np.zeros((len(eot_rows), seq_len), dtype=np.int32)
    for row, positions in enumerate(eot_rows):
        tokens[row, positions] = EOT_ID
    return masks.document_ids(jnp.asarray(tokens))


DOC_LAYOUTS = {
    # Row 0 and row 1 of the batch differ, so per-sequence masking is checked too.
    "one_doc_and_many": [[], [0, 90, 128, 129, 500, 700, 701, 1000]],
    "eot_at_0_and_crossing": [[0, 300, 900], [5, 640]],
}


def _qkv(seed: int, dtype=jnp.float32, seq_len: int = SEQ_LEN) -> tuple[jax.Array, jax.Array, jax.Array]:
    keys = jax.random.split(jax.random.key(seed), 3)
    # Unit-norm-ish rows like the record's QK-normed inputs, times a few so scores vary.
    return tuple(3.0 * jax.random.normal(key, (BATCH, seq_len, HEADS, HEAD_DIM), dtype) for key in keys)


def _assert_close_relative(actual, expected, rtol: float, what: str) -> None:
    """max |actual - expected| <= rtol * max |expected| (relative to the array's scale)."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    scale = np.max(np.abs(expected))
    assert scale > 0, f"{what}: reference is all zeros, the check would be empty"
    error = np.max(np.abs(actual - expected))
    assert error <= rtol * scale, f"{what}: max abs diff {error:.3g} > {rtol} * {scale:.3g}"


@functools.cache
def _loss_and_grads(backend: str):
    """jit of (out, grads w.r.t. q, k, v of <out, cotangent>) with a traced window."""

    def loss(q, k, v, doc_ids, window, cotangent):
        out = attention(q, k, v, doc_ids, window, backend=backend, max_window_blocks=MAX_WINDOW)
        return jnp.sum(out * cotangent), out

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))


@pytest.mark.slow  # ~10 s on 2 busy cores: two gradient compilations, 7 windows
@pytest.mark.parametrize("layout", sorted(DOC_LAYOUTS))
def test_dense_and_blocked_agree_fp32_outputs_and_grads(layout):
    doc_ids = _doc_ids(DOC_LAYOUTS[layout])
    q, k, v = _qkv(0)
    cotangent = jax.random.normal(jax.random.key(1), q.shape)
    for window in range(MAX_WINDOW + 1):
        w = jnp.int32(window)
        grads_dense, out_dense = _loss_and_grads("dense")(q, k, v, doc_ids, w, cotangent)
        grads_blocked, out_blocked = _loss_and_grads("blocked")(q, k, v, doc_ids, w, cotangent)
        # fp32 on both sides, same math up to summation order: 1e-5 of the array's scale.
        _assert_close_relative(out_blocked, out_dense, 1e-5, f"output, window {window}")
        for name, g_b, g_d in zip("qkv", grads_blocked, grads_dense):
            _assert_close_relative(g_b, g_d, 1e-5, f"d/d{name}, window {window}")


@pytest.mark.parametrize("num_blocks", [1, 3])
def test_sequences_shorter_than_the_window(num_blocks):
    # Fewer blocks than max_window_blocks: every window reaches into the padding.
    seq_len = num_blocks * BLOCK_SIZE
    doc_ids = _doc_ids([[0, 100], [200]] if num_blocks > 1 else [[0, 100], []], seq_len)
    q, k, v = _qkv(9, seq_len=seq_len)
    dense_fn = jax.jit(functools.partial(attention, backend="dense"))
    blocked_fn = jax.jit(functools.partial(attention, backend="blocked", max_window_blocks=14))
    for window in (0, 1, 2, 14):
        dense = dense_fn(q, k, v, doc_ids, jnp.int32(window))
        blocked = blocked_fn(q, k, v, doc_ids, jnp.int32(window))
        _assert_close_relative(blocked, dense, 1e-5, f"T={seq_len}, window {window}")  # fp32 rounding only


def test_dense_matches_a_numpy_softmax_reference():
    doc_ids = _doc_ids(DOC_LAYOUTS["eot_at_0_and_crossing"])
    q, k, v = _qkv(2)
    window = 3
    out = attention(q, k, v, doc_ids, window, backend="dense")
    qn, kn, vn = (np.asarray(x, np.float64) for x in (q, k, v))
    for b in range(BATCH):
        allowed = np.asarray(masks.closed_form_mask(doc_ids[b], window))
        scores = np.einsum("qhd,khd->hqk", qn[b], kn[b]) * 0.12  # the record's fixed scale
        scores = np.where(allowed[None], scores, -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        expected = np.einsum("hqk,khd->qhd", probs, vn[b])
        # fp32 kernel vs float64 NumPy: fp32 rounding only.
        _assert_close_relative(out[b], expected, 1e-5, f"sequence {b}")


def test_traced_window_equals_static_window():
    doc_ids = _doc_ids(DOC_LAYOUTS["one_doc_and_many"])
    q, k, v = _qkv(3)
    for backend in BACKENDS:
        jitted = jax.jit(functools.partial(attention, backend=backend, max_window_blocks=MAX_WINDOW))
        for window in (0, 2, MAX_WINDOW):
            static = attention(q, k, v, doc_ids, window, backend=backend, max_window_blocks=MAX_WINDOW)
            traced = jitted(q, k, v, doc_ids, jnp.int32(window))
            # Same program up to XLA fusion choices: fp32 rounding only.
            _assert_close_relative(traced, static, 1e-6, f"{backend}, window {window}")


@functools.cache
def _probe_gradients(backend: str):
    """jit of gradients of out[:, t] (random weights) w.r.t. q, k, v, window and t traced."""

    def probe(q, k, v, doc_ids, window, query_position, weights):
        out = attention(q, k, v, doc_ids, window, backend=backend, max_window_blocks=MAX_WINDOW)
        return jnp.sum(jnp.take(out, query_position, axis=1) * weights)

    return jax.jit(jax.grad(probe, argnums=(0, 1, 2)))


def _input_gradients(backend: str, doc_ids, window: int, query_position: int):
    """Gradients of out[:, query_position] w.r.t. q, k, v: (B, T, H, Dh) each."""
    q, k, v = _qkv(4)
    weights = jax.random.normal(jax.random.key(5), (BATCH, HEADS, HEAD_DIM))
    return _probe_gradients(backend)(q, k, v, doc_ids, jnp.int32(window), jnp.int32(query_position), weights)


def _nonzero_positions(grad: jax.Array, row: int) -> np.ndarray:
    return np.nonzero(np.any(np.asarray(grad[row]) != 0, axis=(-1, -2)))[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_causality_no_gradient_from_future_tokens(backend):
    doc_ids = _doc_ids([[], []])  # one document: only causality and the window restrict
    query_position = 700  # block 5, offset 60
    grad_q, grad_k, grad_v = _input_gradients(backend, doc_ids, MAX_WINDOW, query_position)
    for row in range(BATCH):
        for name, grad in (("k", grad_k), ("v", grad_v)):
            seen = _nonzero_positions(grad, row)
            assert seen.max() == query_position, f"{name}: gradient reaches position {seen.max()}"
            assert seen.min() == 0  # the window (6 blocks) covers everything before block 5
        assert list(_nonzero_positions(grad_q, row)) == [query_position]


@pytest.mark.parametrize("backend", BACKENDS)
def test_window_limits_gradient_to_recent_blocks(backend):
    doc_ids = _doc_ids([[], []])
    query_position = 7 * BLOCK_SIZE + 3
    for window in (0, 1, 3):
        _, grad_k, grad_v = _input_gradients(backend, doc_ids, window, query_position)
        first_visible_block = 7 - max(window, 1) + 1
        for grad in (grad_k, grad_v):
            seen = _nonzero_positions(grad, 0)
            assert seen.min() == first_visible_block * BLOCK_SIZE, f"window {window}"
            assert seen.max() == query_position


@pytest.mark.parametrize("backend", BACKENDS)
def test_document_isolation_no_gradient_across_eot(backend):
    eots = [[300, 420], [129, 420, 421]]
    doc_ids = _doc_ids(eots)
    query_position = 450  # inside the document opened at 420 (row 0) / 421 (row 1)
    grad_q, grad_k, grad_v = _input_gradients(backend, doc_ids, MAX_WINDOW, query_position)
    for row, doc_start in ((0, 420), (1, 421)):
        for grad in (grad_k, grad_v):
            seen = _nonzero_positions(grad, row)
            assert seen.min() == doc_start and seen.max() == query_position, f"row {row}: {seen.min()}..{seen.max()}"
        assert list(_nonzero_positions(grad_q, row)) == [query_position]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bf16_in_bf16_out_close_to_fp32(backend):
    doc_ids = _doc_ids(DOC_LAYOUTS["one_doc_and_many"])
    q, k, v = _qkv(6, jnp.bfloat16)
    out = attention(q, k, v, doc_ids, 4, backend=backend, max_window_blocks=MAX_WINDOW)
    assert out.dtype == jnp.bfloat16
    as_fp32 = [x.astype(jnp.float32) for x in (q, k, v)]
    reference = attention(*as_fp32, doc_ids, 4, backend=backend, max_window_blocks=MAX_WINDOW)
    assert reference.dtype == jnp.float32
    # Same (bf16-exact) inputs: the differences are bf16 probabilities in PV and the bf16
    # output cast, each ~2^-8 relative, so 1e-2 of the scale.
    _assert_close_relative(out.astype(jnp.float32), reference, 1e-2, f"{backend} bf16")


def test_scale_is_applied():
    doc_ids = _doc_ids([[], []])
    q, k, v = _qkv(7)
    default = attention(q, k, v, doc_ids, 2, backend="blocked")
    rescaled = attention(q * 2.0, k, v, doc_ids, 2, backend="blocked", scale=0.06)
    _assert_close_relative(rescaled, default, 1e-5, "scale 0.06 on 2q vs 0.12 on q")  # fp32 rounding only
    other = attention(q, k, v, doc_ids, 2, backend="blocked", scale=HEAD_DIM**-0.5)
    assert np.max(np.abs(np.asarray(other - default))) > 1e-2


def _lowered_text(fn, *shapes) -> str:
    return jax.jit(fn).lower(*shapes).as_text()


def test_blocked_at_record_length_never_builds_a_t_by_t_array():
    # T = 65536 as in the record (512 blocks, window 14), lowered only: nothing runs.
    seq_len = 64 * 1024
    qkv = jax.ShapeDtypeStruct((1, seq_len, 6, 128), jnp.bfloat16)
    ids = jax.ShapeDtypeStruct((1, seq_len), jnp.int32)
    window = jax.ShapeDtypeStruct((), jnp.int32)

    def blocked(q, k, v, doc_ids, w):
        return attention(q, k, v, doc_ids, w, backend="blocked", max_window_blocks=14)

    def blocked_grads(q, k, v, doc_ids, w):
        return jax.grad(lambda *x: jnp.sum(blocked(*x, doc_ids, w).astype(jnp.float32)), argnums=(0, 1, 2))(q, k, v)

    out = jax.eval_shape(blocked, qkv, qkv, qkv, ids, window)
    assert out.shape == (1, seq_len, 6, 128) and out.dtype == jnp.bfloat16
    t_by_t = f"{seq_len}x{seq_len}"
    for fn in (blocked, blocked_grads):
        text = _lowered_text(fn, qkv, qkv, qkv, ids, window)
        assert t_by_t not in text, f"{fn.__name__} lowers to an array with a {t_by_t} shape"
    # The check can fail: the dense backend does build one.
    dense = functools.partial(attention, backend="dense", max_window_blocks=14)
    assert t_by_t in _lowered_text(dense, qkv, qkv, qkv, ids, window)


def test_bad_inputs_raise():
    doc_ids = _doc_ids([[], []])
    q, k, v = _qkv(8)
    with pytest.raises(ValueError, match="outside 0..max_window_blocks"):
        attention(q, k, v, doc_ids, 15, max_window_blocks=14)
    with pytest.raises(ValueError, match="outside 0..max_window_blocks"):
        attention(q, k, v, doc_ids, -1)
    with pytest.raises(ValueError, match="outside 0..max_window_blocks"):
        attention(q, k, v, doc_ids, np.int64(15), max_window_blocks=14)
    with pytest.raises(ValueError, match="multiple of block_size"):
        attention(q[:, :200], k[:, :200], v[:, :200], doc_ids[:, :200], 2)
    with pytest.raises(ValueError, match="k shape"):
        attention(q, k[:, :, :1], v, doc_ids, 2)
    with pytest.raises(ValueError, match="v shape"):
        attention(q, k, v[:1], doc_ids, 2)
    with pytest.raises(ValueError, match="doc_ids shape"):
        attention(q, k, v, doc_ids[0], 2)
    with pytest.raises(ValueError, match=r"\(B, T, H, Dh\)"):
        attention(q[0], k[0], v[0], doc_ids, 2)
    with pytest.raises(ValueError, match="unknown attention backend"):
        attention(q, k, v, doc_ids, 2, backend="flash")


def test_auto_backend_is_blocked_on_a_cpu_and_pallas_where_kernels_compile():
    from jaxgpt.attention import resolve_backend
    from jaxgpt.kernels.flash_attention import compiled_kernels

    assert jax.default_backend() == "cpu"
    assert resolve_backend("auto") == "blocked"  # the interpreted kernel is for tests, not speed
    with compiled_kernels():  # what a GPU (or gpu_plan's compile-only H100) sees
        assert resolve_backend("auto") == "pallas"
    assert [resolve_backend(name) for name in ("dense", "blocked", "pallas")] == ["dense", "blocked", "pallas"]
    q, k, v = _qkv(5)
    doc_ids = _doc_ids(DOC_LAYOUTS["eot_at_0_and_crossing"])
    auto, blocked = (attention(q, k, v, doc_ids, 3, backend=name, max_window_blocks=MAX_WINDOW) for name in ("auto", "blocked"))
    np.testing.assert_array_equal(np.asarray(auto), np.asarray(blocked))
