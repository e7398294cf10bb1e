"""The JAX batch stream (RECORD.md 8.3) on tiny hand-checkable shards; the shard format is test_shards.py."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from jaxgpt import data
from jaxgpt.data import BatchLoader, DataPosition, ShardsExhaustedError, val_batches
from jaxgpt.shards import HEADER_BYTES, NoShardsError, write_shard


def write_counting_shards(folder: Path, lengths: list[int], prefix: str = "t") -> str:
    """Shard k holds k*1000 + arange(n), so every token tells which shard and offset it came from."""
    for k, length in enumerate(lengths):
        write_shard(folder / f"{prefix}_{k:06d}.bin", k * 1000 + np.arange(length))
    return str(folder / f"{prefix}_*.bin")


def raw_shard(path: Path, header_values: list[int], body: bytes) -> Path:
    """A shard file of the given header values and body bytes (a corrupt one, for the loader's errors)."""
    header = np.zeros(HEADER_BYTES // 4, dtype="<i4")
    header[: len(header_values)] = header_values
    path.write_bytes(header.tobytes() + body)
    return path


# ---------------------------------------------------------------------------- JAX loader

# Shards of 600, 513 and 600 tokens, global batch 256 = 2 sequences of 128. Shard 0 serves
# pos 0 and 256 (512 + 257 >= 600); shard 1 only pos 0 (256 + 257 = 513 >= 513).
HAND_BATCH_STARTS = [(0, 0), (0, 256), (1, 0), (2, 0), (2, 256)]


def expected_sequence(shard: int, start: int) -> np.ndarray:
    return shard * 1000 + start + np.arange(129)


def test_loader_hand_computed(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [600, 513, 600])
    with BatchLoader(pattern, 256, 128) as loader:
        for served, (shard, pos) in enumerate(HAND_BATCH_STARTS, start=1):
            inputs, targets = next(loader)
            assert inputs.dtype == np.int32 and targets.dtype == np.int32
            assert inputs.shape == targets.shape == (2, 128)
            for i in range(2):
                sequence = expected_sequence(shard, pos + 128 * i)
                np.testing.assert_array_equal(inputs[i], sequence[:-1])
                np.testing.assert_array_equal(targets[i], sequence[1:])
            assert loader.position == DataPosition(shard, pos + 256, served)
        with pytest.raises(ShardsExhaustedError, match=r"all 3 shard\(s\)"):
            next(loader)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_host_slices_equal_global_split(tmp_path: Path, prefetch: int) -> None:
    pattern = write_counting_shards(tmp_path, [1100, 700, 1100])
    kwargs = dict(batch_tokens=512, seq_len=128, prefetch=prefetch)
    with BatchLoader(pattern, **kwargs) as whole:
        hosts = [BatchLoader(pattern, process_index=p, process_count=2, **kwargs) for p in range(2)]
        for _ in range(4):
            global_inputs, global_targets = next(whole)
            local = [next(host) for host in hosts]
            assert local[0].inputs.shape == (2, 128)
            np.testing.assert_array_equal(np.concatenate([b.inputs for b in local]), global_inputs)
            np.testing.assert_array_equal(np.concatenate([b.targets for b in local]), global_targets)
        for host in hosts:
            host.close()


def test_resume_from_position_continues_the_stream(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [600, 513, 600])
    with BatchLoader(pattern, 256, 128) as loader:
        stream = [next(loader).inputs for _ in range(5)]
        with BatchLoader(pattern, 256, 128, prefetch=0) as first_two:
            next(first_two), next(first_two)
            saved = DataPosition.from_dict(first_two.position.to_dict())
    assert saved == DataPosition(0, 512, 2)  # advance happens at the next batch, not before
    with BatchLoader(pattern, 256, 128, position=saved) as resumed:
        for expected in stream[2:]:
            np.testing.assert_array_equal(next(resumed).inputs, expected)


def test_loader_cycle(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [600, 513])
    with BatchLoader(pattern, 256, 128, cycle=True) as loader:
        firsts = [int(next(loader).inputs[0, 0]) for _ in range(6)]
    assert firsts == [0, 256, 1000, 0, 256, 1000]


def test_prefetch_thread_reraises_errors_and_stops(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [600, 600])
    raw_shard(tmp_path / "t_000001.bin", [999, 1, 600], b"\0" * 1200)  # corrupt the second shard
    loader = BatchLoader(pattern, 256, 128, prefetch=1)
    next(loader), next(loader)
    with pytest.raises(ValueError, match="t_000001.bin: magic number 999"):
        next(loader)
    with pytest.raises(ValueError, match="magic number 999"):  # stays failed
        next(loader)
    thread = loader._batches._thread  # the prefetch thread (jaxgpt.prefetch.Prefetcher)
    assert thread is not None and not thread.is_alive()


def test_close_stops_a_blocked_thread(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [5000])
    before = threading.active_count()
    loader = BatchLoader(pattern, 256, 128, prefetch=1)
    next(loader)  # the thread now waits on a full queue
    loader.close()
    assert threading.active_count() == before
    with pytest.raises(StopIteration):
        next(loader)


@pytest.mark.parametrize(
    "batch_tokens, seq_len, process_count, message",
    [
        (1000, 100, 1, "seq_len must be a positive multiple of 128"),
        (384, 256, 1, "multiple of seq_len \\* process_count"),
        (384, 128, 2, "= 128 \\* 2 = 256"),
    ],
)
def test_loader_rejects_bad_geometry(tmp_path: Path, batch_tokens, seq_len, process_count, message) -> None:
    pattern = write_counting_shards(tmp_path, [600])
    with pytest.raises(ValueError, match=message):
        BatchLoader(pattern, batch_tokens, seq_len, process_count=process_count)


def test_loader_no_files_message_shows_glob_and_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NoShardsError, match=f"'missing/x_\\*.bin' \\(relative to cwd {tmp_path}\\)"):
        BatchLoader("missing/x_*.bin", 256, 128)


def test_relative_glob_is_resolved_from_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shards").mkdir()
    write_counting_shards(tmp_path / "shards", [600])
    monkeypatch.chdir(tmp_path)
    with BatchLoader("shards/t_*.bin", 256, 128) as loader:
        assert int(next(loader).inputs[1, 0]) == 128


def test_val_batches_cover_the_first_val_tokens(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [2000])
    for _ in range(2):  # a fresh stream at every evaluation
        batches = list(val_batches(pattern, 1024, 512, 128))
        assert len(batches) == 2
        inputs = np.concatenate([b.inputs for b in batches]).reshape(-1)
        np.testing.assert_array_equal(inputs, np.arange(1024))
    hosts = [list(val_batches(pattern, 1024, 512, 128, process_index=p, process_count=2)) for p in range(2)]
    np.testing.assert_array_equal(hosts[1][0].inputs.reshape(-1), np.arange(256, 512))


def test_val_batches_reject_partial_batches(tmp_path: Path) -> None:
    pattern = write_counting_shards(tmp_path, [2000])
    with pytest.raises(ValueError, match="val_tokens 1000 must be a non-negative multiple of batch_tokens 512"):
        val_batches(pattern, 1000, 512, 128)


def test_data_position_validation() -> None:
    with pytest.raises(ValueError, match="DataPosition"):
        DataPosition(-1, 0)


def test_to_global_arrays_shards_rows_over_devices(tmp_path: Path) -> None:
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    pattern = write_counting_shards(tmp_path, [3000])
    devices = np.array(jax.devices()[:8])
    sharding = NamedSharding(Mesh(devices, ("data",)), PartitionSpec("data"))
    with BatchLoader(pattern, 128 * len(devices), 128) as loader:
        batch = next(loader)
    inputs, targets = data.to_global_arrays(batch, sharding)
    assert inputs.shape == (len(devices), 128) and inputs.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(targets), batch.targets)
    for shard in inputs.addressable_shards:  # device d holds sequence d
        np.testing.assert_array_equal(np.asarray(shard.data), batch.inputs[shard.index])
