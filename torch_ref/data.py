"""The record's distributed batch generator in PyTorch (RECORD.md 8.3).

The shard format has one implementation, numpy-only, in `jaxgpt.data`; this module imports
`read_shard` / `write_shard` (and the shard-list helpers and errors) from there, which is the
one place torch_ref depends on jaxgpt besides `jaxgpt.config`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import torch

from jaxgpt.data import (
    NoShardsError,
    ShardsExhaustedError,
    batch_starts,
    list_shards,
    read_shard,
    write_shard,
)

__all__ = [
    "NoShardsError",
    "ShardsExhaustedError",
    "distributed_data_generator",
    "read_shard",
    "val_batches",
    "write_shard",
]


def distributed_data_generator(
    filename_pattern: str,
    batch_size: int,
    rank: int,
    world_size: int,
    *,
    cycle: bool = False,
    device: str | torch.device = "cpu",
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield rank `rank`'s (inputs, targets) of each global batch of `batch_size` tokens.

    inputs: (Bl,) int32 and targets: (Bl,) int64 with Bl = batch_size // world_size; rank r
    reads tokens[pos + r*Bl : pos + r*Bl + Bl + 1]. Before every batch (the first included) a
    shard with pos + batch_size + 1 >= len is left for the next shard at pos 0. When the
    sorted shards run out, raises ShardsExhaustedError unless `cycle` (then wraps around).
    On CUDA the slice goes through pinned memory with a non-blocking copy, as in the record.
    """
    if world_size <= 0 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside [0, world_size={world_size})")
    if batch_size <= 0 or batch_size % world_size:
        raise ValueError(f"batch_size {batch_size} must be a positive multiple of world_size {world_size}")
    files = list_shards(filename_pattern)
    local_size = batch_size // world_size
    device = torch.device(device)
    return _generate(files, filename_pattern, batch_size, rank * local_size, local_size, cycle, device)


def _generate(files, pattern, batch_size, offset, local_size, cycle, device):
    for tokens, at in batch_starts(files, pattern, batch_size, cycle=cycle):
        # Only this rank's local_size + 1 tokens leave the memmap; the last one is shared with
        # the next rank's first (it is this rank's last target).
        start = at.pos + offset
        buf = torch.from_numpy(np.asarray(tokens[start : start + local_size + 1], dtype=np.int32))
        if device.type == "cuda":
            buf = buf.pin_memory().to(device, non_blocking=True)
        yield buf[:-1], buf[1:].to(torch.int64)


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
