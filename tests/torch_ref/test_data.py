"""torch_ref.data: the record's distributed generator and validation batches on tiny hand-checkable shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from torch_ref.data import ShardsExhaustedError, batches_available, distributed_data_generator, val_batches
from torch_ref.shards import NoShardsError, write_shard


def write_counting_shards(folder: Path, lengths: list[int], prefix: str = "t") -> str:
    """Shard k holds k*1000 + arange(n), so every token tells which shard and offset it came from."""
    for k, length in enumerate(lengths):
        write_shard(folder / f"{prefix}_{k:06d}.bin", k * 1000 + np.arange(length))
    return str(folder / f"{prefix}_*.bin")


# Shards of 50 and 49 tokens, global batch 16 over 4 ranks (Bl = 4). In the 50-token shard the
# batches start at pos 0, 16, 32 (32 + 16 + 1 = 49 < 50); in the 49-token shard 49 >= 49, so
# only pos 0 and 16 are used. Rank r reads tokens[pos + 4r : pos + 4r + 5].
HAND_RANK1_INPUTS = [
    [4, 5, 6, 7], [20, 21, 22, 23], [36, 37, 38, 39],  # shard 0 (values 0..49)
    [1004, 1005, 1006, 1007], [1020, 1021, 1022, 1023],  # shard 1 (values 1000..1048)
    [2004, 2005, 2006, 2007],  # shard 2 (values 2000..2049)
]  # fmt: skip


def test_torch_generator_hand_computed(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [50, 49, 50])
    generator = distributed_data_generator(pattern, 16, 1, 4)
    for expected in HAND_RANK1_INPUTS:
        inputs, targets = next(generator)
        assert inputs.dtype == torch.int32 and targets.dtype == torch.int64
        assert inputs.tolist() == expected
        assert targets.tolist() == [t + 1 for t in expected]
    # Rank 3 of the last batch of shard 0 ends on token 48, the one shard 0's rule keeps.
    rank3 = distributed_data_generator(pattern, 16, 3, 4)
    batches = [next(rank3) for _ in range(3)]
    assert batches[2][0].tolist() == [44, 45, 46, 47] and batches[2][1].tolist() == [45, 46, 47, 48]


def test_torch_ranks_tile_the_global_batch(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [50])
    per_rank = [next(distributed_data_generator(pattern, 16, r, 4)) for r in range(4)]
    assert torch.cat([inputs for inputs, _ in per_rank]).tolist() == list(range(16))
    assert torch.cat([targets for _, targets in per_rank]).tolist() == list(range(1, 17))


def test_torch_exhausted_error_names_pattern_and_count(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [50, 49])
    generator = distributed_data_generator(pattern, 16, 0, 4)
    for _ in range(5):
        next(generator)
    with pytest.raises(ShardsExhaustedError, match=r"all 2 shard\(s\) matching .*t_\*\.bin"):
        next(generator)


def test_torch_cycle_wraps_to_first_shard(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [50, 49])
    generator = distributed_data_generator(pattern, 16, 1, 4, cycle=True)
    seen = [next(generator)[0].tolist() for _ in range(8)]
    assert seen[:5] == HAND_RANK1_INPUTS[:5]
    assert seen[5:] == HAND_RANK1_INPUTS[:3]


def test_torch_no_files(tmp_path: Path) -> None:
    with pytest.raises(NoShardsError, match="nothing_\\*.bin"):
        distributed_data_generator(str(tmp_path / "nothing_*.bin"), 16, 0, 4)


def test_torch_bad_arguments(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [50])
    with pytest.raises(ValueError, match="multiple of world_size"):
        distributed_data_generator(pattern, 18, 0, 4)
    with pytest.raises(ValueError, match="rank 4"):
        distributed_data_generator(pattern, 16, 4, 4)


def test_shard_too_short_for_one_batch(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [50, 17])  # 17 < 16 + 2
    generator = distributed_data_generator(pattern, 16, 0, 4)
    for _ in range(3):
        next(generator)
    with pytest.raises(ValueError, match="t_000001.bin: 17 tokens cannot hold"):
        next(generator)


def test_val_batches(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [50])
    batches = list(val_batches(pattern, 32, 16, 2, 4))
    assert [inputs.tolist() for inputs, _ in batches] == [[8, 9, 10, 11], [24, 25, 26, 27]]
    with pytest.raises(ValueError, match="multiple of batch_size"):
        val_batches(pattern, 40, 16, 0, 4)


def test_batches_available_follows_the_advance_rule(tmp_path):
    write_shard(tmp_path / "a.bin", np.zeros(1000, dtype=np.uint16))
    # pos = 0, 256, 512 serve (pos + 257 < 1000); pos = 768 does not (768 + 257 >= 1000).
    assert batches_available([tmp_path / "a.bin"], 256) == 3
    assert batches_available([tmp_path / "a.bin"] * 2, 998) == 2  # 998 + 1 < 1000
    assert batches_available([tmp_path / "a.bin"], 999) == 0
