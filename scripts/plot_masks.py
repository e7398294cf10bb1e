"""A picture of the record's block mask for a sequence of real tokens, long and short window.

    python scripts/plot_masks.py --out docs/masks_sample.png

Reads one sequence of `--seq-len` tokens (the record's 65,536 per device) from a shard (the
sample val shard by default), builds the block lists the model uses at the window
`--window-blocks` (the record's last-step 14, short = 7) and draws the first `--view-blocks`
query and key blocks (jaxgpt_tools/reports/mask_picture.py). Needs matplotlib (`.[plot]`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from jaxgpt import shards
from jaxgpt.config import BLOCK_SIZE
from jaxgpt_tools.common import command
from jaxgpt_tools.reports.mask_picture import draw, mask_panels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shard", type=Path, default=Path("data/sample/sample_val_000000.bin"), help="token shard (.bin)")
    parser.add_argument("--seq-len", type=int, default=65536, help="tokens of the sequence (a multiple of 128)")
    parser.add_argument("--offset", type=int, default=0, help="first token of the sequence in the shard")
    parser.add_argument("--window-blocks", type=int, default=14, help="W_long in blocks (short = W_long // 2)")
    parser.add_argument("--view-blocks", type=int, default=48, help="blocks shown (0: all)")
    parser.add_argument("--out", type=Path, default=Path("docs/masks_sample.png"))
    args = parser.parse_args(argv)
    def picture() -> None:
        tokens = np.asarray(shards.read_shard(args.shard)[args.offset:args.offset + args.seq_len])
        if len(tokens) < args.seq_len or args.seq_len % BLOCK_SIZE:
            raise ValueError(f"need {args.seq_len} tokens (a multiple of {BLOCK_SIZE}) from {args.shard} at {args.offset}, "
                             f"got {len(tokens)}")
        panels = mask_panels(tokens, args.window_blocks, view_blocks=args.view_blocks or None)
        print(draw(panels, args.out, suptitle=f"{args.shard.name}, tokens {args.offset}..{args.offset + args.seq_len - 1}: "
                   f"{len(panels[0].documents)} documents in the blocks shown"))

    return command.run("plot_masks", picture)


if __name__ == "__main__":
    sys.exit(main())
