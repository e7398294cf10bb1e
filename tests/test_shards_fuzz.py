"""Fuzzed: the `.bin` shard reader (jaxgpt.shards.read_shard_header, read_shard) on inputs made
from valid shards (tests.fuzzing.damaged) and on valid-looking headers with absurd token counts.

Property, against an independent statement of the format: a file that is a well-formed shard
reads as exactly its tokens; any other is refused with ValueError naming the file; nothing else
is raised, no example hangs or allocates more than the file holds (a header claiming 2^31 - 1
tokens over a short body is refused before any mapping).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxgpt import shards
from tests import fuzzing

pytestmark = pytest.mark.fuzz
MAGIC, VERSION, HEADER_BYTES = 20240520, 1, 1024


def shard_bytes(tokens: list[int], *, count: int | None = None, magic: int = MAGIC, version: int = VERSION) -> bytes:
    header = np.zeros(256, dtype="<i4")
    header[:3] = (magic, version, len(tokens) if count is None else count)
    return header.tobytes() + np.asarray(tokens, dtype="<u2").tobytes()


def expected_tokens(raw: bytes) -> np.ndarray | None:
    """The tokens of `raw` when it is a well-formed shard (the format of docs/DATA.md), else None."""
    if len(raw) < HEADER_BYTES:
        return None
    magic, version, count = (int(v) for v in np.frombuffer(raw[:12], dtype="<i4"))
    if magic != MAGIC or version != VERSION or count < 0 or len(raw) - HEADER_BYTES != 2 * count:
        return None
    return np.frombuffer(raw[HEADER_BYTES:], dtype="<u2")


VALID = st.lists(st.integers(0, 2**16 - 1), max_size=64).map(shard_bytes)
ABSURD_COUNTS = st.sampled_from([-1, -(2**31), 2**31 - 1, 2**30, 2**16, 1]) | st.integers(-(2**31), 2**31 - 1)
ABSURD = st.builds(lambda tokens, count: shard_bytes(tokens, count=count),
                   st.lists(st.integers(0, 2**16 - 1), max_size=64), ABSURD_COUNTS)
INPUTS = st.one_of(VALID, VALID.flatmap(fuzzing.damaged), ABSURD, ABSURD.flatmap(fuzzing.damaged))


def check_reader(read, path, raw: bytes) -> None:
    """`read(path)` of the file holding `raw` keeps the property (module docstring)."""
    path.write_bytes(raw)
    expected = expected_tokens(raw)
    with fuzzing.guarded():
        try:
            result = read(path)
        except ValueError as error:
            assert expected is None, f"a well-formed shard was refused: {error}"
            assert fuzzing.names_file(error, path) and "\n" not in str(error), error
            return
    assert expected is not None, "a malformed shard was read"
    if isinstance(result, int):
        assert result == len(expected)
    else:
        np.testing.assert_array_equal(np.asarray(result), expected)


@settings(max_examples=fuzzing.examples(150))
@given(raw=INPUTS)
def test_read_shard_header_on_damaged_and_absurd_shards(tmp_path, raw):
    check_reader(shards.read_shard_header, tmp_path / "x_train_000001.bin", raw)


@settings(max_examples=fuzzing.examples(150))
@given(raw=INPUTS)
def test_read_shard_on_damaged_and_absurd_shards(tmp_path, raw):
    check_reader(shards.read_shard, tmp_path / "x_train_000001.bin", raw)


def test_a_valid_header_over_a_sparse_body_of_2_pow_31_tokens_is_mapped_not_read(tmp_path):
    """The largest count the header holds, over a (sparse) body that matches it: a memory map,
    no copy (the reader's only large input that is valid)."""
    path = tmp_path / "huge.bin"
    count = 2**31 - 1
    with path.open("wb") as f:
        f.write(shard_bytes([], count=count))
        f.truncate(HEADER_BYTES + 2 * count)
    with fuzzing.guarded(max_growth_mib=64):
        tokens = shards.read_shard(path)
        assert tokens.shape == (count,) and isinstance(tokens, np.memmap)
