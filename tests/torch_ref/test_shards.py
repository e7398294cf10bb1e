"""torch_ref.shards: the `.bin` shard format's reader and writer name the file and the problem."""

from __future__ import annotations

import numpy as np
import pytest

from torch_ref.shards import read_shard_header, write_shard


def test_read_shard_header_names_the_file_and_the_problem(tmp_path):
    good = tmp_path / "good.bin"
    write_shard(good, np.arange(10))
    assert read_shard_header(good) == 10
    bad_magic = tmp_path / "magic.bin"
    bad_magic.write_bytes(b"\x01" * 1024 + good.read_bytes()[1024:])
    with pytest.raises(ValueError, match="magic.bin: magic number"):
        read_shard_header(bad_magic)
    truncated = tmp_path / "short.bin"
    truncated.write_bytes(good.read_bytes()[:-2])
    with pytest.raises(ValueError, match="short.bin: header claims 10 tokens but 18 body bytes"):
        read_shard_header(truncated)
    with pytest.raises(ValueError, match="1-D integer"):
        write_shard(tmp_path / "f.bin", np.ones(3, dtype=np.float32))
