#!/usr/bin/env python
"""Download the record's GPT-2-tokenized FineWeb shards (RECORD.md 8.5).

Fetches fineweb_val_000000.bin and fineweb_train_000001.bin .. fineweb_train_%06d.bin of N
from the Hugging Face dataset repo kjj0/fineweb10B-gpt2 into --out (default data/fineweb10B),
skipping files already there. N defaults to 8: the record's 1393 steps of 524,288 tokens read
train shards 1..8 (190 batches per 10^8-token shard). Each shard is about 200 MB.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

REPO_ID = "kjj0/fineweb10B-gpt2"
DEFAULT_NUM_SHARDS = 8


def fineweb_filenames(num_shards: int) -> list[str]:
    """The val shard, then train shards 1..num_shards."""
    if num_shards < 0:
        raise ValueError(f"--num-shards must be >= 0, got {num_shards}")
    return ["fineweb_val_000000.bin"] + [f"fineweb_train_{i:06d}.bin" for i in range(1, num_shards + 1)]


def missing_files(out_dir: str | Path, names: list[str]) -> list[str]:
    """Names not yet present in out_dir (a present file is trusted, as in the record)."""
    return [name for name in names if not (Path(out_dir) / name).is_file()]


def hf_downloader() -> Callable[[str, Path], None]:
    """A function (file name, folder) -> None fetching one file from REPO_ID; raises
    RuntimeError with an install hint when huggingface_hub is missing."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as error:
        raise RuntimeError(
            "downloading needs the `huggingface_hub` package: pip install huggingface_hub "
            "(or pip install -e '.[data]')"
        ) from error

    def download(name: str, out_dir: Path) -> None:
        hf_hub_download(repo_id=REPO_ID, filename=name, repo_type="dataset", local_dir=out_dir)

    return download


def download_fineweb(
    out_dir: str | Path, num_shards: int = DEFAULT_NUM_SHARDS, download: Callable[[str, Path], None] | None = None
) -> list[str]:
    """Fetch the missing shards into out_dir; returns the names fetched. Network or server
    errors are re-raised as RuntimeError naming the file and the repo."""
    out = Path(out_dir)
    todo = missing_files(out, fineweb_filenames(num_shards))
    if not todo:
        return []
    download = download or hf_downloader()
    out.mkdir(parents=True, exist_ok=True)
    for name in todo:
        print(f"downloading {name} from {REPO_ID} ...", flush=True)
        try:
            download(name, out)
        except Exception as error:
            raise RuntimeError(
                f"could not download {name} from the Hugging Face dataset {REPO_ID} "
                f"({type(error).__name__}: {error}); check the network connection"
            ) from error
    return todo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-shards", type=int, default=DEFAULT_NUM_SHARDS, help="train shards to fetch (default 8)")
    parser.add_argument("--out", default="data/fineweb10B", help="target folder (default data/fineweb10B)")
    args = parser.parse_args(argv)
    try:
        fetched = download_fineweb(args.out, args.num_shards)
    except (RuntimeError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    total = len(fineweb_filenames(args.num_shards))
    print(f"{args.out}: fetched {len(fetched)} file(s), {total - len(fetched)} already present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
