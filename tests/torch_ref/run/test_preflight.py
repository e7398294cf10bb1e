"""torch_ref.run.preflight: everything refused before the first step (geometry, shards, token ids
against the model that will train, output paths, weights-only --resume files) and the note of a
run that saves nothing. Each case calls `torch_ref.train.main` as a user's command line would
(conftest.small_run) and asserts the exit code and a message naming the problem."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from torch_ref import loop
from torch_ref.data import write_shard

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--devices", "2"], "not divisible by devices"),  # 128 tokens a step over 2 ranks of seq_len 128
        (["--train-files", "nowhere/none_*.bin"], "no shard files match"),
        (["--steps", "1000"], "1000 steps need 1000"),  # the train shard holds 8 batches
        (["--val-tokens", str(128 * 64)], "--val-tokens 8192 needs 64"),  # the val shard holds 2
    ],
)
def test_bad_geometry_or_data_is_refused_with_a_clear_message(small_run, tmp_path, fails, extra, message):
    assert message in fails(small_run.args(tmp_path / "out", *extra))


def test_resume_from_a_weights_only_file_points_to_init_from(small_run, tmp_path, fails):
    err = fails(small_run.args(tmp_path / "out", "--resume", str(small_run.root / "init.pt")))
    assert "init.pt holds no 'config'" in err and "--init-from" in err


def test_a_run_without_checkpoints_says_so_at_start(small_run, tmp_path, fails, monkeypatch):
    def stop(*a, **k):
        raise ValueError("stopped after the start-up checks")

    monkeypatch.setattr(loop, "train", stop)
    err = fails(small_run.args(tmp_path / "out"))
    assert err.startswith("note: this run writes no checkpoint") and "stopped after" in err
    err = fails(small_run.args(tmp_path / "out", "--checkpoint-every", "2"))
    assert "writes no checkpoint" not in err and "stopped after" in err


@pytest.mark.parametrize("case", ["export folder", "export is a folder", "out-dir is a file"])
def test_output_paths_are_checked_before_the_first_step(small_run, tmp_path, fails, case):
    (tmp_path / "a_file").write_text("x")
    extra, expected = {
        "export folder": (["--export-torch", str(tmp_path / "a_file" / "m.pt")], "--export-torch folder"),
        "export is a folder": (["--export-torch", str(tmp_path)], "is a directory"),
        "out-dir is a file": (["--checkpoint-every", "2"], "--out-dir"),
    }[case]
    out = tmp_path / "a_file" if case == "out-dir is a file" else tmp_path / "out"
    err = fails(small_run.args(out, *extra))
    assert expected in err
    assert not list(tmp_path.rglob("*.txt"))  # no log: nothing ran


def test_steps_0_still_runs_the_start_up_checks(small_run, tmp_path, fails):
    bad = np.zeros(4 * small_run.seq_len, dtype=np.int64)
    bad[7] = small_run.vocab  # one past the model's vocabulary
    write_shard(tmp_path / "bad_train_000001.bin", bad)
    err = fails([*small_run.args(tmp_path / "out", "--steps", "0"), "--train-files", str(tmp_path / "bad_train_*.bin")])
    assert f"token id {small_run.vocab} is outside the model's vocabulary of {small_run.vocab}" in err


def test_token_check_uses_the_init_checkpoint_vocabulary(small_run, tmp_path, fails):
    """The preset's vocabulary is 50257; the --init-from model's is 1024: id 2000 must be refused."""
    tokens = np.random.default_rng(3).integers(0, small_run.vocab, 6 * small_run.seq_len)
    tokens[100] = 2000
    write_shard(tmp_path / "other_train_000001.bin", tokens)
    err = fails([*small_run.args(tmp_path / "out"), "--train-files", str(tmp_path / "other_train_*.bin")])
    assert "other_train_000001.bin: token id 2000 is outside the model's vocabulary of 1024" in err


@pytest.mark.parametrize("middle_length", [0, 128 + 1])
def test_a_short_shard_in_the_middle_fails_before_training(small_run, tmp_path, fails, middle_length):
    rng = np.random.default_rng(4)
    for index, length in enumerate((4 * small_run.seq_len, middle_length, 4 * small_run.seq_len), start=1):
        write_shard(tmp_path / f"m_train_{index:06d}.bin", rng.integers(0, small_run.vocab, length))
    err = fails([*small_run.args(tmp_path / "out"), "--train-files", str(tmp_path / "m_train_*.bin")])
    assert f"m_train_000002.bin: {middle_length} tokens cannot hold one batch of {small_run.seq_len}" in err
    assert not list(tmp_path.rglob("*.txt"))  # refused before the log (and the first step)


# A shard whose bytes changed since its folder's meta.json recorded them: the same check as
# jaxgpt's (runkit.preflight.check_shard_digests, one statement for both trainers), refused
# before the first step.


def sample_args(folder: Path, out: Path, *extra: str) -> list[str]:
    """The sample shards copied into `folder`, meta.json holding each shard's SHA-256 (as builds
    write it now); a smoke-preset run over them (the GPT-2 vocabulary: the ids pass)."""
    sample = Path(__file__).resolve().parents[3] / "data" / "sample"
    if not (sample / ".complete").is_file():
        pytest.skip("data/sample is not built (make sample)")
    if not folder.exists():
        shutil.copytree(sample, folder)
        meta = json.loads((folder / "meta.json").read_text())
        meta["shard_sha256"] = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in meta["shards"]}
        (folder / "meta.json").write_text(json.dumps(meta))
    return ["--preset", "smoke", "--device", "cpu", "--train-files", str(folder / "sample_train_*.bin"),
            "--val-files", str(folder / "sample_val_*.bin"), "--seq-len", "128", "--batch-tokens", "128",
            "--val-tokens", "128", "--steps", "2", "--out-dir", str(out), *extra]


def test_a_flipped_byte_in_a_train_shard_is_refused_before_training(tmp_path, fails, monkeypatch):
    def stop(*a, **k):
        raise ValueError("stopped after the start-up checks")

    monkeypatch.setattr(loop, "train", stop)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "sample"
    assert "stopped after" in fails(sample_args(folder, tmp_path / "out"))  # untouched: passes
    train = folder / "sample_train_000001.bin"
    before = train.stat()
    with open(train, "r+b") as file:  # one bit of a token, size and mtime kept
        file.seek(1024 + 2 * 5000)
        byte = file.read(1)
        file.seek(1024 + 2 * 5000)
        file.write(bytes([byte[0] ^ 0x10]))
    os.utime(train, ns=(before.st_atime_ns, before.st_mtime_ns))
    for extra in ([], ["--verify-shards"]):
        err = fails(sample_args(folder, tmp_path / "out", *extra))
        assert f"error: {train}: its bytes differ from the SHA-256 that {folder / 'meta.json'} records" in err
        assert "stopped after" not in err and len(err.strip().splitlines()) == 1
    (folder / "meta.json").unlink()  # shards made elsewhere: used as they are
    assert "stopped after" in fails(sample_args(folder, tmp_path / "out"))
