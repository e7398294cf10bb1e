"""jaxgpt.kernels.block_lists and masks.transpose_block_lists: the lists the Pallas kernel walks."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpt import masks
from jaxgpt.kernels.block_lists import kernel_block_lists, list_width

BLOCK = 128


def _doc_ids(eot_positions, seq_len):
    tokens = np.zeros(seq_len, np.int32)
    tokens[list(eot_positions)] = 50256
    return masks.document_ids(jnp.asarray(tokens))


LAYOUTS = {
    "crossing_block_edges": [0, 100, 200, 390, 700, 1000],
    "no_eot": [],
    "starts_with_eot": [0],
    "many_short_docs": list(range(0, 1024, 50)),  # no full blocks anywhere
    "one_long_doc_from_block_2": [256],
}


def _brute_force_transpose(counts, indices):
    """(N, N) bool, key block j by query block i: i lists j among its first counts[i] entries."""
    n = counts.shape[0]
    listed = np.zeros((n, n), bool)
    for i in range(n):
        for j in indices[i, : counts[i]]:
            listed[j, i] = True
    return listed


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("window", [0, 1, 2, 5])
def test_pallas_transposed_lists_equal_brute_force_transpose(layout, window):
    doc_ids = _doc_ids(LAYOUTS[layout], 1024)
    kv = masks.clamp_counts(masks.truncate_to_window(masks.block_lists(doc_ids), window))
    q = masks.transpose_block_lists(kv)
    for counts, indices, q_counts, q_indices in (
        (kv.kv_num_blocks, kv.kv_indices, q.q_num_blocks, q.q_indices),
        (kv.full_kv_num_blocks, kv.full_kv_indices, q.full_q_num_blocks, q.full_q_indices),
    ):
        expected = _brute_force_transpose(np.asarray(counts), np.asarray(indices))
        q_counts, q_indices = np.asarray(q_counts), np.asarray(q_indices)
        np.testing.assert_array_equal(q_counts, expected.sum(axis=1))
        for j in range(expected.shape[0]):
            listed = q_indices[j, : q_counts[j]]
            # Nearest first: the query blocks that list j, in increasing order (all >= j).
            np.testing.assert_array_equal(listed, np.flatnonzero(expected[j]))


@pytest.mark.slow
@pytest.mark.parametrize("window", [0, 1, 3, 14, 20])
def test_pallas_kernel_lists_keep_every_listed_block_within_the_width(window):
    doc_ids = _doc_ids(LAYOUTS["crossing_block_edges"], 2048)[None]
    lists = kernel_block_lists(doc_ids, window, max_window_blocks=14)
    width = list_width(14)
    assert width == 16 and lists.kv.kv_indices.shape == (1, 16, 16)
    full = masks.clamp_counts(masks.truncate_to_window(masks.block_lists(doc_ids[0]), min(window, 14)))
    for name in ("kv_num_blocks", "full_kv_num_blocks"):
        counts = np.asarray(getattr(lists.kv, name))[0]
        np.testing.assert_array_equal(counts, np.asarray(getattr(full, name)))
        assert counts.max() <= width
    for cut, whole in ((lists.kv.kv_indices, full.kv_indices), (lists.kv.full_kv_indices, full.full_kv_indices)):
        np.testing.assert_array_equal(np.asarray(cut)[0], np.asarray(whole)[:, :width])
    assert int(np.asarray(lists.q.q_num_blocks).max()) <= max(min(window, 14), 1)


def test_pallas_short_window_of_w_long_1_lists_only_the_diagonal_block():
    """W_long = 1 gives the short window 0: full count -1 (read as 0), partial count 1."""
    doc_ids = _doc_ids([0, 300], 1024)[None]
    lists = kernel_block_lists(doc_ids, 0)
    np.testing.assert_array_equal(np.asarray(lists.kv.full_kv_num_blocks), 0)
    np.testing.assert_array_equal(np.asarray(lists.kv.kv_num_blocks), 1)
    np.testing.assert_array_equal(np.asarray(lists.kv.kv_indices)[0, :, 0], np.arange(8))
