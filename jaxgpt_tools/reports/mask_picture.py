"""A picture of the record's block mask for real tokens (`scripts/plot_masks.py`).

For one sequence of tokens, the block lists the model builds at a window
(`jaxgpt.masks.window_block_lists`: truncated to the window and clamped as the model does) are
expanded into a query-block by key-block grid: full blocks (attended whole), partial blocks (the
document-causal mask applies inside), and blocks never visited. One panel per window, the long and the short
(W_long // 2); each document's blocks are outlined on the diagonal, and the window's edge (W
blocks back from the query block) is drawn dashed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from jaxgpt import masks
from jaxgpt.config import BLOCK_SIZE, EOT_ID

NOT_VISITED, PARTIAL, FULL = 0, 1, 2


@dataclass(frozen=True)
class MaskPanel:
    """One window's block grid: `grid` (N, N) int8 of NOT_VISITED / PARTIAL / FULL, query
    block by key block; `documents` [(first block, last block)] of each document that a block
    of the grid holds."""

    title: str
    window_blocks: int
    grid: np.ndarray
    documents: list[tuple[int, int]]


def block_grid(tokens: np.ndarray, window_blocks: int, *, block_size: int = BLOCK_SIZE,
               eot_id: int = EOT_ID) -> np.ndarray:
    """(N, N) int8 grid of `tokens` (T,) under the window: FULL / PARTIAL where the truncated
    lists name the key block, NOT_VISITED elsewhere."""
    doc_ids = masks.document_ids(jnp.asarray(tokens.astype(np.int32)), eot_id)
    lists = masks.window_block_lists(doc_ids, window_blocks, block_size)
    partial, full = (np.asarray(matrix) for matrix in masks.listed_blocks(lists))
    return np.where(full, FULL, np.where(partial, PARTIAL, NOT_VISITED)).astype(np.int8)


def document_blocks(tokens: np.ndarray, *, block_size: int = BLOCK_SIZE, eot_id: int = EOT_ID) -> list[tuple[int, int]]:
    """(first block, last block) of each document of `tokens` (T,) (a document opens with EOT)."""
    doc_ids = np.cumsum(tokens == eot_id)
    starts = np.flatnonzero(np.diff(doc_ids, prepend=doc_ids[0] - 1))
    ends = np.append(starts[1:] - 1, len(tokens) - 1)
    return [(int(start) // block_size, int(end) // block_size) for start, end in zip(starts, ends, strict=True)]


def mask_panels(tokens: np.ndarray, long_window_blocks: int, *, view_blocks: int | None = None,
                block_size: int = BLOCK_SIZE, eot_id: int = EOT_ID) -> list[MaskPanel]:
    """The long- and short-window panels of one sequence `tokens` (T,), T a multiple of the
    block size; `view_blocks`: keep only the first query and key blocks (the lists are causal,
    so the first blocks do not depend on the rest)."""
    total = masks.num_blocks(len(tokens), block_size)
    shown = total if view_blocks is None else min(view_blocks, total)
    documents = [(first, min(last, shown - 1)) for first, last in document_blocks(tokens, block_size=block_size, eot_id=eot_id)
                 if first < shown]
    panels = []
    for name, window in (("long", long_window_blocks), ("short", long_window_blocks // 2)):
        grid = block_grid(tokens, window, block_size=block_size, eot_id=eot_id)[:shown, :shown]
        counts = {kind: int((grid == kind).sum()) for kind in (FULL, PARTIAL)}
        title = (f"{name} window {window} blocks: {counts[FULL]} full + {counts[PARTIAL]} partial blocks visited"
                 + (f"\n(first {shown} of {total} blocks)" if shown < total else ""))
        panels.append(MaskPanel(title, window, grid, documents))
    return panels


def draw(panels: list[MaskPanel], out: Path, *, suptitle: str) -> Path:
    """The panels side by side as one PNG at `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch, Rectangle

    colors = ["#ffffff", "#f4a259", "#2a6f97"]  # not visited, partial, full
    figure, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 6.6), squeeze=False)
    for axis, panel in zip(axes[0], panels, strict=True):
        size = panel.grid.shape[0]
        axis.imshow(panel.grid, cmap=ListedColormap(colors), vmin=0, vmax=2, interpolation="nearest")
        for first, last in panel.documents:  # a document's own square on the diagonal
            axis.add_patch(Rectangle((first - 0.5, first - 0.5), last - first + 1, last - first + 1,
                                     fill=False, edgecolor="#555555", linewidth=0.6))
        edge = np.arange(size)
        axis.plot(edge - max(panel.window_blocks, 1) + 0.5, edge, linestyle="--", color="#c0392b", linewidth=0.9)
        axis.set_xlim(-0.5, size - 0.5)
        axis.set_ylim(size - 0.5, -0.5)
        axis.set_title(panel.title, fontsize=10)
        axis.set_xlabel("key block")
        axis.set_ylabel("query block")
    axes[0][-1].legend(handles=[Patch(color=colors[FULL], label="full block"), Patch(color=colors[PARTIAL], label="partial block"),
                                Patch(facecolor="none", edgecolor="#555555", label="a document"),
                                plt.Line2D([], [], linestyle="--", color="#c0392b", label="window edge")],
                       loc="upper right", fontsize=8)
    figure.suptitle(suptitle, fontsize=11)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out
