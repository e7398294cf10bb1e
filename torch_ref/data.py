"""The record's token shards and distributed batch generator in PyTorch (RECORD.md section 8).

Written from the spec, independently of jaxgpt.data: parity_tests/test_data_parity.py checks
that both yield the same tokens. A shard is a 1024-byte header of 256 little-endian int32
([0] magic 20240520, [1] version 1, [2] token count n) followed by n uint16 tokens.
"""

from __future__ import annotations

import glob
import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
HEADER_BYTES = 256 * 4

__all__ = [
    "NoShardsError",
    "batches_available",
    "check_holds_one_batch",
    "ShardStream",
    "ShardsExhaustedError",
    "distributed_data_generator",
    "list_shards",
    "read_shard",
    "read_shard_header",
    "val_batches",
    "write_shard",
]


class NoShardsError(FileNotFoundError):
    """No file matches a shard glob pattern."""


class ShardsExhaustedError(RuntimeError):
    """Every shard of a pattern was used and cycling was not asked for."""


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


def distributed_data_generator(
    filename_pattern: str,
    batch_size: int,
    rank: int,
    world_size: int,
    *,
    cycle: bool = False,
    device: str | torch.device = "cpu",
    position: tuple[int, int] = (0, 0),
) -> ShardStream:
    """An iterator over rank `rank`'s (inputs, targets) of each global batch of `batch_size` tokens.

    inputs: (Bl,) int32 and targets: (Bl,) int64 with Bl = batch_size // world_size; rank r
    reads tokens[pos + r*Bl : pos + r*Bl + Bl + 1]. Before every batch (the first included) a
    shard with pos + batch_size + 1 >= len is left for the next shard at pos 0. When the
    sorted shards run out, raises ShardsExhaustedError unless `cycle` (then wraps around).
    On CUDA the slice goes through pinned memory with a non-blocking copy, as in the record.
    `position` = (shard index, pos) starts the stream where a saved `ShardStream.position` was.
    """
    if world_size <= 0 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside [0, world_size={world_size})")
    if batch_size <= 0 or batch_size % world_size:
        raise ValueError(f"batch_size {batch_size} must be a positive multiple of world_size {world_size}")
    files = list_shards(filename_pattern)
    return ShardStream(files, filename_pattern, batch_size, rank, world_size, cycle, torch.device(device), position)


class ShardStream:
    """The record's batch stream over sorted shards, resumable: `position` is (shard index,
    pos) where the next batch is looked for (before the advance rule), so a stream started at
    a saved position yields exactly the batches an uninterrupted one would."""

    def __init__(self, files: list[Path], pattern: str, batch_size: int, rank: int, world_size: int, cycle: bool,
                 device: torch.device, position: tuple[int, int] = (0, 0)) -> None:
        shard_index, pos = position
        if not 0 <= shard_index < len(files) or pos < 0:
            raise ValueError(f"data position {position} is outside the {len(files)} shard(s) matching {pattern!r}")
        self._files, self._pattern, self._cycle, self._device = files, pattern, cycle, device
        self._batch_size, self._local_size, self._rank = batch_size, batch_size // world_size, rank
        self._shard_index, self._pos = shard_index, pos
        self._tokens = read_shard(files[shard_index])

    @property
    def position(self) -> tuple[int, int]:
        return self._shard_index, self._pos

    def __iter__(self) -> ShardStream:
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        batch_size = self._batch_size
        if self._pos + batch_size + 1 >= len(self._tokens):  # RECORD.md 8.3 step 1: the shard's tail is dropped
            self._advance()
        # Only this rank's Bl + 1 tokens leave the memmap; its last is the next rank's first input.
        start = self._pos + self._rank * self._local_size
        buf = torch.from_numpy(np.asarray(self._tokens[start : start + self._local_size + 1], dtype=np.int32))
        if self._device.type == "cuda":
            buf = buf.pin_memory().to(self._device, non_blocking=True)
        self._pos += batch_size
        return buf[:-1], buf[1:].to(torch.int64)

    def _advance(self) -> None:
        index = self._shard_index + 1
        if index == len(self._files):
            if not self._cycle:
                raise ShardsExhaustedError(
                    f"ran out of data: all {len(self._files)} shard(s) matching {self._pattern!r} were used; "
                    "add shards, train fewer steps, or cycle the data"
                )
            index = 0
        tokens = read_shard(self._files[index])
        check_holds_one_batch(self._files[index], len(tokens), self._batch_size)
        self._shard_index, self._pos, self._tokens = index, 0, tokens


def check_holds_one_batch(path: str | os.PathLike, num_tokens: int, batch_size: int) -> None:
    """ValueError naming the shard when it cannot serve one batch on its own."""
    if batch_size + 1 >= num_tokens:
        raise ValueError(f"{path}: {num_tokens} tokens cannot hold one batch of {batch_size} tokens "
                         f"(the advance rule needs at least batch + 2 = {batch_size + 2})")


def batches_available(shards: Sequence[Path], batch_tokens: int, position: tuple[int, int] = (0, 0)) -> int:
    """Batches the record's generator takes from `shards`, starting at `position` = (shard
    index, pos), before running out: a shard of n tokens serves batches at pos = p0, p0 + B, ...
    while pos + B + 1 < n (RECORD.md 8.3; p0 = 0 except in the starting shard)."""
    total = 0
    first, start_pos = position
    for index, shard in enumerate(shards[first:], start=first):
        num_tokens, pos = read_shard_header(shard), start_pos if index == first else 0
        if pos + batch_tokens + 1 < num_tokens:
            total += (num_tokens - pos - batch_tokens - 2) // batch_tokens + 1
    return total


def val_batches(
    filename_pattern: str,
    val_tokens: int,
    batch_size: int,
    rank: int,
    world_size: int,
    *,
    device: str | torch.device = "cpu",
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One evaluation as in the record: a fresh generator, val_tokens // batch_size batches
    (val_tokens must be a multiple of batch_size), i.e. exactly the first val_tokens tokens."""
    if batch_size <= 0 or val_tokens < 0 or val_tokens % batch_size:
        raise ValueError(f"val_tokens {val_tokens} must be a non-negative multiple of batch_size {batch_size}")
    generator = distributed_data_generator(filename_pattern, batch_size, rank, world_size, device=device)
    return itertools.islice(generator, val_tokens // batch_size)
