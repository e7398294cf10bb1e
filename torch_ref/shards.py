"""The record's token shards on disk in PyTorch's package (RECORD.md 8.1): the `.bin` format and
shard lists, numpy only.

Written from the spec, independently of jaxgpt.shards (parity_tests/test_data_parity.py checks
that both streams yield the same tokens). A shard is a 1024-byte header of 256 little-endian
int32 ([0] magic 20240520, [1] version 1, [2] token count n) followed by n uint16 tokens. The
batch stream over the shards is `torch_ref.data`.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import numpy as np

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
HEADER_BYTES = 256 * 4


class NoShardsError(FileNotFoundError):
    """No file matches a shard glob pattern."""


def read_shard_header(path: str | os.PathLike) -> int:
    """Check a shard's header and size (the record's asserts, with messages) and return n."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"shard file not found: {path}")
    size = path.stat().st_size
    if size < HEADER_BYTES:
        raise ValueError(f"{path}: header is {size} bytes, expected at least {HEADER_BYTES}")
    header = np.fromfile(path, dtype="<i4", count=3)
    magic, version, num_tokens = (int(v) for v in header)
    if magic != SHARD_MAGIC:
        raise ValueError(f"{path}: magic number {magic} is not {SHARD_MAGIC}; not a token shard")
    if version != SHARD_VERSION:
        raise ValueError(f"{path}: shard version {version} is not supported (expected {SHARD_VERSION})")
    if num_tokens < 0 or size - HEADER_BYTES != 2 * num_tokens:
        raise ValueError(f"{path}: header claims {num_tokens} tokens but {size - HEADER_BYTES} body bytes follow")
    return num_tokens


def read_shard(path: str | os.PathLike) -> np.ndarray:
    """A shard's tokens: (n,) uint16, memory-mapped read-only."""
    num_tokens = read_shard_header(path)
    if num_tokens == 0:
        return np.zeros(0, dtype="<u2")
    return np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(num_tokens,))


def write_shard(path: str | os.PathLike, tokens) -> None:
    """Write 1-D integer tokens in [0, 2**16) as a shard (temporary file, then rename)."""
    path = Path(path)
    array = np.asarray(tokens)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{path}: tokens must be a 1-D integer array, got {array.dtype} {array.shape}")
    if array.size and (array.min() < 0 or array.max() >= 2**16):
        raise ValueError(f"{path}: tokens must lie in [0, 65536) to fit uint16")
    header = np.zeros(256, dtype="<i4")
    header[:3] = (SHARD_MAGIC, SHARD_VERSION, array.size)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(header.tobytes())
            f.write(array.astype("<u2").tobytes())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def list_shards(pattern: str) -> list[Path]:
    """Files matching the glob `pattern`, sorted by name (numeric order for 6-digit names)."""
    files = sorted(Path(name) for name in glob.glob(os.fspath(pattern)) if os.path.isfile(name))
    if not files:
        raise NoShardsError(f"no shard files match {pattern!r} (relative to cwd {os.getcwd()})")
    return files
