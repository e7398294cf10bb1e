#!/usr/bin/env python
"""Download the record's GPT-2-tokenized FineWeb shards (RECORD.md 8.5; jaxgpt.corpus.build.download_fineweb).

Fetches fineweb_val_000000.bin and fineweb_train_000001.bin .. fineweb_train_%06d.bin of N
from the Hugging Face dataset repo kjj0/fineweb10B-gpt2 into --out (default data/fineweb10B),
skipping files already there. N defaults to 8: the record's 1393 steps of 524,288 tokens read
train shards 1..8 (190 batches per 10^8-token shard). Each shard is about 200 MB.
"""

from __future__ import annotations

import argparse
import sys

from jaxgpt.corpus.build import DEFAULT_FINEWEB_SHARDS, download_fineweb, fineweb_filenames
from jaxgpt_tools.common import command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-shards", type=int, default=DEFAULT_FINEWEB_SHARDS, help="train shards to fetch (default 8)")
    parser.add_argument("--out", default="data/fineweb10B", help="target folder (default data/fineweb10B)")
    args = parser.parse_args(argv)
    def fetch() -> None:
        fetched = download_fineweb(args.out, args.num_shards)
        total = len(fineweb_filenames(args.num_shards))
        print(f"{args.out}: fetched {len(fetched)} file(s), {total - len(fetched)} already present")

    return command.run("download_fineweb", fetch)


if __name__ == "__main__":
    sys.exit(main())
