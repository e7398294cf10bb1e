"""jaxgpt.run.preflight, as a user meets it through `python -m jaxgpt.train`: bad input (data, geometry,
checkpoints to start from or resume) ends with `error: ...` and exit status 1, no traceback.

Every case here fails before a step is compiled, so the whole file takes seconds. (Flag values
argparse refuses: tests/run/test_cli.py.)
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxgpt import data
from jaxgpt import step as step_lib
from jaxgpt import train as train_lib
from jaxgpt.config_json import config_to_json
from jaxgpt.run import checkpoint, preflight
from jaxgpt.run.cli import PROG
from runkit import preflight as runkit_preflight


@pytest.fixture
def shards(tmp_path: Path) -> tuple[str, str]:
    tokens = np.arange(5000) % 50000
    data.write_shard(tmp_path / "t_train_000001.bin", tokens)
    data.write_shard(tmp_path / "t_val_000000.bin", tokens)
    return str(tmp_path / "t_train_*.bin"), str(tmp_path / "t_val_*.bin")


def run_main(capsys, args: list[str], code: int = 1) -> str:
    """main(args) must return `code` and print one clear error; returns that message."""
    assert train_lib.main(args) == code
    err = capsys.readouterr().err
    err = "".join(line for line in err.splitlines(keepends=True) if not line.startswith("note: "))
    assert err.startswith(f"{PROG}: error: "), err
    assert "Traceback" not in err
    return err


def base_args(shards: tuple[str, str], tmp_path: Path) -> list[str]:
    train_files, val_files = shards
    return [
        "--preset", "tiny", "--train-files", train_files, "--val-files", val_files, "--steps", "2",
        "--seq-len", "256", "--batch-tokens", "2048", "--val-tokens", "2048", "--devices", "8",
        "--out-dir", str(tmp_path / "out"), "--no-progress",
    ]


def test_no_shards_match_the_glob(capsys, tmp_path, shards):
    args = base_args(shards, tmp_path) + ["--train-files", str(tmp_path / "nothing_*.bin")]
    assert "no shard files match" in run_main(capsys, args)


def test_no_val_shards_match_the_glob(capsys, tmp_path, shards):
    args = base_args(shards, tmp_path) + ["--val-files", str(tmp_path / "missing_val_*.bin")]
    assert "missing_val_" in run_main(capsys, args)


def test_seq_len_not_a_multiple_of_128(capsys, tmp_path, shards):
    message = run_main(capsys, base_args(shards, tmp_path) + ["--seq-len", "200"], code=2)
    assert "seq_len" in message and "multiple of 128" in message


def test_batch_not_divisible_over_the_devices(capsys, tmp_path, shards):
    # 3 sequences of 256 tokens cannot be split over 8 devices.
    message = run_main(capsys, base_args(shards, tmp_path) + ["--batch-tokens", "768", "--val-tokens", "768"])
    assert "cannot be split over 8 devices" in message and "seq_len * devices = 2048" in message


def test_batch_not_a_multiple_of_seq_len(capsys, tmp_path, shards):
    assert "batch_tokens" in run_main(capsys, base_args(shards, tmp_path) + ["--batch-tokens", "1000"], code=2)


def test_val_tokens_not_whole_batches(capsys, tmp_path, shards):
    assert "val_tokens 3000" in run_main(capsys, base_args(shards, tmp_path) + ["--val-tokens", "3000"])


def test_too_many_devices(capsys, tmp_path, shards):
    message = run_main(capsys, base_args(shards, tmp_path) + ["--devices", str(jax.device_count() + 1)])
    assert "device(s) are visible" in message


def test_shards_exhausted(capsys, tmp_path, shards):
    # 5000 tokens hold (5000 - 2048 - 2) // 2048 + 1 = 2 batches of 2048.
    message = run_main(capsys, base_args(shards, tmp_path) + ["--steps", "3"])
    assert "training data exhausted" in message and "hold 2" in message and "--cycle-data" in message


def test_shards_exhausted_during_the_run_is_reported_too(capsys, monkeypatch, tmp_path, shards):
    # Data that disappears after the up-front check: the loader's own error reaches main.
    def exhausted(*args, **kwargs):
        raise data.ShardsExhaustedError(data.exhausted_message("t_train_*.bin", 1))

    monkeypatch.setattr(preflight, "check_run", lambda *args, **kwargs: None)
    monkeypatch.setattr(step_lib, "build_model", exhausted)
    assert "ran out of data" in run_main(capsys, base_args(shards, tmp_path))


def test_missing_init_checkpoint(capsys, tmp_path, shards):
    message = run_main(capsys, base_args(shards, tmp_path) + ["--init-from", str(tmp_path / "nope.pt")])
    assert "--init-from checkpoint not found" in message


def test_missing_resume_directory(capsys, tmp_path, shards):
    message = run_main(capsys, base_args(shards, tmp_path) + ["--resume", str(tmp_path / "no_such_dir")])
    assert "--resume directory not found" in message


def test_resume_directory_without_checkpoints(capsys, tmp_path, shards):
    (tmp_path / "empty").mkdir()
    message = run_main(capsys, base_args(shards, tmp_path) + ["--resume", str(tmp_path / "empty")])
    assert "no checkpoint found" in message


def test_resume_from_a_run_with_a_different_config(capsys, tmp_path, shards):
    args = base_args(shards, tmp_path)
    saved_preset, _ = train_lib.parse_args(args + ["--steps", "5", "--muon-lr", "0.07"])
    directory = tmp_path / "ckpt"
    manager = checkpoint.Checkpointer(directory)
    state = {"params": {"skip_weights": jax.numpy.ones((6,))}, "opt_state": {}}
    manager.save(1, state, data_position={"shard_index": 0, "pos": 2048}, config=config_to_json(saved_preset))
    manager.close()
    message = run_main(capsys, args + ["--resume", str(directory)])
    assert "different config" in message
    assert "train.steps: 5 -> 2" in message and "optim.muon_lr: 0.07 -> 0.05" in message


# A shard whose bytes changed since its folder's meta.json recorded them (runkit.preflight.
# check_shard_digests, its cases: tests/runkit/test_preflight.py), through the command line.


def sample_copy(folder: Path) -> tuple[str, str]:
    """The sample shards with meta.json (each shard's SHA-256 in it, as builds write it now)."""
    sample = Path(__file__).resolve().parents[2] / "data" / "sample"
    if not (sample / ".complete").is_file():
        pytest.skip("data/sample is not built (make sample)")
    shutil.copytree(sample, folder)
    meta = json.loads((folder / "meta.json").read_text())
    meta["shard_sha256"] = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in meta["shards"]}
    (folder / "meta.json").write_text(json.dumps(meta))
    return str(folder / "sample_train_*.bin"), str(folder / "sample_val_*.bin")


@pytest.fixture
def stop_before_the_model(monkeypatch, tmp_path):
    """The start-up checks run, then the run stops before any model or compile (its own error)."""
    def stop(*args, **kwargs):
        raise ValueError("stopped after the start-up checks")

    monkeypatch.setattr(step_lib, "build_model", stop)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where the digests are remembered


def test_a_flipped_byte_in_a_train_shard_is_refused_before_compiling(capsys, tmp_path, stop_before_the_model):
    shards = sample_copy(tmp_path / "sample")
    assert "stopped after the start-up checks" in run_main(capsys, base_args(shards, tmp_path))  # untouched: passes
    train = tmp_path / "sample" / "sample_train_000001.bin"
    with open(train, "r+b") as file:
        file.seek(1024 + 2 * 5000)
        byte = file.read(1)
        file.seek(1024 + 2 * 5000)
        file.write(bytes([byte[0] ^ 0x10]))
    err = run_main(capsys, base_args(shards, tmp_path))
    assert f"error: {train}: its bytes differ from the SHA-256 that {tmp_path / 'sample' / 'meta.json'} records" in err
    assert "--force" in err and len(err.strip().splitlines()) == 1


def test_verify_shards_hashes_again_and_a_folder_without_meta_json_passes(capsys, tmp_path, stop_before_the_model,
                                                                         monkeypatch):
    shards = sample_copy(tmp_path / "sample")
    run_main(capsys, base_args(shards, tmp_path))
    hashed, real = [], runkit_preflight.sha256_file
    monkeypatch.setattr(runkit_preflight, "sha256_file", lambda path: hashed.append(path.name) or "0" * 64)
    run_main(capsys, base_args(shards, tmp_path))  # remembered: nothing hashed
    assert hashed == []
    err = run_main(capsys, [*base_args(shards, tmp_path), "--verify-shards"])
    assert hashed == ["sample_train_000001.bin"] and "its bytes differ" in err  # hashed again (here: a fake digest)
    (tmp_path / "sample" / "meta.json").unlink()
    (tmp_path / "sample" / ".complete").unlink()
    monkeypatch.setattr(runkit_preflight, "sha256_file", real)
    assert train_lib.main([*base_args(shards, tmp_path), "--verify-shards"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"note: {tmp_path / 'sample'} has no .complete marker") and "stopped after the start-up" in err


def test_init_from_is_read_and_checked_once_and_its_state_handed_to_the_model(capsys, monkeypatch, tmp_path, shards):
    """The run's preflight reads the --init-from file and infers its dims (convert.read_model)
    once; step.build_model takes that state as it is, and the model holds its values."""
    import torch  # noqa: PLC0415 - a record-format checkpoint, as the record's code writes one

    from jaxgpt.run import convert  # noqa: PLC0415
    from torch_ref.model import GPT  # noqa: PLC0415

    torch.manual_seed(0)
    state = GPT(8192, 12, 1, 64).state_dict()  # its vocabulary holds the shards' ids (below 5000)
    torch.save({"model": state}, tmp_path / "init.pt")
    reads, built = [], []
    real_read, real_build = convert.read_model, step_lib.build_model

    def read_model(*args, **kwargs):
        reads.append(args[0])
        return real_read(*args, **kwargs)

    def build_model(*args, **kwargs):
        built.append(real_build(*args, **kwargs))
        raise ValueError("stopped once the model was built")

    monkeypatch.setattr(convert, "read_model", read_model)
    monkeypatch.setattr(step_lib, "build_model", build_model)
    message = run_main(capsys, base_args(shards, tmp_path) + ["--init-from", str(tmp_path / "init.pt"), "--head-dim", "64",
                                                          "--eot-id", "0"])
    assert "stopped once the model was built" in message
    assert reads == [str(tmp_path / "init.pt")]
    preset, _, params = built[0]
    assert (preset.model.vocab_size, preset.model.model_dim, preset.model.num_layers) == (8192, 64, 12)
    # The checkpoint's values in the policy's dtype (bf16 embeddings: one rounding, as torch's).
    np.testing.assert_array_equal(np.asarray(params["embed.weight"], np.float32),
                                  state["embed.weight"].to(torch.bfloat16).float().numpy())
