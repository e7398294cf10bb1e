"""Text to record-format shards, as the record's `data/fineweb.py` did (RECORD.md 8.4).

Each document becomes [EOT] + encode(text): the `<|endoftext|>` token 50256 is PREPENDED, so
it marks document starts. Shards are filled in document order with exactly `shard_size`
tokens; a document that does not fit is split and its remainder opens the next shard; the
last shard holds what is left. Shard 0 is named `val`, later ones `train`:
`<prefix>_val_000000.bin`, `<prefix>_train_000001.bin`, ...

Encoders are plain callables `str -> list[int]` so tests can inject a tiny one; the GPT-2
tokenizers (BPE from local files, or byte tokens) are in `jaxgpt.tokenizer`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
from tqdm import tqdm

from jaxgpt.config import EOT_ID
from jaxgpt.data import META_FILE, read_shard_header, write_shard  # META_FILE: its presence is read by the loader

Encoder = Callable[[str], "list[int] | np.ndarray"]
DEFAULT_SHARD_SIZE = 10**8

# --------------------------------------------------------------------------------------
# Documents to tokens to shards


def encode_document(text: str, encode: Encoder, eot_id: int = EOT_ID) -> np.ndarray:
    """(1 + n,) uint16: [eot_id] + encode(text). Raises ValueError for ids outside uint16."""
    ids = np.asarray(encode(text), dtype=np.int64).reshape(-1)
    tokens = np.concatenate([np.array([eot_id], dtype=np.int64), ids])
    if tokens.size and (tokens.min() < 0 or tokens.max() >= 2**16):
        raise ValueError(f"token ids must lie in [0, 65536) for uint16 shards; got [{tokens.min()}, {tokens.max()}]")
    return tokens.astype(np.uint16)


def encode_documents(
    texts: Iterable[str], encode: Encoder, *, num_workers: int = 1, chunksize: int = 16
) -> Iterator[np.ndarray]:
    """Encoded documents in input order; with num_workers > 1 through a process pool's ordered
    imap (`encode` must then be picklable, e.g. a module-level function or a jaxgpt.tokenizer one)."""
    work = functools.partial(encode_document, encode=encode)
    if num_workers <= 1:
        yield from map(work, texts)
        return
    with multiprocessing.Pool(num_workers) as pool:
        yield from pool.imap(work, texts, chunksize=chunksize)


def shard_path(out_dir: str | os.PathLike, prefix: str, index: int) -> Path:
    split = "val" if index == 0 else "train"
    return Path(out_dir) / f"{prefix}_{split}_{index:06d}.bin"


def _write_next(buffer: np.ndarray, filled: int, out_dir, prefix: str, index: int) -> Path:
    path = shard_path(out_dir, prefix, index)
    write_shard(path, buffer[:filled])
    return path


def write_shards(
    documents: Iterable[np.ndarray],
    out_dir: str | os.PathLike,
    prefix: str,
    shard_size: int = DEFAULT_SHARD_SIZE,
    *,
    val_shard_size: int | None = None,
    progress: bool = True,
) -> list[Path]:
    """Pack token documents into shards of exactly `shard_size` tokens (the first, val, shard
    of `val_shard_size` if given), splitting documents across shard boundaries; the last
    shard holds the rest. Returns the written paths in order."""
    sizes = [shard_size if val_shard_size is None else val_shard_size, shard_size]
    if min(sizes) <= 0:
        raise ValueError(f"shard sizes must be positive, got shard_size={shard_size}, val_shard_size={val_shard_size}")
    written: list[Path] = []
    buffer = np.empty(sizes[0], dtype=np.uint16)
    filled = 0
    bar = None  # one progress bar per shard, opened when its first token arrives

    for tokens in documents:
        while len(tokens):
            if bar is None:
                bar = tqdm(total=len(buffer), unit="tok", desc=f"shard {len(written)}", disable=not progress)
            take = min(len(tokens), len(buffer) - filled)
            buffer[filled : filled + take] = tokens[:take]
            filled += take
            bar.update(take)
            tokens = tokens[take:]
            if filled == len(buffer):
                written.append(_write_next(buffer, filled, out_dir, prefix, len(written)))
                bar.close()
                buffer, filled, bar = np.empty(sizes[1], dtype=np.uint16), 0, None
    if filled:
        written.append(_write_next(buffer, filled, out_dir, prefix, len(written)))
    if bar is not None:
        bar.close()
    return written


def read_meta(path: str | os.PathLike) -> dict:
    """A shard folder's meta.json as a dict; ValueError naming the file when it is not JSON
    (a truncated write, say) and FileNotFoundError when it is missing."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error.msg} at line {error.lineno}); "
                         "rebuild the shard folder or restore this file") from None


def shard_meta(paths: list[Path], encoder: Encoder) -> dict:
    """What a shard folder's meta.json records about its shards: the encoding (its `name`,
    e.g. "gpt2" or "gpt2-bytes", which `jaxgpt.tokenizer.tokenizer_for` turns back into a
    tokenizer), where its files came from, token counts per shard, and one SHA-256 over the
    shards' names and bytes in order."""
    counts = {path.name: int(read_shard_header(path)) for path in paths}
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return {
        "encoding": getattr(encoder, "name", repr(encoder)),
        "encoding_files": getattr(encoder, "source", None),
        "val_tokens": sum(n for name, n in counts.items() if "_val_" in name),
        "train_tokens": sum(n for name, n in counts.items() if "_train_" in name),
        "shards": counts,
        "sha256": digest.hexdigest(),
    }


# --------------------------------------------------------------------------------------
# Text sources


def iter_text_file_documents(path: str | os.PathLike, text_field: str = "text") -> Iterator[str]:
    """Documents of one file: a .txt file is one document; a .jsonl file gives the
    `text_field` of each non-empty line."""
    path = Path(path)
    if path.suffix == ".txt":
        yield path.read_text(encoding="utf-8")
    elif path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            for line_number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
                    raise ValueError(f"{path}:{line_number}: no string field {text_field!r}")
                yield record[text_field]
    else:
        raise ValueError(f"{path}: expected a .txt or .jsonl file")


def local_text_files(source: str | os.PathLike) -> list[Path]:
    """A .txt/.jsonl file, or every such file under a folder (recursively, sorted)."""
    source = Path(source)
    if source.is_dir():
        files = sorted(p for p in source.rglob("*") if p.suffix in (".txt", ".jsonl") and p.is_file())
        if not files:
            raise ValueError(f"{source}: folder holds no .txt or .jsonl files")
        return files
    if not source.is_file():
        raise FileNotFoundError(f"no such file or folder: {source}")
    if source.suffix not in (".txt", ".jsonl"):
        raise ValueError(f"{source}: expected a .txt or .jsonl file or a folder of them")
    return [source]


def iter_hf_documents(
    name: str, *, config: str | None = None, split: str = "train", text_field: str = "text", streaming: bool = False
) -> Iterator[str]:
    """Documents of a Hugging Face dataset in dataset order (the record used
    HuggingFaceFW/fineweb, config sample-10BT, split train). Needs `datasets` and network."""
    try:
        from datasets import load_dataset
    except ImportError as error:
        raise RuntimeError(
            f"{name!r} is not a local file or folder, and reading it as a Hugging Face dataset needs the "
            "`datasets` package: pip install datasets (or pip install -e '.[data]')"
        ) from error
    try:
        dataset = load_dataset(name, name=config, split=split, streaming=streaming)
    except Exception as error:
        raise RuntimeError(f"could not load Hugging Face dataset {name!r} (config {config}, split {split}): {error}") from error
    for record in dataset:
        yield record[text_field]
