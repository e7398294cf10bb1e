"""jaxgpt.masks vs torch_ref.masks: the record's block lists and allowed masks, both frameworks.

Masks are integer/boolean data, so every comparison here is exact.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from jaxgpt import masks as jax_masks
from jaxgpt.config import BLOCK_SIZE, EOT_ID
from torch_ref import masks as torch_masks

NUM_BLOCKS = 16
SEQ_LEN = NUM_BLOCKS * BLOCK_SIZE
WINDOWS = range(1, 15)  # W_long of the record's schedule; W_short = W_long // 2 (0..7)


def _layout(seed: int) -> np.ndarray:
    """Random tokens with a random number of EOTs (0 to ~60), sometimes one at position 0."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, EOT_ID, SEQ_LEN).astype(np.int32)
    eot_count = [0, 1, 3, 8, 25, 60][seed % 6]
    tokens[rng.choice(SEQ_LEN, eot_count, replace=False)] = EOT_ID
    if seed % 3 == 1:
        tokens[0] = EOT_ID
    return tokens


SEEDS = range(6)


def _leading_entries(counts: np.ndarray, indices: np.ndarray) -> list[list[int]]:
    return [list(indices[i, : max(int(c), 0)]) for i, c in enumerate(counts)]


@pytest.fixture(scope="module")
def jit_fns():
    return jax.jit(jax_masks.block_lists), jax.jit(jax_masks.truncate_to_window), jax.jit(jax_masks.dense_mask)


@pytest.mark.parametrize("seed", SEEDS)
def test_block_lists_match_torch_ref(seed, jit_fns):
    jit_lists, jit_truncate, _ = jit_fns
    tokens = _layout(seed)
    torch_untruncated = torch_masks.block_lists(torch_masks.document_ids(torch.from_numpy(tokens)))
    jax_untruncated = jit_lists(jax_masks.document_ids(jnp.asarray(tokens)))
    for window in WINDOWS:
        torch_long, torch_short = torch_masks.window_block_lists(torch.from_numpy(tokens), window)
        for name, torch_lists, w in (("long", torch_long, window), ("short", torch_short, window // 2)):
            jax_lists = jit_truncate(jax_untruncated, jnp.int32(w))
            for kind, jax_counts, jax_indices, torch_counts, torch_indices in (
                ("partial", jax_lists.kv_num_blocks, jax_lists.kv_indices,
                 torch_lists.kv_num_blocks, torch_lists.kv_indices),
                ("full", jax_lists.full_kv_num_blocks, jax_lists.full_kv_indices,
                 torch_lists.full_kv_num_blocks, torch_lists.full_kv_indices),
            ):  # fmt: skip
                where = f"seed {seed}, W={window} {name} (w={w}), {kind}"
                # Raw counts, -1 included (short window at W=1).
                np.testing.assert_array_equal(np.asarray(jax_counts), torch_counts.numpy(), err_msg=where)
                assert _leading_entries(np.asarray(jax_counts), np.asarray(jax_indices)) == _leading_entries(
                    torch_counts.numpy(), torch_indices.numpy()
                ), where
    # The untruncated lists too: the entries the windows never reach must also agree.
    for jax_counts, jax_indices, torch_counts, torch_indices in (
        (jax_untruncated.kv_num_blocks, jax_untruncated.kv_indices,
         torch_untruncated.kv_num_blocks, torch_untruncated.kv_indices),
        (jax_untruncated.full_kv_num_blocks, jax_untruncated.full_kv_indices,
         torch_untruncated.full_kv_num_blocks, torch_untruncated.full_kv_indices),
    ):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(jax_counts), torch_counts.numpy())
        assert _leading_entries(np.asarray(jax_counts), np.asarray(jax_indices)) == _leading_entries(
            torch_counts.numpy(), torch_indices.numpy()
        )


@pytest.mark.parametrize("seed", (0, 1, 3, 4))  # no EOT, EOT at 0, few and many documents
def test_dense_mask_matches_torch_ref_allowed_mask(seed, jit_fns):
    _, _, jit_dense = jit_fns
    tokens = _layout(seed)
    docs = torch_masks.document_ids(torch.from_numpy(tokens))
    for window in WINDOWS:
        torch_long, torch_short = torch_masks.window_block_lists(torch.from_numpy(tokens), window)
        for torch_lists, w in ((torch_long, window), (torch_short, window // 2)):
            expected = torch_masks.allowed_mask_from_block_lists(torch_lists, docs).numpy()
            got = np.asarray(jit_dense(jnp.asarray(tokens), jnp.int32(w)))
            np.testing.assert_array_equal(got, expected, err_msg=f"seed {seed}, W={window}, w={w}")


def test_layouts_cover_the_edge_cases():
    # Guard: the random layouts include no EOT, EOT at 0, and both full and multi-partial rows.
    assert not (_layout(0) == EOT_ID).any()
    assert _layout(1)[0] == EOT_ID
    lists = [torch_masks.block_lists(torch_masks.document_ids(torch.from_numpy(_layout(s)))) for s in SEEDS]
    assert max(int(x.full_kv_num_blocks.max()) for x in lists) >= 14
    assert max(int(x.kv_num_blocks.max()) for x in lists) >= 2


def _token_window_oracle(tokens: np.ndarray, window_tokens: int) -> np.ndarray:
    """LINEAGE.md 5.4's rule for #15, in numpy: k <= q, same document, q - k < sw and
    floor(q/128) - floor(k/128) < ceil(sw/128)."""
    docs = np.cumsum(tokens == EOT_ID)
    q, k = np.arange(SEQ_LEN)[:, None], np.arange(SEQ_LEN)[None, :]
    block_window = -(-window_tokens // BLOCK_SIZE)
    return (k <= q) & (docs[:, None] == docs[None, :]) & (q - k < window_tokens) & (q // BLOCK_SIZE - k // BLOCK_SIZE < block_window)


@pytest.mark.parametrize("seed", [0, 3, 4])
def test_token_window_masks_match_torch_ref_and_the_rule(seed):
    """#15's token window: torch_ref's BlockMask lists + mask_mod expanded, jaxgpt's closed form,
    and the rule, for windows at, between and beyond block multiples (the odd multiples of 64
    alternate the two bounds inside a block)."""
    tokens = _layout(seed)
    docs = torch_masks.document_ids(torch.from_numpy(tokens))
    for window_tokens in (64, 128, 192, 320, 1728, 1792):
        expected = _token_window_oracle(tokens, window_tokens)
        lists = torch_masks.token_window_block_lists(docs, window_tokens)
        torch_mask = torch_masks.allowed_mask_from_block_lists(lists, docs, window_tokens=window_tokens).numpy()
        jax_mask = np.asarray(jax_masks.closed_form_mask(jax_masks.document_ids(jnp.asarray(tokens)),
                                                         -(-window_tokens // BLOCK_SIZE), window_tokens=window_tokens))
        np.testing.assert_array_equal(torch_mask, expected, err_msg=f"torch_ref sw={window_tokens}")
        np.testing.assert_array_equal(jax_mask, expected, err_msg=f"jaxgpt sw={window_tokens}")
