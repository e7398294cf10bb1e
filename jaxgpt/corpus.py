"""Text to record-format shards, as the record's `data/fineweb.py` did (RECORD.md 8.4).

Each document becomes [EOT] + encode(text): the `<|endoftext|>` token 50256 is PREPENDED, so
it marks document starts. Shards are filled in document order with exactly `shard_size`
tokens; a document that does not fit is split and its remainder opens the next shard; the
last shard holds what is left. Shard 0 is named `val`, later ones `train`:
`<prefix>_val_000000.bin`, `<prefix>_train_000001.bin`, ...

Encoders are plain callables `str -> list[int]` so tests can inject a tiny one. The GPT-2
encoders here: tiktoken's `gpt2` (used only when its files are cached, since loading it
otherwise downloads them), or GPT-2's 256 single-byte tokens, which need no files.
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
from tqdm import tqdm

from jaxgpt.config import EOT_ID
from jaxgpt.data import write_shard

Encoder = Callable[[str], "list[int] | np.ndarray"]
DEFAULT_SHARD_SIZE = 10**8

# --------------------------------------------------------------------------------------
# GPT-2 encoders

# The two files tiktoken's `gpt2` encoding is built from, with their SHA-256 (as pinned by
# tiktoken_ext.openai_public); tiktoken caches each under sha1(url) in its cache folder.
_GPT2_FILES = {
    "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe": (
        "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
    ),
    "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json": (
        "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
    ),
}


def tiktoken_cache_dir() -> Path | None:
    """The folder tiktoken reads its cached files from (None: caching disabled)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            value = os.environ[variable]
            return Path(value) if value else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def gpt2_tiktoken_available_offline() -> bool:
    """True when tiktoken is installed and both GPT-2 files sit intact in its cache, so that
    loading the encoding cannot touch the network (checked by file hash, never by trying)."""
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return False
    cache = tiktoken_cache_dir()
    if cache is None:
        return False
    for url, sha256 in _GPT2_FILES.items():
        cached = cache / hashlib.sha1(url.encode()).hexdigest()
        if not cached.is_file() or hashlib.sha256(cached.read_bytes()).hexdigest() != sha256:
            return False
    return True


@functools.lru_cache(maxsize=1)
def _tiktoken_gpt2():
    import tiktoken

    return tiktoken.get_encoding("gpt2")


class TiktokenGPT2:
    """GPT-2 BPE via tiktoken's `encode_ordinary` (special-token text is not parsed as special,
    as in the record). Picklable: each worker process loads the encoding on first use."""

    name = "gpt2-tiktoken"

    def __call__(self, text: str) -> list[int]:
        return _tiktoken_gpt2().encode_ordinary(text)


def gpt2_byte_token_ids() -> np.ndarray:
    """(256,) int64: the GPT-2 token id of each single byte value.

    GPT-2's byte-level BPE first maps every byte to a printable character (`bytes_to_unicode`
    in OpenAI's encoder.py): the bytes '!'..'~' (33-126), '¡'..'¬' (161-172) and '®'..'ÿ'
    (174-255) keep their own code point, and the other 68 bytes (0-32, 127-160, 173) are
    appended after them in increasing order. encoder.json gives the single-character tokens
    ids 0..255 in exactly that list order. So '!' is 0, 'A' is 32, 'a' is 64, '\\n' (10) is
    198 and ' ' (32) is 220, the ids tiktoken also returns for them.
    """
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    order = printable + [b for b in range(256) if b not in set(printable)]
    ids = np.empty(256, dtype=np.int64)
    ids[order] = np.arange(256)
    return ids


class ByteGPT2:
    """Encodes UTF-8 bytes one token per byte with GPT-2's single-byte token ids: every id is
    a valid GPT-2 id and decodes back to the text, with no vocabulary file needed."""

    name = "gpt2-bytes"

    def __init__(self) -> None:
        self._ids = gpt2_byte_token_ids()

    def __call__(self, text: str) -> np.ndarray:
        return self._ids[np.frombuffer(text.encode("utf-8"), dtype=np.uint8)]


def gpt2_encoder(*, allow_download: bool = False) -> TiktokenGPT2 | ByteGPT2:
    """tiktoken's GPT-2 when usable without the network (or `allow_download`), else bytes."""
    if gpt2_tiktoken_available_offline():
        return TiktokenGPT2()
    if allow_download:
        try:
            _tiktoken_gpt2()
            return TiktokenGPT2()
        except Exception as error:  # any network/import failure: say so, fall back
            print(f"tiktoken gpt2 unavailable ({type(error).__name__}: {error}); using GPT-2 byte tokens")
    return ByteGPT2()


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
    imap (`encode` must then be picklable, e.g. a module-level function or TiktokenGPT2)."""
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
