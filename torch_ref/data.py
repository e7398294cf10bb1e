"""The record's distributed batch generator over its token shards, in PyTorch (RECORD.md section 8).

Written from the spec, independently of jaxgpt.data: parity_tests/test_data_parity.py checks
that both yield the same tokens. The shards themselves (the `.bin` format, shard lists) are
`torch_ref.shards`; their readers and writer stay importable from here, as from jaxgpt.data.

The lineage's loaders (LINEAGE.md 3.7, 5.9) test for the next shard per record rank, after
reading and at the rank's own offset: `shard_switch` "per_rank" (#15, pos + offset + B + 1 >= len
moves on) and "per_rank_inclusive" (#8/#9, > len), over `data_ranks` record ranks; #8/#9's
repeated first batch is the trainer's (it fetches once before resetting, as the record).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from torch_ref.shards import list_shards, read_shard, read_shard_header, write_shard

__all__ = [
    "ShardStream",
    "ShardsExhaustedError",
    "batches_available",
    "check_holds_one_batch",
    "distributed_data_generator",
    "list_shards",
    "read_shard",
    "read_shard_header",
    "val_batches",
    "write_shard",
]


class ShardsExhaustedError(RuntimeError):
    """Every shard of a pattern was used and cycling was not asked for."""


def distributed_data_generator(
    filename_pattern: str,
    batch_size: int,
    rank: int,
    world_size: int,
    *,
    cycle: bool = False,
    device: str | torch.device = "cpu",
    position: tuple[int, int] = (0, 0),
    shard_switch: str = "global",
    data_ranks: int = 1,
    batches: int = 0,
) -> ShardStream | PerRankShardStream:
    """An iterator over rank `rank`'s (inputs, targets) of each global batch of `batch_size` tokens.

    inputs: (Bl,) int32 and targets: (Bl,) int64 with Bl = batch_size // world_size; rank r
    reads tokens[pos + r*Bl : pos + r*Bl + Bl + 1]. Before every batch (the first included) a
    shard with pos + batch_size + 1 >= len is left for the next shard at pos 0. When the
    sorted shards run out, raises ShardsExhaustedError unless `cycle` (then wraps around).
    On CUDA the slice goes through pinned memory with a non-blocking copy, as in the record.
    `position` = (shard index, pos) starts the stream where a saved `ShardStream.position` was.
    `shard_switch` / `data_ranks`: a per-rank shard switch over `data_ranks` record ranks (each
    with its own shard and position); such a stream resumes by replaying `batches` batches.
    """
    if world_size <= 0 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside [0, world_size={world_size})")
    if batch_size <= 0 or batch_size % world_size:
        raise ValueError(f"batch_size {batch_size} must be a positive multiple of world_size {world_size}")
    files = list_shards(filename_pattern)
    if shard_switch == "global":
        stream = ShardStream(files, filename_pattern, batch_size, rank, world_size, cycle, torch.device(device), position)
        stream.batches = batches  # counted on from there (a global stream resumes from `position`)
        return stream
    return PerRankShardStream(files, filename_pattern, batch_size, rank, world_size, cycle, torch.device(device),
                              shard_switch, data_ranks, batches)


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
        self.batches = 0  # batches served (distributed_data_generator counts on from a resumed count)

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
        self.batches += 1
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


def rank_keeps_shard(pos: int, offset: int, batch_size: int, num_tokens: int, rule: str) -> bool:
    """After a read, does the record rank at `offset` stay in its shard for the batch at base
    position `pos`? "per_rank": while pos + offset + B + 1 < len (#15); "per_rank_inclusive":
    while <= len (#8/#9)."""
    end = pos + offset + batch_size + 1
    if rule == "per_rank":
        return end < num_tokens
    if rule == "per_rank_inclusive":
        return end <= num_tokens
    raise ValueError(f"unknown shard switch {rule!r}")


def iter_kept(num_tokens: int, offset: int, batch_size: int, rule: str) -> Iterator[int]:
    """Base positions B, 2B, ... at which the record rank at `offset` stays in a shard."""
    pos = batch_size
    while rank_keeps_shard(pos, offset, batch_size, num_tokens, rule):
        yield pos
        pos += batch_size


class PerRankShardStream:
    """The lineage's loaders: every record rank r of `data_ranks` (slice [r L, (r + 1) L) of each
    batch, L = B / data_ranks) keeps its own shard and base position, reads its slice, advances
    by B and then tests `rank_keeps_shard` at its offset r L; a rank that fails moves to the next
    shard at base 0. This process's (inputs, targets) are the parts of its slice
    [rank Bl, (rank + 1) Bl) from each record rank's shard, concatenated. `batches` served ones
    are replayed first (positions only)."""

    def __init__(self, files: list[Path], pattern: str, batch_size: int, rank: int, world_size: int, cycle: bool,
                 device: torch.device, rule: str, data_ranks: int, batches: int = 0) -> None:
        if batch_size % data_ranks:
            raise ValueError(f"batch of {batch_size} tokens does not split over {data_ranks} record ranks")
        self._files, self._pattern, self._cycle, self._device, self._rule = files, pattern, cycle, device, rule
        self._batch_size, self._rank_size = batch_size, batch_size // data_ranks
        local = batch_size // world_size
        lo, hi = rank * local, (rank + 1) * local
        # (record rank, first token, end token) of this process's slice, in global batch offsets
        self._parts = [(r, max(lo, r * self._rank_size), min(hi, (r + 1) * self._rank_size))
                       for r in range(lo // self._rank_size, -(-hi // self._rank_size))]
        self._state = {r: [0, 0] for r, _, _ in self._parts}  # shard index, base position
        self._tokens = {0: read_shard(files[0])}
        self.batches = 0
        for _ in range(batches):
            self._advance_all()

    @property
    def position(self) -> tuple[int, int]:
        """(shard index, base position) of this process's first record rank."""
        shard, pos = self._state[self._parts[0][0]]
        return shard, pos

    def _shard(self, index: int) -> np.ndarray:
        if index not in self._tokens:
            self._tokens[index] = read_shard(self._files[index])
            check_holds_one_batch(self._files[index], len(self._tokens[index]), self._batch_size)
        return self._tokens[index]

    def _advance_all(self) -> None:
        """Every record rank past its current batch: pos += B, then the rank's shard test."""
        for r, _, _ in self._parts:
            state = self._state[r]
            state[1] += self._batch_size
            if not rank_keeps_shard(state[1], r * self._rank_size, self._batch_size, len(self._shard(state[0])), self._rule):
                index = state[0] + 1
                # Past the last shard: wrap (cycle) or stay there, refused only if another batch is read.
                state[0], state[1] = (0 if self._cycle and index == len(self._files) else index), 0
        self.batches += 1

    def __iter__(self) -> PerRankShardStream:
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets = [], []
        if any(shard == len(self._files) for shard, _ in self._state.values()):
            raise ShardsExhaustedError(
                f"ran out of data: all {len(self._files)} shard(s) matching {self._pattern!r} were used; "
                "add shards, train fewer steps, or cycle the data"
            )
        for r, first, end in self._parts:
            shard, pos = self._state[r]
            buf = np.asarray(self._shard(shard)[pos + first : pos + end + 1], dtype=np.int32)
            inputs.append(torch.from_numpy(buf[:-1].copy()))
            targets.append(torch.from_numpy(buf[1:].astype(np.int64)))
        self._advance_all()
        return torch.cat(inputs).to(self._device), torch.cat(targets).to(self._device)


def check_holds_one_batch(path: str | os.PathLike, num_tokens: int, batch_size: int) -> None:
    """ValueError naming the shard when it cannot serve one batch on its own."""
    if batch_size + 1 >= num_tokens:
        raise ValueError(f"{path}: {num_tokens} tokens cannot hold one batch of {batch_size} tokens "
                         f"(the advance rule needs at least batch + 2 = {batch_size + 2})")


def batches_available(shards: Sequence[Path], batch_tokens: int, position: tuple[int, int] = (0, 0),
                      shard_switch: str = "global", data_ranks: int = 1, batches: int = 0) -> int:
    """Batches the record's generator takes from `shards`, starting at `position` = (shard
    index, pos), before running out: a shard of n tokens serves batches at pos = p0, p0 + B, ...
    while pos + B + 1 < n (RECORD.md 8.3; p0 = 0 except in the starting shard). A per-rank
    shard switch: the fewest batches any record rank reads, less the `batches` already served."""
    if shard_switch != "global":
        lengths = [read_shard_header(shard) for shard in shards]
        rank_tokens = batch_tokens // data_ranks
        counts = []
        for rank in range(data_ranks):
            count = 0
            for num_tokens in lengths:  # a shard's first batch, then while the rank keeps the shard
                count += 1 + sum(1 for _ in iter_kept(num_tokens, rank * rank_tokens, batch_tokens, shard_switch))
            counts.append(count)
        return max(0, min(counts) - batches)
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
