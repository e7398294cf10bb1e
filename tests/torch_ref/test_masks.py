"""torch_ref.masks: the record's block lists against the closed form of RECORD.md section 3.

Masks are integer/boolean data, so every comparison is exact.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from jaxgpt.config import BLOCK_SIZE, EOT_ID
from torch_ref import masks

NUM_BLOCKS = 16  # 2048 tokens: every window 0..14 is distinguishable
SEQ_LEN = NUM_BLOCKS * BLOCK_SIZE


def closed_form_parts(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(document-causal (T, T) bool, query-minus-key block distance (T, T) int), independent of torch_ref."""
    docs = np.cumsum(tokens == EOT_ID)
    pos = np.arange(len(tokens))
    doc_causal = (pos[None, :] <= pos[:, None]) & (docs[:, None] == docs[None, :])
    block = pos // BLOCK_SIZE
    return doc_causal, block[:, None] - block[None, :]


def closed_form_allowed(tokens: np.ndarray, window_blocks: int, parts=None) -> np.ndarray:
    """RECORD.md section 3: allowed(q, k) = k <= q, same document, block distance < max(w, 1)."""
    doc_causal, distance = closed_form_parts(tokens) if parts is None else parts
    return doc_causal & (distance < max(window_blocks, 1))


def make_layout(name: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, EOT_ID, SEQ_LEN).astype(np.int64)
    starts = {
        "no_eot": [],
        "eot_at_0": [0, 700, 1500],
        "crossing_blocks": [0, 100, 333, 900, 1027, 1800],  # documents span several blocks
        "block_aligned": [128, 512, 640, 1024],
        "many_short": list(range(5, SEQ_LEN, 41)),  # several documents per block
        "random": sorted(rng.choice(SEQ_LEN, 12, replace=False).tolist()),
    }[name]
    tokens[starts] = EOT_ID
    return tokens


LAYOUTS = ("no_eot", "eot_at_0", "crossing_blocks", "block_aligned", "many_short", "random")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_block_lists_expand_to_the_closed_form_for_every_window(layout):
    tokens = make_layout(layout, seed=LAYOUTS.index(layout))
    seq = torch.from_numpy(tokens)
    docs = masks.document_ids(seq)
    lists = masks.block_lists(docs)
    parts = closed_form_parts(tokens)
    for window in range(0, 15):
        truncated = masks.truncate_to_window(lists, window)
        got = masks.allowed_mask_from_block_lists(truncated, docs).numpy()
        expected = closed_form_allowed(tokens, window, parts)
        assert np.array_equal(got, expected), f"{layout}, w={window}: {np.argwhere(got != expected)[:5]}"


def test_window_block_lists_are_long_and_half_window():
    tokens = make_layout("crossing_blocks")
    seq = torch.from_numpy(tokens)
    docs = masks.document_ids(seq)
    parts = closed_form_parts(tokens)
    for w_long in (1, 2, 5, 14):
        long_lists, short_lists = masks.window_block_lists(seq, w_long)
        for got, window in ((long_lists, w_long), (short_lists, w_long // 2)):
            allowed = masks.allowed_mask_from_block_lists(got, docs).numpy()
            assert np.array_equal(allowed, closed_form_allowed(tokens, window, parts)), f"W={w_long}"


def test_document_ids_count_eot_inclusively():
    tokens = torch.tensor([EOT_ID, 5, 6, EOT_ID, 7] + [1] * 123)
    docs = masks.document_ids(tokens)
    assert docs[:6].tolist() == [1, 1, 1, 2, 2, 2]  # the EOT opens (and belongs to) its document
    assert masks.document_ids(torch.ones(128, dtype=torch.int32)).max() == 0  # no EOT: one document 0


def test_dense_to_ordered_lists_true_columns_nearest_first_then_padding():
    dense = torch.tensor(
        [[True, False, True, True, False], [False, False, False, False, False], [True, True, True, True, True]]
    )
    counts, order = masks.dense_to_ordered(dense)
    assert counts.dtype == torch.int32 and order.dtype == torch.int32
    assert counts.tolist() == [3, 0, 5]
    # Stable ascending argsort reversed: True columns decreasing, then False columns decreasing.
    assert order.tolist() == [[3, 2, 0, 4, 1], [4, 3, 2, 1, 0], [4, 3, 2, 1, 0]]


def test_single_document_lists_are_nearest_first():
    lists = masks.block_lists(masks.document_ids(torch.ones(SEQ_LEN, dtype=torch.int64)))
    for i in range(NUM_BLOCKS):
        assert lists.full_kv_num_blocks[i] == i  # every earlier block is full
        assert lists.full_kv_indices[i, :i].tolist() == list(range(i - 1, -1, -1))
        assert lists.kv_num_blocks[i] == 1 and lists.kv_indices[i, 0] == i  # only the diagonal is partial
    # Truncation keeps the nearest w-1 full blocks.
    kept = masks.truncate_to_window(lists, 4)
    assert kept.full_kv_num_blocks.tolist() == [min(i, 3) for i in range(NUM_BLOCKS)]


def test_short_window_at_w_long_1_has_full_count_minus_one():
    lists = masks.block_lists(masks.document_ids(torch.from_numpy(make_layout("random", 5))))
    long_lists, short_lists = masks.window_block_lists(torch.from_numpy(make_layout("random", 5)), 1)
    # w = 1 // 2 = 0: the record's arithmetic gives min(full, -1) = -1 and a partial count of 1.
    assert (short_lists.full_kv_num_blocks == -1).all()
    assert (short_lists.kv_num_blocks == 1).all()
    assert (long_lists.full_kv_num_blocks == 0).all()
    clamped = masks.clamp_counts(short_lists)
    assert (clamped.full_kv_num_blocks == 0).all() and (clamped.kv_num_blocks == 1).all()
    assert torch.equal(clamped.full_kv_indices, lists.full_kv_indices)  # indices untouched


def test_diagonal_block_is_always_partial_never_full():
    docs = masks.document_ids(torch.from_numpy(make_layout("many_short")))
    lists = masks.block_lists(docs)
    assert (lists.kv_indices[:, 0] == torch.arange(NUM_BLOCKS, dtype=torch.int32)).all()
    for i in range(NUM_BLOCKS):
        assert i not in lists.full_kv_indices[i, : lists.full_kv_num_blocks[i]].tolist()


def test_block_mask_has_the_lists_block_pattern():
    tokens = torch.from_numpy(make_layout("crossing_blocks"))
    docs = masks.document_ids(tokens)
    lists = masks.truncate_to_window(masks.block_lists(docs), 3)
    block_mask = masks.build_block_mask(lists, docs)
    dense_blocks = block_mask.to_dense()[0, 0].bool()  # (N, N) blocks visited, full or partial
    expected = masks.allowed_mask_from_block_lists(lists, docs).view(NUM_BLOCKS, BLOCK_SIZE, NUM_BLOCKS, BLOCK_SIZE)
    assert torch.equal(dense_blocks, expected.any(dim=3).any(dim=1))


@pytest.mark.parametrize(
    "tokens, message",
    [(torch.zeros(100, dtype=torch.int64), "multiple of the block size"), (torch.zeros(2, 128), "1-D")],
)
def test_bad_input_is_rejected(tokens, message):
    with pytest.raises(ValueError, match=message):
        masks.document_ids(tokens)


def test_negative_window_is_rejected():
    lists = masks.block_lists(masks.document_ids(torch.zeros(256, dtype=torch.int64)))
    with pytest.raises(ValueError, match="non-negative"):
        masks.truncate_to_window(lists, -1)


@pytest.mark.slow
def test_sdpa_path_equals_compiled_flex_attention():
    """CPU_NOTES.md: compiled flex_attention honours the block lists; the SDPA mask must agree.

    One shape (T=1024, fp32), so one compilation (~15 s); windows >= 2 (compiled CPU kernels fail on
    the -1 count of w = 0, which the CPU path never needs).
    """
    from torch_ref.attention import attend

    seq_len = 1024
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, EOT_ID, (seq_len,), generator=generator)
    tokens[[0, 200, 530, 531, 900]] = EOT_ID
    docs = masks.document_ids(tokens)
    lists = masks.block_lists(docs)
    q, k, v = (torch.randn(1, 2, seq_len, 64, generator=generator) for _ in range(3))
    for window in (2, 3, 5, 8):
        truncated = masks.truncate_to_window(lists, window)
        flex_out = attend(q, k, v, masks.build_block_mask(truncated, docs))
        sdpa_out = attend(q, k, v, masks.allowed_mask_from_block_lists(truncated, docs))
        # fp32 softmax/matmul in both kernels, different summation order: ~1e-6 absolute on O(1) values.
        torch.testing.assert_close(sdpa_out, flex_out, rtol=1e-5, atol=2e-5)


def test_window_may_be_a_tensor_as_in_the_record():
    seq = torch.from_numpy(make_layout("random", 2))
    for w_long in (1, 6):
        from_int = masks.window_block_lists(seq, w_long)
        from_tensor = masks.window_block_lists(seq, torch.tensor(w_long, dtype=torch.int32))
        for lists_int, lists_tensor in zip(from_int, from_tensor):
            assert all(torch.equal(a, b) for a, b in zip(lists_int, lists_tensor))
    with pytest.raises(ValueError, match="scalar"):
        masks.truncate_to_window(masks.block_lists(masks.document_ids(seq)), torch.tensor([3, 4]))
