"""The `.bin` shard format (RECORD.md 8.1): round trips, the file's layout, bad shards named."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from jaxgpt import shards
from jaxgpt.shards import HEADER_BYTES, SHARD_MAGIC, read_shard, write_shard


def raw_shard(path: Path, header_values: list[int], body: bytes, header_bytes: int = HEADER_BYTES) -> Path:
    header = np.zeros(header_bytes // 4, dtype="<i4")
    header[: len(header_values)] = header_values
    path.write_bytes(header.tobytes() + body)
    return path


@pytest.mark.parametrize("length", [0, 1, 7, 1000])
def test_round_trip(tmp_path: Path, length: int) -> None:
    tokens = np.random.default_rng(length).integers(0, 2**16, size=length)
    path = tmp_path / "x.bin"
    write_shard(path, tokens)
    loaded = read_shard(path)
    assert loaded.dtype == np.uint16 and loaded.shape == (length,)
    np.testing.assert_array_equal(loaded, tokens)
    assert path.stat().st_size == HEADER_BYTES + 2 * length
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]  # no temp file left behind
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # an ordinary file, not a 0600 temp


def test_file_layout_is_the_records(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    write_shard(path, [50256, 1, 65535])
    raw = path.read_bytes()
    header = np.frombuffer(raw[:HEADER_BYTES], dtype="<i4")
    assert header[:3].tolist() == [20240520, 1, 3] and not header[3:].any()
    assert raw[HEADER_BYTES:] == np.array([50256, 1, 65535], dtype="<u2").tobytes()


def test_read_is_a_memmap_without_copy(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    write_shard(path, np.arange(100))
    loaded = read_shard(path)
    assert isinstance(loaded, np.memmap) and loaded.offset == HEADER_BYTES
    assert not loaded.flags.writeable


@pytest.mark.parametrize(
    "header, body, header_bytes, message",
    [
        ([123, 1, 4], b"\0" * 8, HEADER_BYTES, "magic number 123"),
        ([SHARD_MAGIC, 2, 4], b"\0" * 8, HEADER_BYTES, "version 2"),
        ([SHARD_MAGIC, 1, 4], b"\0" * 7, HEADER_BYTES, "truncated"),
        ([SHARD_MAGIC, 1, 4], b"\0" * 6, HEADER_BYTES, "truncated"),
        ([SHARD_MAGIC, 1, 4], b"\0" * 10, HEADER_BYTES, "longer than its header"),
        ([SHARD_MAGIC, 1, -1], b"", HEADER_BYTES, "negative"),
        ([SHARD_MAGIC, 1, 0], b"", 1020, "header is 1020 bytes"),
    ],
)
def test_bad_shards_raise_value_error_naming_the_file(
    tmp_path: Path, header: list[int], body: bytes, header_bytes: int, message: str
) -> None:
    path = raw_shard(tmp_path / "bad_shard.bin", header, body, header_bytes)
    with pytest.raises(ValueError, match=message) as info:
        read_shard(path)
    assert "bad_shard.bin" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere.bin"):
        read_shard(tmp_path / "nowhere.bin")


@pytest.mark.parametrize("tokens", [[0, 65536], [-1, 5], np.zeros((2, 2), np.int32), [0.5, 1.0]])
def test_write_rejects_bad_tokens(tmp_path: Path, tokens) -> None:
    with pytest.raises(ValueError, match="bad.bin"):
        write_shard(tmp_path / "bad.bin", tokens)
    assert not list(tmp_path.iterdir())


def test_failed_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk gone"):
        write_shard(tmp_path / "x.bin", [1, 2, 3])
    assert not list(tmp_path.iterdir())


def test_format_functions_do_not_need_torch() -> None:
    source = Path(shards.__file__).read_text()
    assert "import torch" not in source and "from torch" not in source
