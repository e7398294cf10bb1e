"""The record's token shards on disk (RECORD.md 8.1): the `.bin` format, shard lists, checks.

Shard format (`.bin`): a 1024-byte header of 256 little-endian int32 values
([0] magic 20240520, [1] version 1, [2] token count n, the rest zero), then n uint16 tokens.
`read_shard_header` validates a file's header and size, `read_shard` maps its (n,) uint16
tokens without a copy, `write_shard` writes one atomically. `list_shards` turns a glob into the
sorted shard list, refusing a folder whose build never finished (`check_shard_folders`), and
`check_token_ids` checks a shard's ids against a vocabulary. numpy only (no JAX): the batch
stream over these shards is `jaxgpt.data`; torch_ref states the same format in `torch_ref.shards`.
"""

from __future__ import annotations

import glob
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
HEADER_INT32S = 256
HEADER_BYTES = HEADER_INT32S * 4
TOKEN_DTYPE = np.dtype("<u2")
_HEADER_DTYPE = np.dtype("<i4")


def read_shard_header(path: str | os.PathLike) -> int:
    """Validate the header and size of a shard and return its token count n.

    Raises FileNotFoundError (with the path) for a missing file and ValueError naming the
    file for a short header, wrong magic or version, or a body that is not exactly 2n bytes.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"shard file not found: {path}")
    file_bytes = path.stat().st_size
    if file_bytes < HEADER_BYTES:
        raise ValueError(f"{path}: header is {file_bytes} bytes, expected at least {HEADER_BYTES}")
    with path.open("rb") as f:
        header = np.frombuffer(f.read(HEADER_BYTES), dtype=_HEADER_DTYPE)
    magic, version, num_tokens = (int(v) for v in header[:3])
    if magic != SHARD_MAGIC:
        raise ValueError(f"{path}: magic number {magic} is not {SHARD_MAGIC}; not a token shard")
    if version != SHARD_VERSION:
        raise ValueError(f"{path}: shard version {version} is not supported (expected {SHARD_VERSION})")
    if num_tokens < 0:
        raise ValueError(f"{path}: header claims a negative token count {num_tokens}")
    body_bytes = file_bytes - HEADER_BYTES
    expected = num_tokens * TOKEN_DTYPE.itemsize
    if body_bytes != expected:
        kind = "truncated" if body_bytes < expected else "longer than its header says"
        raise ValueError(
            f"{path}: body is {kind}: header claims {num_tokens} tokens ({expected} bytes) "
            f"but {body_bytes} bytes follow the header"
        )
    return num_tokens


def read_shard(path: str | os.PathLike) -> np.ndarray:
    """Tokens of a shard: a read-only (n,) uint16 np.memmap over the body (no copy).

    Errors as in `read_shard_header`.
    """
    num_tokens = read_shard_header(path)
    if num_tokens == 0:  # np.memmap refuses empty maps
        return np.zeros((0,), dtype=TOKEN_DTYPE)
    return np.memmap(path, dtype=TOKEN_DTYPE, mode="r", offset=HEADER_BYTES, shape=(num_tokens,))


def write_shard(path: str | os.PathLike, tokens: Any) -> None:
    """Write 1-D integer `tokens` (each in [0, 2**16)) as a shard, atomically.

    The file appears complete or not at all: it is written to a temporary file in the same
    folder, flushed with fsync, then renamed over `path`. Raises ValueError for tokens out of
    the uint16 range, non-integer or non-1-D input.
    """
    path = Path(path)
    array = np.asarray(tokens)
    if array.ndim != 1:
        raise ValueError(f"{path}: tokens must be 1-D, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{path}: tokens must be integers, got dtype {array.dtype}")
    if array.size and (int(array.min()) < 0 or int(array.max()) >= 2**16):
        raise ValueError(
            f"{path}: tokens must lie in [0, 65536) to fit uint16; got min {int(array.min())}, "
            f"max {int(array.max())}"
        )
    if array.size >= 2**31:
        raise ValueError(f"{path}: {array.size} tokens do not fit the int32 count of the header")
    header = np.zeros(HEADER_INT32S, dtype=_HEADER_DTYPE)
    header[:3] = (SHARD_MAGIC, SHARD_VERSION, array.size)
    body = array.astype(TOKEN_DTYPE, copy=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not tempfile.mkstemp: its 0600 mode would survive the rename; os.open applies the umask.
    tmp_name = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header.tobytes())
            f.write(body.tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


class NoShardsError(FileNotFoundError):
    """No file matches a shard glob pattern."""


class IncompleteShardsError(ValueError):
    """A shard folder whose build (make_shards, the sample corpus) never finished."""


# A shard folder's build state (docs/DATA.md "Complete shard folders"): make_shards and the
# sample corpus write `meta.json`, then `.complete` last. meta.json without .complete is a build
# that stopped part-way (refused); neither is a folder of shards made elsewhere (the record's
# FineWeb download, hand-made test shards: accepted, with a note that nothing vouches for them).
COMPLETE_MARKER = ".complete"
META_FILE = "meta.json"


def check_shard_folders(files: Sequence[Path]) -> list[Path]:
    """Refuse the folders of `files` whose build did not finish (IncompleteShardsError naming the
    folder); return the folders that carry no build marker at all (made by other tools)."""
    unmarked = []
    for folder in sorted({Path(file).parent for file in files}):
        if (folder / COMPLETE_MARKER).is_file():
            continue
        if (folder / META_FILE).is_file():
            raise IncompleteShardsError(
                f"{folder} holds {META_FILE} but no {COMPLETE_MARKER} marker: the build that wrote its shards "
                f"stopped part-way, so some may be missing or short. Rebuild it (scripts/make_shards.py ... --overwrite), "
                f"or, if you know the shards are whole, mark it with: touch {folder / COMPLETE_MARKER}"
            )
        unmarked.append(folder)
    return unmarked


def list_shards(pattern: str) -> list[Path]:
    """Files matching the glob `pattern` (relative to the cwd unless absolute), sorted by name.

    Sorting by name is numeric order for the record's 6-digit zero-padded shard numbers.
    Raises NoShardsError showing the pattern and the cwd when nothing matches, and
    IncompleteShardsError for a folder whose build never finished (check_shard_folders).
    """
    files = sorted(Path(name) for name in glob.glob(os.fspath(pattern)) if os.path.isfile(name))
    if not files:
        raise NoShardsError(f"no shard files match {pattern!r} (relative to cwd {os.getcwd()})")
    check_shard_folders(files)
    return files


def check_token_ids(path: str | os.PathLike, tokens: np.ndarray, vocab_size: int) -> None:
    """Raise ValueError naming the shard, its largest id and the vocabulary when any token id is
    >= `vocab_size` (a shard made with another tokenizer would otherwise train on garbage
    embeddings or index past the table). One vectorised max over the memmap: ~0.1 s per 10**8 tokens."""
    if len(tokens) == 0:
        return
    largest = int(np.max(tokens))
    if largest >= vocab_size:
        raise ValueError(
            f"{path}: token id {largest} is outside the model's vocabulary of {vocab_size} "
            "(were these shards made with another tokenizer?)"
        )
