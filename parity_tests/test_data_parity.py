"""jaxgpt's BatchLoader and torch_ref's distributed_data_generator yield the same tokens.

Token ids are integers, so the comparison is exact (no tolerance). The shards have uneven
lengths so that the stream crosses several shard advances, including a shard that serves
only one batch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jaxgpt.data import BatchLoader, ShardsExhaustedError, val_batches, write_shard
from torch_ref.data import ShardsExhaustedError as TorchShardsExhaustedError
from torch_ref.data import distributed_data_generator
from torch_ref.data import val_batches as torch_val_batches

WORLD = 4
SHARD_LENGTHS = [3000, 1030, 2051, 2049, 4100]  # 2051 serves pos 1024 (2049 < 2051), 2049 does not


@pytest.fixture()
def random_shards(tmp_path: Path) -> str:
    rng = np.random.default_rng(7)
    for k, length in enumerate(SHARD_LENGTHS):
        write_shard(tmp_path / f"parity_train_{k:06d}.bin", rng.integers(0, 50257, size=length))
    return str(tmp_path / "parity_train_*.bin")


def torch_stream(pattern: str, batch_tokens: int, rank: int, steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    generator = distributed_data_generator(pattern, batch_tokens, rank, WORLD)
    return [(i.numpy(), t.numpy()) for i, t in (next(generator) for _ in range(steps))]


def count_batches(lengths: list[int], batch_tokens: int) -> int:
    """Batches the record's rule serves from shards of these lengths (the rule, re-derived)."""
    return sum(len(range(0, length - batch_tokens - 1, batch_tokens)) for length in lengths)


@pytest.mark.parametrize("seq_len, process_count", [(256, 1), (128, 1), (128, 2), (256, 2)])
def test_loader_matches_torch_ranks(random_shards: str, seq_len: int, process_count: int) -> None:
    batch_tokens = WORLD * 256  # torch rank r holds 256 tokens: seq_len 256 -> 1 row, 128 -> 2 rows
    steps = count_batches(SHARD_LENGTHS, batch_tokens)
    assert steps == 2 + 1 + 2 + 1 + 4  # per shard of SHARD_LENGTHS
    per_rank = [torch_stream(random_shards, batch_tokens, r, steps) for r in range(WORLD)]
    hosts = [
        BatchLoader(random_shards, batch_tokens, seq_len, process_index=p, process_count=process_count)
        for p in range(process_count)
    ]
    try:
        for step in range(steps):
            local = [next(host) for host in hosts]
            inputs = np.concatenate([b.inputs for b in local]).reshape(WORLD, -1)
            targets = np.concatenate([b.targets for b in local]).reshape(WORLD, -1)
            for rank in range(WORLD):
                torch_inputs, torch_targets = per_rank[rank][step]
                np.testing.assert_array_equal(inputs[rank], torch_inputs)  # exact: token ids
                np.testing.assert_array_equal(targets[rank], torch_targets)  # exact: token ids
        for host in hosts:  # both run out at the same step
            with pytest.raises(ShardsExhaustedError):
                next(host)
        generator = distributed_data_generator(random_shards, batch_tokens, 0, WORLD)
        with pytest.raises(TorchShardsExhaustedError):
            for _ in range(steps + 1):
                next(generator)
    finally:
        for host in hosts:
            host.close()


def test_val_batches_match(random_shards: str) -> None:
    batch_tokens, val_tokens = WORLD * 256, 2 * WORLD * 256
    jax_batches = list(val_batches(random_shards, val_tokens, batch_tokens, 256))
    for rank in range(WORLD):
        torch_batches = list(torch_val_batches(random_shards, val_tokens, batch_tokens, rank, WORLD))
        assert len(torch_batches) == len(jax_batches) == 2
        for (torch_inputs, torch_targets), (inputs, targets) in zip(torch_batches, jax_batches):
            np.testing.assert_array_equal(inputs[rank], torch_inputs.numpy())  # exact: token ids
            np.testing.assert_array_equal(targets[rank], torch_targets.numpy())  # exact: token ids


@pytest.mark.parametrize("rule", ["per_rank", "per_rank_inclusive"])
@pytest.mark.parametrize("world", [1, 2, 8])
def test_per_rank_shard_switch_streams_agree(tmp_path: Path, rule: str, world: int):
    """The lineage's per-rank shard switch: 8 record ranks of one 128-token sequence each, read
    by `world` processes (torch_ref) and one host (jaxgpt), over shards whose lengths make the
    later ranks leave a shard one batch early; 14 batches cross several switches and a wrap."""
    seq, ranks = 128, 8
    batch = seq * ranks
    for k, length in enumerate((4800, 4736, 4865)):
        write_shard(tmp_path / f"r_{k:06d}.bin", k * 10000 + np.arange(length) % 10000)
    pattern = str(tmp_path / "r_*.bin")
    with BatchLoader(pattern, batch, seq, shard_switch=rule, data_ranks=ranks, cycle=True, prefetch=0) as loader:
        jax_batches = [next(loader) for _ in range(14)]
    local = batch // world
    for rank in range(world):
        stream = distributed_data_generator(pattern, batch, rank, world, cycle=True, shard_switch=rule, data_ranks=ranks)
        for step, expected in enumerate(jax_batches):
            inputs, targets = next(stream)
            rows = slice(rank * local // seq, (rank + 1) * local // seq)
            np.testing.assert_array_equal(inputs.numpy(), expected.inputs[rows].reshape(-1), err_msg=f"step {step}")
            np.testing.assert_array_equal(targets.numpy(), expected.targets[rows].reshape(-1), err_msg=f"step {step}")
    resumed = distributed_data_generator(pattern, batch, 0, 1, cycle=True, shard_switch=rule, data_ranks=ranks, batches=9)
    np.testing.assert_array_equal(next(resumed)[0].numpy(), jax_batches[9].inputs.reshape(-1))
