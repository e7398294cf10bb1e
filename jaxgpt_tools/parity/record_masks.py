"""The block masks a record's own forward builds, taken as it builds them (the harness of
jaxgpt_tools.parity.record_code).

#15, #18 and #20 build their FlexAttention block masks inside `GPT.forward`, before the first use
of the model: the document ids of the sequence, per-block document ranges, the dense block
matrices, their ordered lists (`BlockMask.from_kv_blocks`) and a mask_mod. `record_block_masks`
runs that forward itself, with `self` a stand-in that stops it at its first use of the model (so
no weights are built or read), and keeps every BlockMask the record's code hands
`BlockMask.from_kv_blocks` (the harness's `KvBlocks`, which holds the lists and the mask_mod as
given): one for #15 and #18, (long, short) for #20. #8 and #9 build none (plain causal attention).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

from jaxgpt_tools.parity.record_code import ROWS, LoadedRecord
from jaxgpt_tools.parity.record_code_checks import EOT
from jaxgpt_tools.parity.record_standins import KvBlocks

# The setting of parity_tests/test_record_masks.py (docs/PARITY.md, "Masks against the records'
# own builders"): the windows and the token layouts the records' masks are compared at.
BLOCK = 128
BLOCK_WINDOWS = tuple(range(1, 15))
TOKEN_WINDOWS = tuple(64 * k for k in range(1, 29))  # #15: 64..1792 tokens, block covers 1..14
MAX_WINDOW_BLOCKS = 14  # the kernels' cap in every preset with a window
TOKEN_LEVEL_EVERY_WINDOW = ("edges and short documents",)  # the others: FEW_*_WINDOWS
FEW_BLOCK_WINDOWS, FEW_TOKEN_WINDOWS = (1, 2, 7, 14), (64, 192, 896, 1792)


def _with_eots(seq_len: int, starts, seed: int) -> np.ndarray:
    """(seq_len,) random tokens below the EOT, with the EOT at `starts` and nowhere else."""
    from jaxgpt.testing import document_layout

    tokens = document_layout("one_doc", seq_len, vocab_size=1000, eot_id=EOT, seed=seed)
    tokens[list(starts)] = EOT
    return tokens


@functools.cache
def layouts() -> dict[str, np.ndarray]:
    """(T,) int32 token sequences (EOT = 999 opens a document) at 16 blocks, one at 24."""
    from jaxgpt.testing import document_layout

    t16 = 16 * BLOCK
    rng = np.random.default_rng(7)
    return {
        # Documents that start and end inside one block (300..340, 700..701, 1290..1300), a
        # one-token document (700), EOTs on a block's first token (512, 1536) and last (1023),
        # documents spanning blocks with full blocks between, and an EOT on the last token.
        "edges and short documents": _with_eots(t16, (0, 45, 300, 340, 512, 700, 701, 1023, 1290, 1300, 1536, t16 - 1), 1),
        "no EOT": _with_eots(t16, (), 2),
        "one document": _with_eots(t16, (0,), 3),
        "record-like": document_layout("record_like", t16, vocab_size=1000, eot_id=EOT, seed=4),
        "many short documents": document_layout("many_short", t16, vocab_size=1000, eot_id=EOT, seed=5),
        "24 blocks": _with_eots(24 * BLOCK, sorted({0, 130, 131, *rng.integers(1, 24 * BLOCK, 20).tolist()}), 6),
    }


class _MasksBuilt(Exception):
    """The record's forward reached its first use of the model: its masks are built."""


class _StopAtTheModel:
    """Stands in for the record's GPT as the forward's `self`: any attribute (the embedding, the
    blocks) stops the forward."""

    def __getattr__(self, name: str) -> Any:
        raise _MasksBuilt(name)


@contextlib.contextmanager
def _recording(loaded: LoadedRecord) -> Iterator[list[KvBlocks]]:
    """Inside the block the script's `BlockMask` keeps every mask built, in order."""
    built: list[KvBlocks] = []

    class Recording(KvBlocks):
        @classmethod
        def from_kv_blocks(cls, *args, **kwargs) -> KvBlocks:
            mask = KvBlocks.from_kv_blocks(*args, **kwargs)
            built.append(mask)
            return mask

    saved = loaded.module.BlockMask
    loaded.module.BlockMask = Recording
    try:
        yield built
    finally:
        loaded.module.BlockMask = saved


def record_block_masks(loaded: LoadedRecord, tokens, window: int) -> list[KvBlocks]:
    """The BlockMasks record `loaded`'s own forward builds for one (T,) sequence of token ids
    (T a multiple of 128) at `window` (as its forward takes it: tokens for #15, blocks for #18,
    W_long blocks for #20), in the order built. ValueError for #8/#9 (no block masks);
    RuntimeError when the forward builds none or runs past its masks."""
    import torch

    if loaded.name in ROWS:
        raise ValueError(f"record {loaded.name!r} attends causally over rows: it builds no block mask")
    inputs = torch.as_tensor(tokens, dtype=torch.int32)
    targets = torch.zeros(inputs.shape, dtype=torch.long)
    with _recording(loaded) as built:
        try:
            loaded.module.GPT.forward(_StopAtTheModel(), inputs, targets, torch.tensor(window, dtype=torch.int32))
        except _MasksBuilt:
            pass
        else:
            raise RuntimeError(f"record {loaded.name!r}: the forward ran to its end without its model")
    if not built:
        raise RuntimeError(f"record {loaded.name!r}: the forward built no block mask before its first layer")
    return built


def describe() -> list[str]:
    """docs/PARITY.md's section on parity_tests/test_record_masks.py: what is compared, exactly,
    and on which layouts and windows (markdown lines)."""
    from jaxgpt.kernels.block_lists import list_width

    found = layouts()
    sizes = ", ".join(f'"{name}" ({len(tokens) // BLOCK} blocks, {int((tokens == EOT).sum())} EOTs)'
                      for name, tokens in found.items())
    every = ", ".join(f'"{name}"' for name in TOKEN_LEVEL_EVERY_WINDOW)
    few = f"windows {', '.join(map(str, FEW_BLOCK_WINDOWS))} (#15: {', '.join(map(str, FEW_TOKEN_WINDOWS))} tokens)"
    lists = len(found) * (2 * len(BLOCK_WINDOWS) + len(BLOCK_WINDOWS) + len(TOKEN_WINDOWS))
    dense_every = len(TOKEN_LEVEL_EVERY_WINDOW) * (2 * len(BLOCK_WINDOWS) + len(BLOCK_WINDOWS) + len(TOKEN_WINDOWS))
    dense_few = (len(found) - len(TOKEN_LEVEL_EVERY_WINDOW)) * (2 * len(FEW_BLOCK_WINDOWS) + len(FEW_BLOCK_WINDOWS)
                                                                + len(FEW_TOKEN_WINDOWS))
    return [
        "## Masks against the records' own builders", "",
        "`pytest parity_tests/test_record_masks.py`: #15's, #18's and #20's own `GPT.forward` (the script from the "
        "record's log, loaded as above) run up to its first use of the model (`jaxgpt_tools.parity.record_masks`); "
        "every BlockMask it hands `BlockMask.from_kv_blocks` is kept as built (its lists and its own mask_mod). "
        f"Every comparison is exact (integers and booleans). Layouts (EOT 999 opens a document): {sizes}; the first "
        "holds documents that start and end inside one block, a one-token document, EOTs on a block's first and "
        f"last token, full blocks. {lists} masks' lists and {dense_every + dense_few} (T, T) masks compared.", "",
        "| record | its code builds | compared with | what is equal |", "|---|---|---|---|",
        "| #20 record | long and short lists at every W_long 1..14 (W_short = W_long // 2) | jaxgpt.masks and "
        "torch_ref.masks: `truncate_to_window(block_lists(...))` | counts (the -1 of W 1's short window included) and the "
        "whole index permutations, every row |",
        "| #20 record | the same | jaxgpt.kernels.block_lists.kernel_block_lists (the Pallas and Mosaic kernels' lists) | "
        f"counts clamped at 0, the first {list_width(MAX_WINDOW_BLOCKS)} columns (the 24-block layout is cut there), the query-"
        "side lists the backward walks (counts, listing query blocks in order) |",
        "| #18 softcap | one list per window 1..14 blocks, the window applied in its block matrix (no truncation) | both "
        "frameworks' truncated lists and jaxgpt's kernel lists | counts and each row's listed blocks; each row in the "
        "reverse order: the record lists farthest first (a stable descending argsort), jaxgpt and torch_ref nearest "
        "first, so only FlexAttention's visiting order differs, not the set (LINEAGE.md 6.3) |",
        "| #15 unet-value-embeds | one partial list per token window 64..1792 (steps of 64: block covers 1..14, at and "
        "between block multiples), no full list | torch_ref.masks.token_window_block_lists | counts and listed blocks, "
        "reversed likewise; no full blocks. jaxgpt has no lists for #15 (its dense and blocked backends use the closed "
        "form; pallas and mosaic refuse the token window) |",
        "| all three | the allowed pairs: listed full blocks whole, listed partial blocks through the record's own "
        "mask_mod | jaxgpt: the window its lineage hands the attention (`lineage.WINDOWS`) through "
        "`masks.closed_form_mask` (the dense backend's mask; the blocked backend's equality with it is "
        "tests/test_attention*.py's), #20 also `masks.dense_mask`; torch_ref: `GPT.attention_masks` (its SDPA path) | "
        f"every pair, at every window on {every} and at {few} on the others |",
        "",
        "The forward rows above (\"Record's code ... forward\") run on multi-document sequences "
        "(`record_code_checks.FORWARD_DOCUMENT_STARTS`), so their logits and gradients pass through each record's "
        "document masking.",
    ]
