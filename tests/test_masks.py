"""jaxgpt.masks against the record's block-list procedure, transcribed independently in NumPy.

The NumPy transcription below walks the procedure of RECORD.md section 3 with Python loops
(no argsort: the nearest-first order is written out as "True columns from high to low, then
False columns from high to low"), so it shares no code with the JAX implementation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpt import masks
from jaxgpt.config import BLOCK_SIZE, EOT_ID

NUM_BLOCKS = 16
SEQ_LEN = NUM_BLOCKS * BLOCK_SIZE
MAX_WINDOW = 14


# ----------------------------------------------------------------------------------------------
# Independent NumPy transcription of the record's procedure.


def np_document_ids(tokens: np.ndarray) -> np.ndarray:
    ids = np.zeros(len(tokens), dtype=np.int64)
    seen = 0
    for t, token in enumerate(tokens):
        seen += int(token == EOT_ID)
        ids[t] = seen
    return ids


def np_block_lists(tokens: np.ndarray) -> tuple[list[int], list[list[int]], list[int], list[list[int]]]:
    """(partial_counts, partial_order, full_counts, full_order), untruncated, as Python lists."""
    ids = np_document_ids(tokens)
    n = len(tokens) // BLOCK_SIZE
    low = [ids[i * BLOCK_SIZE] for i in range(n)]
    high = [ids[i * BLOCK_SIZE + BLOCK_SIZE - 1] for i in range(n)]
    lists = {"partial": ([], []), "full": ([], [])}
    for i in range(n):
        row = {"partial": [], "full": []}
        for j in range(n):
            overlap = low[i] <= high[j] and low[j] <= high[i]
            one_doc = low[i] == high[j] and low[j] == high[i]
            is_full = i > j and one_doc
            row["full"].append(is_full)
            row["partial"].append(i >= j and overlap and not is_full)
        for kind in ("partial", "full"):
            true_cols = [j for j in range(n - 1, -1, -1) if row[kind][j]]
            false_cols = [j for j in range(n - 1, -1, -1) if not row[kind][j]]
            lists[kind][0].append(len(true_cols))
            lists[kind][1].append(true_cols + false_cols)
    return lists["partial"][0], lists["partial"][1], lists["full"][0], lists["full"][1]


def np_dense_mask(tokens: np.ndarray, window: int) -> np.ndarray:
    """Expand the truncated lists: full blocks whole, partial blocks through the mask_mod."""
    ids = np_document_ids(tokens)
    partial_counts, partial_order, full_counts, full_order = np_block_lists(tokens)
    n = len(tokens) // BLOCK_SIZE
    allowed = np.zeros((len(tokens), len(tokens)), dtype=bool)
    positions = np.arange(BLOCK_SIZE)
    for i in range(n):
        full_kept = max(min(full_counts[i], window - 1), 0)  # -1 at window 0 reads as 0
        partial_kept = max(min(partial_counts[i], max(window - full_counts[i], 1)), 0)
        rows = slice(i * BLOCK_SIZE, (i + 1) * BLOCK_SIZE)
        for j in full_order[i][:full_kept]:
            allowed[rows, j * BLOCK_SIZE : (j + 1) * BLOCK_SIZE] = True
        for j in partial_order[i][:partial_kept]:
            q_pos = i * BLOCK_SIZE + positions[:, None]
            k_pos = j * BLOCK_SIZE + positions[None, :]
            mask_mod = (q_pos >= k_pos) & (ids[q_pos] == ids[k_pos])
            allowed[rows, j * BLOCK_SIZE : (j + 1) * BLOCK_SIZE] |= mask_mod
    return allowed


# ----------------------------------------------------------------------------------------------
# Document layouts.


def _tokens_with_eots(eot_positions, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, EOT_ID, SEQ_LEN)  # never EOT by construction
    tokens[list(eot_positions)] = EOT_ID
    return tokens


def _random_layout(seed: int, count: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return _tokens_with_eots(rng.choice(SEQ_LEN, count, replace=False), seed)


LAYOUTS = {
    "no_eot": _tokens_with_eots([]),
    "eot_at_0_only": _tokens_with_eots([0]),
    "block_boundaries": _tokens_with_eots([0, 127, 128, 640, 1023, 1024]),
    "docs_crossing_blocks": _tokens_with_eots([0, 200, 700, 1500, 1501]),
    "long_doc_then_short": _tokens_with_eots([5, 1900, 1950, 2000]),
    "random_few": _random_layout(1, 4),
    "random_many": _random_layout(2, 40),
    "every_block_start": _tokens_with_eots(range(0, SEQ_LEN, BLOCK_SIZE)),
}


@pytest.fixture(scope="module")
def jit_dense_mask():
    # The window is traced, so one compilation covers every window.
    return jax.jit(masks.dense_mask)


@pytest.fixture(scope="module")
def jit_closed_form():
    return jax.jit(masks.closed_form_mask)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_dense_mask_equals_record_procedure_and_closed_form(layout, jit_dense_mask, jit_closed_form):
    tokens = LAYOUTS[layout]
    doc_ids = masks.document_ids(jnp.asarray(tokens))
    for window in range(MAX_WINDOW + 1):
        got = np.asarray(jit_dense_mask(jnp.asarray(tokens), jnp.int32(window)))
        expected = np_dense_mask(tokens, window)
        np.testing.assert_array_equal(got, expected, err_msg=f"{layout}, window {window}: vs NumPy procedure")
        closed = np.asarray(jit_closed_form(doc_ids, jnp.int32(window)))
        np.testing.assert_array_equal(got, closed, err_msg=f"{layout}, window {window}: vs closed form")


def test_layouts_exercise_full_blocks_and_truncation():
    # Guard against a test set that never meets the interesting cases.
    assert max(np_block_lists(LAYOUTS["no_eot"])[2]) >= MAX_WINDOW  # every window truncates
    assert max(np_block_lists(LAYOUTS["long_doc_then_short"])[2]) >= 8
    assert np.array(np_block_lists(LAYOUTS["random_many"])[0]).max() >= 2  # several partial blocks


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_block_lists_equal_numpy_transcription(layout):
    tokens = LAYOUTS[layout]
    lists = masks.block_lists(masks.document_ids(jnp.asarray(tokens)))
    partial_counts, partial_order, full_counts, full_order = np_block_lists(tokens)
    np.testing.assert_array_equal(np.asarray(lists.kv_num_blocks), partial_counts)
    np.testing.assert_array_equal(np.asarray(lists.full_kv_num_blocks), full_counts)
    # The whole permutation matches, padding included.
    np.testing.assert_array_equal(np.asarray(lists.kv_indices), partial_order)
    np.testing.assert_array_equal(np.asarray(lists.full_kv_indices), full_order)
    for field in lists:
        assert field.dtype == jnp.int32


def test_block_lists_are_nearest_first():
    tokens = LAYOUTS["long_doc_then_short"]
    lists = masks.block_lists(masks.document_ids(jnp.asarray(tokens)))
    partial, full = (np.asarray(m) for m in masks.block_matrices(masks.document_ids(jnp.asarray(tokens))))
    for counts, indices, matrix in (
        (lists.kv_num_blocks, lists.kv_indices, partial),
        (lists.full_kv_num_blocks, lists.full_kv_indices, full),
    ):
        for i in range(NUM_BLOCKS):
            count = int(counts[i])
            listed = np.asarray(indices[i])
            assert matrix[i, listed[:count]].all() and not matrix[i, listed[count:]].any()
            assert (np.diff(listed[:count]) < 0).all(), f"row {i}: True blocks not in decreasing order"
    # A query deep in the long document: its first full entries are the blocks right behind it.
    assert list(np.asarray(lists.full_kv_indices[12, :3])) == [11, 10, 9]


def test_descending_argsort_would_give_farthest_first():
    # Documents the pitfall of RECORD.md 11.3: a stable descending sort lists True blocks in
    # increasing order, which is not what the record truncates.
    row = jnp.array([False, True, True, False, True])
    descending = list(np.asarray(jnp.argsort(row, descending=True, stable=True)[:3]))
    _, nearest = masks.dense_to_ordered(row[None])
    assert descending == [1, 2, 4]
    assert list(np.asarray(nearest[0, :3])) == [4, 2, 1]


def test_truncation_at_window_zero_gives_minus_one_then_clamped():
    lists = masks.block_lists(masks.document_ids(jnp.asarray(LAYOUTS["no_eot"])))
    truncated = masks.truncate_to_window(lists, 0)
    # min(count, w - 1) = -1 for every block, even block 0 whose full count is 0.
    np.testing.assert_array_equal(np.asarray(truncated.full_kv_num_blocks), np.full(NUM_BLOCKS, -1))
    np.testing.assert_array_equal(np.asarray(truncated.kv_num_blocks), np.ones(NUM_BLOCKS))
    clamped = masks.clamp_counts(truncated)
    np.testing.assert_array_equal(np.asarray(clamped.full_kv_num_blocks), np.zeros(NUM_BLOCKS))
    # Window 0 and window 1 allow the same set (only the query's own block).
    tokens = jnp.asarray(LAYOUTS["random_few"])
    np.testing.assert_array_equal(np.asarray(masks.dense_mask(tokens, 0)), np.asarray(masks.dense_mask(tokens, 1)))


def test_window_truncation_keeps_record_counts():
    lists = masks.block_lists(masks.document_ids(jnp.asarray(LAYOUTS["long_doc_then_short"])))
    for window in (1, 3, 7, 14):
        truncated = masks.truncate_to_window(lists, window)
        full = np.asarray(lists.full_kv_num_blocks)
        partial = np.asarray(lists.kv_num_blocks)
        np.testing.assert_array_equal(np.asarray(truncated.full_kv_num_blocks), np.minimum(full, window - 1))
        np.testing.assert_array_equal(
            np.asarray(truncated.kv_num_blocks), np.minimum(partial, np.maximum(window - full, 1))
        )


def test_document_ids():
    tokens = jnp.array([7, EOT_ID, 3, EOT_ID, EOT_ID, 9])
    ids = masks.document_ids(tokens)
    assert ids.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(ids), [0, 1, 1, 2, 3, 3])
    batched = masks.document_ids(jnp.stack([tokens, tokens[::-1]]))
    np.testing.assert_array_equal(np.asarray(batched[1]), [0, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(np.asarray(masks.document_ids(tokens, eot_id=3)), [0, 0, 1, 1, 1, 1])


def test_traced_window_matches_static():
    lists = masks.block_lists(masks.document_ids(jnp.asarray(LAYOUTS["random_many"])))
    jitted = jax.jit(masks.truncate_to_window)
    for window in (0, 1, 5, 14):
        static = masks.truncate_to_window(lists, window)
        traced = jitted(lists, jnp.int32(window))
        for a, b in zip(static, traced):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_lengths_raise():
    with pytest.raises(ValueError, match="multiple of the block size"):
        masks.dense_mask(jnp.zeros(200, jnp.int32), 2)
    with pytest.raises(ValueError, match="multiple of the block size"):
        masks.closed_form_mask(jnp.zeros(100, jnp.int32), 2)
    with pytest.raises(ValueError, match="1-D"):
        masks.dense_mask(jnp.zeros((2, 128), jnp.int32), 2)
    with pytest.raises(ValueError, match="multiple of the block size"):
        masks.block_lists(jnp.zeros(0, jnp.int32))
