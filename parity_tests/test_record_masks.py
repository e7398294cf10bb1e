"""The records' own block masks at scale against jaxgpt's and torch_ref's (docs/PARITY.md, "Masks
against the records' own builders").

#15's, #18's and #20's `GPT.forward` build their FlexAttention block masks from the sequence's
document ids before the first layer; jaxgpt_tools.parity.record_masks runs exactly that code (the
script from the record's log, as the harness loads it) and keeps the lists and the mask_mod each
hands `BlockMask.from_kv_blocks`. They are compared with jaxgpt's and torch_ref's at 16 and 24
blocks, every window 1..14 (#15: every token window 64..1792 in steps of 64, block windows 1..14
at and between block multiples), on multi-document layouts (documents that start and end inside
one block, one-token documents, documents starting on a block edge or on its last token, no EOT,
full blocks). Masks are integers and booleans: every comparison is exact.

- #20: the raw lists (counts, -1 of the short window at W 1 included, and whole index
  permutations) equal jaxgpt.masks' and torch_ref.masks' truncated lists; jaxgpt's kernel lists
  (jaxgpt.kernels.block_lists: counts clamped at 0, the first C columns, and the query-side
  transpose the backward walks) follow from them.
- #18: the same counts and the same listed blocks as the truncated lists both frameworks use for
  it, in the reverse order: the record lists the blocks of a row farthest first (a stable
  descending argsort), jaxgpt and torch_ref nearest first; nothing is truncated in #18, so only
  FlexAttention's visiting order differs (LINEAGE.md 6.3).
- #15: the same counts and blocks as torch_ref's token-window lists, reversed likewise (LINEAGE.md
  5.4), and no full blocks.
- Token level (the pairs FlexAttention lets through: listed full blocks whole, listed partial
  blocks through the record's own mask_mod): equal to jaxgpt's mask for the window its lineage
  hands the attention (`jaxgpt.lineage.WINDOWS`, `masks.closed_form_mask`; #20 also
  `masks.dense_mask`) and to torch_ref's model's masks (`GPT.attention_masks`), at every window
  on the richest layout and at four windows on the others.

The logs are read as by test_record_code.py; a record whose log is absent skips with the way to
get it, or fails so under JAXGPT_REQUIRE_UPSTREAM_LOGS=1 (.ci/run).
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from jaxgpt import config as cfg
from jaxgpt import lineage as jax_lineage
from jaxgpt import masks as jax_masks
from jaxgpt import presets
from jaxgpt.kernels.block_lists import kernel_block_lists, list_width
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity.record_code_checks import EOT, model_config
from jaxgpt_tools.parity.record_masks import (
    BLOCK,
    BLOCK_WINDOWS,
    FEW_BLOCK_WINDOWS,
    FEW_TOKEN_WINDOWS,
    MAX_WINDOW_BLOCKS,
    TOKEN_LEVEL_EVERY_WINDOW,
    TOKEN_WINDOWS,
    layouts,
    record_block_masks,
)
from jaxgpt_tools.parity.record_standins import KvBlocks
from torch_ref import masks as torch_masks
from torch_ref import model as torch_model


def _needs_log(name: str):
    return pytest.mark.upstream_logs(name)  # skipped without the log, failed under the switch (conftest.py)


def _layout_params():
    return [pytest.param(name, id=name.replace(" ", "-")) for name in layouts()]


def _lists(mask: KvBlocks) -> tuple[np.ndarray, ...]:
    """The record's (counts (N,), indices (N, N), full counts, full indices) as numpy, None for
    lists it does not give."""
    fields = (mask.kv_num_blocks, mask.kv_indices, mask.full_kv_num_blocks, mask.full_kv_indices)
    return tuple(None if f is None else f.reshape(f.shape[2:]).numpy() for f in fields)


def _leading(counts: np.ndarray, indices: np.ndarray) -> list[list[int]]:
    """Each row's listed blocks in list order (counts below 0 list none)."""
    return [indices[i, :max(int(c), 0)].tolist() for i, c in enumerate(counts)]


def _listed(counts: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """(N, N) bool: query block i lists key block j."""
    listed = np.zeros(indices.shape, dtype=bool)
    for i, row in enumerate(_leading(counts, indices)):
        listed[i, row] = True
    return listed


@functools.cache
def _jax_fns():
    def lists(ids, w):
        return jax_masks.truncate_to_window(jax_masks.block_lists(ids), w)

    def kernel(ids, w):
        return kernel_block_lists(ids[None], w, max_window_blocks=MAX_WINDOW_BLOCKS)

    def closed_form(ids, blocks, tokens):
        return jax_masks.closed_form_mask(ids, blocks, window_tokens=tokens)

    return jax.jit(lists), jax.jit(kernel), jax.jit(closed_form), jax.jit(jax_masks.closed_form_mask), \
        jax.jit(functools.partial(jax_masks.dense_mask, eot_id=EOT))


def _as_numpy(lists) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(x) for x in lists)


def _jax_config(name: str):
    return cfg.replace(presets.get_preset(name).model, eot_id=EOT)


@functools.cache
def _torch_ref_gpt(name: str) -> torch_model.GPT:
    return torch_model.GPT.from_config(model_config(name), attention="sdpa", fp8_head=False).eval()


def _token_level(name: str, layout: str, tokens: np.ndarray, window: int, record_masks: list[KvBlocks]) -> None:
    """The record's allowed pairs equal jaxgpt's (its lineage's windows, the closed form) and
    torch_ref's model's masks, per mask the record builds (long, then short)."""
    _, _, closed_form, closed_form_blocks, dense = _jax_fns()
    seq_len = len(tokens)
    ids = jax_masks.document_ids(jnp.asarray(tokens), EOT)
    windows = jax_lineage.WINDOWS[_jax_config(name).lineage.attention_mask](_jax_config(name), window, seq_len)
    with torch.no_grad():
        torch_allowed = _torch_ref_gpt(name).attention_masks(torch.from_numpy(tokens.astype(np.int64)), window)
    for kind, record_mask, torch_mask in zip(("long", "short"), record_masks, torch_allowed, strict=False):
        where = f"{name}, {layout}, window {window}, {kind}"
        expected = record_mask.allowed(seq_len).numpy()
        assert expected.any(axis=1).all(), where  # every query sees itself: the masks are not empty
        win = windows[kind]
        ours = (closed_form_blocks(ids, win.blocks) if win.tokens is None else closed_form(ids, win.blocks, win.tokens))
        np.testing.assert_array_equal(np.asarray(ours), expected, err_msg=f"jaxgpt {where}")
        np.testing.assert_array_equal(torch_mask.numpy(), expected, err_msg=f"torch_ref {where}")
        if name == "record":
            np.testing.assert_array_equal(np.asarray(dense(jnp.asarray(tokens), win.blocks)), expected, err_msg=f"dense {where}")


def _token_windows_here(layout: str, every: tuple[int, ...], few: tuple[int, ...]) -> tuple[int, ...]:
    return every if layout in TOKEN_LEVEL_EVERY_WINDOW else few


def _q_side(listed: np.ndarray) -> tuple[np.ndarray, list[list[int]]]:
    """The query-side lists of a listed (query, key) block matrix: per key block, the count and the
    listing query blocks in increasing order."""
    by_key = listed.T
    return by_key.sum(axis=1).astype(np.int32), [np.flatnonzero(row).tolist() for row in by_key]


def _check_kernel_lists(tokens: np.ndarray, w: int, record: tuple[np.ndarray, ...], where: str) -> None:
    """jaxgpt's kernel lists at window w from the record's lists: counts clamped at 0, the first C
    columns of each index matrix, and the query side of each."""
    _, kernel, _, _, _ = _jax_fns()
    got = kernel(jax_masks.document_ids(jnp.asarray(tokens), EOT), jnp.int32(w))
    width = list_width(MAX_WINDOW_BLOCKS)
    counts, indices, full_counts, full_indices = record
    for side, (kv_counts, kv_indices, q_counts, q_indices) in {
        "partial": (got.kv.kv_num_blocks, got.kv.kv_indices, got.q.q_num_blocks, got.q.q_indices),
        "full": (got.kv.full_kv_num_blocks, got.kv.full_kv_indices, got.q.full_q_num_blocks, got.q.full_q_indices),
    }.items():
        theirs_counts, theirs_indices = (counts, indices) if side == "partial" else (full_counts, full_indices)
        np.testing.assert_array_equal(np.asarray(kv_counts)[0], np.maximum(theirs_counts, 0), err_msg=f"{where} {side}")
        np.testing.assert_array_equal(np.asarray(kv_indices)[0][:, :theirs_indices.shape[1]], theirs_indices[:, :width],
                                      err_msg=f"{where} {side}")
        want_counts, want_rows = _q_side(_listed(theirs_counts, theirs_indices))
        np.testing.assert_array_equal(np.asarray(q_counts)[0], want_counts, err_msg=f"{where} {side} q side")
        assert _leading(np.asarray(q_counts)[0], np.asarray(q_indices)[0]) == want_rows, f"{where} {side} q side"


@pytest.mark.parametrize("layout", _layout_params())
@pytest.mark.parametrize("name", [pytest.param("record", marks=_needs_log("record"))])
def test_record_20_lists_are_jaxgpts_and_torch_refs(name, layout):
    """#20's long and short lists at every W_long 1..14: equal, field by field and entry by entry,
    to both frameworks' truncated lists; jaxgpt's kernel lists follow; the allowed pairs equal."""
    loaded, tokens = rc.load(name, EOT), layouts()[layout]
    jax_lists = _jax_fns()[0]
    ids = jax_masks.document_ids(jnp.asarray(tokens), EOT)
    torch_lists = torch_masks.block_lists(torch_masks.document_ids(torch.from_numpy(tokens.astype(np.int64)), EOT))
    for window in BLOCK_WINDOWS:
        record_masks = record_block_masks(loaded, tokens, window)
        assert len(record_masks) == 2
        for kind, mask, w in (("long", record_masks[0], window), ("short", record_masks[1], window // 2)):
            where = f"{layout}, W {window}, {kind} (w {w})"
            record = _lists(mask)
            ours = _as_numpy(jax_lists(ids, jnp.int32(w)))
            theirs = tuple(x.numpy() for x in torch_masks.truncate_to_window(torch_lists, w))
            for field, want, got_jax, got_torch in zip(("counts", "indices", "full counts", "full indices"),
                                                      record, ours, theirs, strict=True):
                np.testing.assert_array_equal(got_jax, want, err_msg=f"jaxgpt {where} {field}")
                np.testing.assert_array_equal(got_torch, want, err_msg=f"torch_ref {where} {field}")
            _check_kernel_lists(tokens, w, record, f"jaxgpt kernel lists {where}")
        if window in _token_windows_here(layout, BLOCK_WINDOWS, FEW_BLOCK_WINDOWS):
            _token_level(name, layout, tokens, window, record_masks)


@pytest.mark.parametrize("layout", _layout_params())
@pytest.mark.parametrize("name", [pytest.param("softcap", marks=_needs_log("softcap"))])
def test_record_18_lists_are_the_frameworks_reversed(name, layout):
    """#18's lists at every window 1..14 blocks: the counts and the listed blocks of both
    frameworks' truncated lists (and jaxgpt's kernel lists), each row in the reverse order; the
    allowed pairs equal."""
    loaded, tokens = rc.load(name, EOT), layouts()[layout]
    jax_lists = _jax_fns()[0]
    ids = jax_masks.document_ids(jnp.asarray(tokens), EOT)
    torch_lists = torch_masks.block_lists(torch_masks.document_ids(torch.from_numpy(tokens.astype(np.int64)), EOT))
    for window in BLOCK_WINDOWS:
        (mask,) = record_block_masks(loaded, tokens, window)
        record = _lists(mask)
        ours = _as_numpy(jax_lists(ids, jnp.int32(window)))
        theirs = tuple(x.numpy() for x in torch_masks.truncate_to_window(torch_lists, window))
        for side, (counts, indices) in (("partial", (0, 1)), ("full", (2, 3))):
            where = f"{layout}, W {window}, {side}"
            want = _leading(record[counts], record[indices])
            assert all(row == sorted(row) for row in want), where  # farthest first: increasing block index
            for framework, lists in (("jaxgpt", ours), ("torch_ref", theirs)):
                np.testing.assert_array_equal(lists[counts], record[counts], err_msg=f"{framework} {where}")
                assert [row[::-1] for row in _leading(lists[counts], lists[indices])] == want, f"{framework} {where}"
        kernel = _jax_fns()[1](ids, jnp.int32(window))
        for side, counts, indices in (("partial", kernel.kv.kv_num_blocks, kernel.kv.kv_indices),
                                      ("full", kernel.kv.full_kv_num_blocks, kernel.kv.full_kv_indices)):
            rows = record[:2] if side == "partial" else record[2:]
            assert [r[::-1] for r in _leading(np.asarray(counts)[0], np.asarray(indices)[0])] == _leading(*rows), \
                f"jaxgpt kernel lists {layout}, W {window}, {side}"
        if window in _token_windows_here(layout, BLOCK_WINDOWS, FEW_BLOCK_WINDOWS):
            _token_level(name, layout, tokens, window, [mask])


@pytest.mark.parametrize("layout", _layout_params())
@pytest.mark.parametrize("name", [pytest.param("unet-value-embeds", marks=_needs_log("unet-value-embeds"))])
def test_record_15_lists_are_torch_refs_reversed(name, layout):
    """#15's one list at every token window 64..1792: no full blocks; the counts and blocks of
    torch_ref's token-window lists, each row in the reverse order; the allowed pairs (its token
    mask_mod on every listed block) equal jaxgpt's and torch_ref's."""
    loaded, tokens = rc.load(name, EOT), layouts()[layout]
    docs = torch_masks.document_ids(torch.from_numpy(tokens.astype(np.int64)), EOT)
    for window in TOKEN_WINDOWS:
        (mask,) = record_block_masks(loaded, tokens, window)
        counts, indices, full_counts, full_indices = _lists(mask)
        assert full_counts is None and full_indices is None
        where = f"{layout}, window {window} tokens"
        want = _leading(counts, indices)
        assert all(row == sorted(row) for row in want), where
        theirs = torch_masks.token_window_block_lists(docs, window)
        np.testing.assert_array_equal(theirs.kv_num_blocks.numpy(), counts, err_msg=where)
        assert [row[::-1] for row in _leading(theirs.kv_num_blocks.numpy(), theirs.kv_indices.numpy())] == want, where
        assert int(theirs.full_kv_num_blocks.sum()) == 0, where
        if window in _token_windows_here(layout, TOKEN_WINDOWS, FEW_TOKEN_WINDOWS):
            _token_level(name, layout, tokens, window, [mask])


def test_the_layouts_cover_the_cases():
    """Guard: documents that start and end inside one block, an EOT on a block's first and on its
    last token, full blocks, rows with several partial blocks, and #20's -1 count (W 1's short
    window) occur; the 24-block layout is cut by the kernels' list width (16 columns)."""
    found = layouts()
    tokens = found["edges and short documents"]
    starts = np.flatnonzero(tokens == EOT)
    inside = [(s, e) for s, e in itertools.pairwise(starts) if s // BLOCK == (e - 1) // BLOCK and s % BLOCK]
    assert len(inside) >= 3 and any(e - s == 1 for s, e in inside)
    assert any(s % BLOCK == 0 and s > 0 for s in starts) and any(s % BLOCK == BLOCK - 1 for s in starts)
    lists = [torch_masks.block_lists(torch_masks.document_ids(torch.from_numpy(t.astype(np.int64)), EOT)) for t in found.values()]
    assert max(int(x.full_kv_num_blocks.max()) for x in lists) >= 14
    assert max(int(x.kv_num_blocks.max()) for x in lists) >= 3
    assert all(len(t) >= 16 * BLOCK and len(t) % BLOCK == 0 for t in found.values())
    assert len(found["24 blocks"]) // BLOCK > list_width(MAX_WINDOW_BLOCKS)
    short = torch_masks.truncate_to_window(lists[0], 0)
    assert int(short.full_kv_num_blocks.min()) == -1
