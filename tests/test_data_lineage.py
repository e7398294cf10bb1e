"""jaxgpt.data: the lineage's data-stream quirks (LINEAGE.md 3.7 and 5.9) against an oracle.

The oracle below restates the records' loaders in the spec's words: every rank keeps its own
position, starting at r * L (L = B / ranks); a call reads [pos, pos + L + 1), moves pos on by B,
and then leaves the shard (wrapping around the file list) when pos + B + 1 > len (#8/#9) or
>= len (#15), restarting at r * L. Token values encode (shard, position), so each sequence's
first token says where it was read.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxgpt import data

SEQ = 128
RANKS = 8
BATCH = RANKS * SEQ  # one 128-token sequence per record rank
# 4800 tokens: ranks 0-5 read 4 batches (the last at 3072 + r*128), ranks 6-7 only 3, because
# r*128 + 4*1024 + 1 > 4800 - 1024 for r >= 6 (the 10^8-token shards' 190 vs 189 in miniature).
LENGTHS = (4800, 4800, 4800)


def _oracle(lengths: tuple[int, ...], batches: int, inclusive: bool) -> list[list[tuple[int, int]]]:
    """Per batch, per rank: (shard, first token position) the records' loaders read."""
    state = [[0, r * SEQ] for r in range(RANKS)]
    out = []
    for _ in range(batches):
        out.append([tuple(s) for s in state])
        for r, s in enumerate(state):
            s[1] += BATCH
            end = s[1] + BATCH + 1
            if (end > lengths[s[0]]) if inclusive else (end >= lengths[s[0]]):
                s[0], s[1] = (s[0] + 1) % len(lengths), r * SEQ
    return out


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lineage_shards")
    for k, length in enumerate(LENGTHS):
        data.write_shard(folder / f"s_{k:06d}.bin", k * 10000 + np.arange(length) % 10000)
    return str(folder / "s_*.bin")


def _where(batch: data.Batch) -> list[tuple[int, int]]:
    return [(int(first) // 10000, int(first) % 10000) for first in batch.inputs[:, 0]]


@pytest.mark.parametrize("rule, inclusive", [("per_rank_inclusive", True), ("per_rank", False)])
def test_per_rank_shard_switch_matches_the_records_loaders(shards, rule, inclusive):
    count = 11
    expected = _oracle(LENGTHS, count, inclusive)
    with data.BatchLoader(shards, BATCH, SEQ, shard_switch=rule, data_ranks=RANKS, cycle=True, prefetch=0) as loader:
        got = [_where(next(loader)) for _ in range(count)]
    assert got == expected
    # The quirk itself: at batch 3, ranks 0-5 are still in shard 0, ranks 6-7 already in shard 1.
    assert [shard for shard, _ in got[3]] == [0] * 6 + [1] * 2


def test_per_rank_stream_targets_are_the_next_tokens_of_each_ranks_shard(shards):
    with data.BatchLoader(shards, BATCH, SEQ, shard_switch="per_rank", data_ranks=RANKS, cycle=True, prefetch=0) as loader:
        for _ in range(4):
            batch = next(loader)
    np.testing.assert_array_equal(batch.targets[:, :-1], batch.inputs[:, 1:])
    np.testing.assert_array_equal(batch.targets[:, -1], batch.inputs[:, -1] + 1)  # same shard, next position


def test_per_rank_stream_resumes_and_splits_over_hosts(shards):
    kwargs = dict(shard_switch="per_rank_inclusive", data_ranks=RANKS, cycle=True, prefetch=0)
    with data.BatchLoader(shards, BATCH, SEQ, **kwargs) as loader:
        whole = [next(loader) for _ in range(9)]
        position = None
    with data.BatchLoader(shards, BATCH, SEQ, **kwargs) as loader:
        for _ in range(5):
            next(loader)
        position = loader.position
    assert position.batches == 5
    with data.BatchLoader(shards, BATCH, SEQ, position=position, **kwargs) as resumed:
        for expected in whole[5:]:
            np.testing.assert_array_equal(next(resumed).inputs, expected.inputs)
    # Host 1 of 2 holds sequences 4..7 (record ranks 4..7) of every batch.
    with data.BatchLoader(shards, BATCH, SEQ, process_index=1, process_count=2, **kwargs) as host:
        for expected in whole:
            np.testing.assert_array_equal(next(host).inputs, expected.inputs[4:])


def test_batches_available_is_the_slowest_ranks_count(shards):
    files = data.list_shards(shards)
    available = data.batches_available(files, BATCH, rule="per_rank_inclusive", data_ranks=RANKS)
    assert available == 3 * 3  # ranks 6-7 read 3 batches per shard
    with data.BatchLoader(shards, BATCH, SEQ, shard_switch="per_rank_inclusive", data_ranks=RANKS, prefetch=0) as loader:
        for _ in range(available):
            next(loader)
        with pytest.raises(data.ShardsExhaustedError):
            next(loader)


def test_repeat_first_batch_serves_batch_zero_twice(shards):
    with data.BatchLoader(shards, BATCH, SEQ, repeat_first=True, prefetch=0) as loader:
        first = next(loader)
        assert loader.position == data.DataPosition()  # the stream has not moved yet
        second, third = next(loader), next(loader)
    with data.BatchLoader(shards, BATCH, SEQ, prefetch=0) as plain:
        expected = [next(plain) for _ in range(2)]
    np.testing.assert_array_equal(first.inputs, expected[0].inputs)
    np.testing.assert_array_equal(second.inputs, expected[0].inputs)
    np.testing.assert_array_equal(third.inputs, expected[1].inputs)


def test_record_ranks_smaller_than_a_sequence(shards):
    """Rank slices need not hold whole sequences: with 2 sequences of 512 tokens, each holds the
    slices of 4 record ranks, each read from that rank's own shard (the same oracle positions)."""
    count = 11
    expected = _oracle(LENGTHS, count, inclusive=True)
    with data.BatchLoader(shards, BATCH, 512, shard_switch="per_rank_inclusive", data_ranks=RANKS, cycle=True,
                          prefetch=0) as loader:
        for step in range(count):
            inputs = next(loader).inputs.reshape(RANKS, SEQ)
            assert [(int(t) // 10000, int(t) % 10000) for t in inputs[:, 0]] == expected[step]
