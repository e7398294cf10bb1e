"""runkit.preflight: an output folder is made and proven writable before the first step (each
trainer's refusals of its own places: tests/run/test_preflight.py, tests/torch_ref/run/test_preflight.py,
tests/test_failures.py), and the shards a run reads checked against their folder's meta.json."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from runkit import preflight
from runkit.preflight import check_writable


def test_a_missing_folder_is_made_and_no_probe_is_left(tmp_path):
    folder = tmp_path / "a" / "b"
    check_writable(folder, "--out-dir")
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_a_file_where_the_folder_should_be_is_refused_naming_the_flag(tmp_path):
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ValueError, match=rf"^--tensorboard {tmp_path / 'a_file'} is not writable: "):
        check_writable(tmp_path / "a_file", "--tensorboard")


# The shards against meta.json's digests (runkit.preflight.check_shard_digests); each trainer's
# refusal through its command line: tests/run/test_preflight.py, tests/torch_ref/run/test_preflight.py.

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


def sample_copy(folder: Path, *, per_shard: bool = True) -> list[Path]:
    """The sample shards, meta.json and .complete copied into `folder`; meta.json with each
    shard's SHA-256 (as jaxgpt.corpus.build.shard_meta writes it now) unless `per_shard` is
    False (then its one SHA-256 over all shards only, as older builds wrote it). Returns the
    shards, val first."""
    if not (SAMPLE / ".complete").is_file():
        pytest.skip("data/sample is not built (make sample)")
    folder.mkdir()
    meta = json.loads((SAMPLE / "meta.json").read_text())
    for name in meta["shards"]:
        shutil.copy(SAMPLE / name, folder / name)
    meta.pop("shard_sha256", None)
    if per_shard:
        meta["shard_sha256"] = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in meta["shards"]}
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / ".complete").write_text("")
    return [folder / name for name in meta["shards"]]


def flip_a_body_byte(shard: Path, *, keep_times: bool = False) -> None:
    """One bit of one token of the body flipped in place: size unchanged; with `keep_times`
    the mtime put back as it was (os.utime), so only the ctime tells."""
    before = shard.stat()
    with open(shard, "r+b") as file:
        file.seek(1024 + 2 * 1000)
        byte = file.read(1)
        file.seek(1024 + 2 * 1000)
        file.write(bytes([byte[0] ^ 1]))
    if keep_times:
        os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert shard.stat().st_mtime_ns == before.st_mtime_ns and shard.stat().st_size == before.st_size


@pytest.mark.parametrize("per_shard", [True, False])
def test_an_untouched_copy_passes_and_is_hashed_once(tmp_path, monkeypatch, per_shard):
    shards = sample_copy(tmp_path / "sample", per_shard=per_shard)
    cache = tmp_path / "cache.json"
    assert preflight.check_shard_digests(shards, cache_file=cache) == []
    assert cache.is_file()
    monkeypatch.setattr(preflight, "sha256_file", lambda path: pytest.fail(f"{path} hashed again"))
    monkeypatch.setattr(preflight.hashlib, "sha256", lambda: pytest.fail("hashed again"))
    assert preflight.check_shard_digests(shards, cache_file=cache) == []  # identities unchanged: nothing read


def test_a_flipped_byte_in_a_train_shard_is_refused_naming_it(tmp_path):
    val, train = sample_copy(tmp_path / "sample")
    cache = tmp_path / "cache.json"
    preflight.check_shard_digests([val, train], cache_file=cache)  # hashed and remembered untouched
    flip_a_body_byte(train)
    with pytest.raises(preflight.ShardDigestError) as refused:
        preflight.check_shard_digests([train, val], cache_file=cache)
    message = str(refused.value)
    assert message.startswith(f"{train}: its bytes differ from the SHA-256 that {train.parent / 'meta.json'} records")
    assert "python scripts/build_sample_data.py --force" in message and "download it again" in message
    assert "\n" not in message


def test_an_older_meta_json_refuses_a_flipped_byte_naming_the_folder(tmp_path):
    _, train = sample_copy(tmp_path / "sample", per_shard=False)
    flip_a_body_byte(train)
    with pytest.raises(preflight.ShardDigestError, match=rf"^{tmp_path / 'sample'}: its shards' bytes differ"):
        preflight.check_shard_digests([train], cache_file=tmp_path / "cache.json")


def test_an_in_place_change_that_keeps_size_and_mtime_is_caught(tmp_path):
    """--verify-shards (full) hashes regardless; the default is not fooled either: os.utime
    puts the mtime back but moves the ctime, which the remembered identity holds."""
    val, train = sample_copy(tmp_path / "sample")
    cache = tmp_path / "cache.json"
    preflight.check_shard_digests([train, val], cache_file=cache)
    flip_a_body_byte(train, keep_times=True)
    with pytest.raises(preflight.ShardDigestError, match=str(train)):
        preflight.check_shard_digests([train], full=True, cache_file=cache)
    with pytest.raises(preflight.ShardDigestError, match=str(train)):
        preflight.check_shard_digests([train], cache_file=cache)


def test_a_folder_without_meta_json_is_used_as_it_is(tmp_path):
    shards = sample_copy(tmp_path / "sample")
    flip_a_body_byte(shards[1])
    (tmp_path / "sample" / "meta.json").unlink()
    assert preflight.check_shard_digests(shards, cache_file=tmp_path / "cache.json") == []


def test_what_cannot_be_checked_or_remembered_is_a_note(tmp_path):
    val, train = sample_copy(tmp_path / "sample")
    extra = tmp_path / "sample" / "sample_train_000002.bin"
    shutil.copy(train, extra)
    (tmp_path / "a_file").write_text("x")
    notes = preflight.check_shard_digests([val, train, extra], cache_file=tmp_path / "a_file" / "cache.json")
    assert notes[0] == f"note: {extra} is not among the shards {tmp_path / 'sample' / 'meta.json'} records; not checked"
    assert notes[1].startswith(f"note: cannot remember the shards' digests in {tmp_path / 'a_file' / 'cache.json'}")
    assert len(notes) == 2
