"""jaxgpt_tools.reports.mask_picture and scripts/plot_masks.py: the block grid agrees with the
token-level mask the model's rule gives, documents are found, and the command draws a PNG."""

from __future__ import annotations

import numpy as np
import pytest

from jaxgpt import data, masks
from jaxgpt.testing import SMALL_EOT, synthetic_tokens
from jaxgpt_tools.reports import mask_picture
from scripts import plot_masks

BLOCK = 128


@pytest.mark.parametrize("window", [1, 3, 6])
def test_grid_is_the_dense_mask_seen_per_block(window):
    tokens = synthetic_tokens(12 * BLOCK, seed=5)
    grid = mask_picture.block_grid(tokens, window, eot_id=SMALL_EOT)
    dense = np.asarray(masks.dense_mask(tokens.astype(np.int32), window, eot_id=SMALL_EOT))
    per_block = dense.reshape(12, BLOCK, 12, BLOCK).transpose(0, 2, 1, 3).reshape(12, 12, -1)
    # A listed block holds an allowed pair; a full block is allowed whole (never the causal diagonal).
    np.testing.assert_array_equal(grid != mask_picture.NOT_VISITED, per_block.any(-1))
    np.testing.assert_array_equal(grid == mask_picture.FULL, per_block.all(-1))
    # Window 1 keeps the diagonal block alone (full blocks need w - 1 >= 1).
    assert (grid == mask_picture.FULL).any() == (window > 1) and (grid == mask_picture.PARTIAL).any()


def test_documents_and_the_shown_blocks():
    tokens = np.full(4 * BLOCK, 7, np.int64)
    tokens[[0, 200, 390]] = SMALL_EOT  # documents at tokens 0..199, 200..389, 390..511
    assert mask_picture.document_blocks(tokens, eot_id=SMALL_EOT) == [(0, 1), (1, 3), (3, 3)]
    long, short = mask_picture.mask_panels(tokens, 3, view_blocks=2, eot_id=SMALL_EOT)
    assert (long.window_blocks, short.window_blocks) == (3, 1)
    assert long.grid.shape == (2, 2) and long.documents == [(0, 1), (1, 1)]
    assert "first 2 of 4 blocks" in long.title


def test_command_draws_a_png(tmp_path, capsys):
    data.write_shard(tmp_path / "s.bin", synthetic_tokens(20 * BLOCK, seed=6))
    out = tmp_path / "masks.png"
    assert plot_masks.main(["--shard", str(tmp_path / "s.bin"), "--seq-len", str(16 * BLOCK), "--window-blocks", "4",
                            "--view-blocks", "0", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_masks.main(["--shard", str(tmp_path / "s.bin"), "--seq-len", str(64 * BLOCK), "--out", str(out)]) == 1
    assert "need 8192 tokens" in capsys.readouterr().err
