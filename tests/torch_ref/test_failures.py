"""torch_ref.train's run conventions and failure modes (docs/RELIABILITY.md).

Every case calls `main` in this process, as a user's command line would, and asserts the exit
code, a message naming the problem and what is left on disk. The model is the record's 12
layers at width 64 with a 1024-token vocabulary (a few hundred ms a step here, 8 MB a
checkpoint); all runs are fp32 on the CPU.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from torch_ref import checkpoint as ckpt
from torch_ref import cli, preflight
from torch_ref import train as train_lib
from torch_ref.data import write_shard
from torch_ref.model import GPT

VOCAB = 1024
SEQ_LEN = 128
VAL_LINE = re.compile(r"^step:(\d+)/(\d+) val_loss:(\d+\.\d{4})", re.M)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("torch_failures")
    rng = np.random.default_rng(0)
    write_shard(root / "t_train_000001.bin", rng.integers(0, VOCAB, 8 * SEQ_LEN + 2))
    write_shard(root / "t_val_000000.bin", rng.integers(0, VOCAB, 2 * SEQ_LEN + 2))
    torch.manual_seed(0)
    torch.save({"model": GPT(VOCAB, 12, 1, 64).state_dict()}, root / "init.pt")
    return root


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: two spinning threads on the shared 2-core machine are much slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def args(root: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--device", "cpu", "--dtype", "fp32", "--init-from", str(root / "init.pt"), "--head-dim", "64",
        "--train-files", str(root / "t_train_*.bin"), "--val-files", str(root / "t_val_*.bin"),
        "--seq-len", str(SEQ_LEN), "--batch-tokens", str(SEQ_LEN), "--val-tokens", str(SEQ_LEN),
        "--val-every", "100", "--window-max-tokens", "512", "--steps", "4", "--out-dir", str(out), *extra,
    ]


def failed(capsys, argv: list[str], code: int = 1) -> str:
    """main(argv) returns `code` with an `error: ...` line and no traceback; returns stderr."""
    assert train_lib.main(argv) == code
    err = capsys.readouterr().err
    assert "error: " in err and "Traceback" not in err, err
    return err


def interrupt_at_update(monkeypatch, update: int, signum: int = signal.SIGINT) -> None:
    """`signum` to this process during the forward/backward of update `update` (0-based): the
    handler only records it, so that step finishes and the loop stops at the top of the next."""
    real, calls = train_lib.forward_backward, []

    def forward_backward(*a, **k):
        if len(calls) == update:
            os.kill(os.getpid(), signum)
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(train_lib, "forward_backward", forward_backward)


def assert_same_state(a: dict, b: dict) -> None:
    """Bit-for-bit: model, optimizer and scheduler states, step and data position."""
    assert a["step"] == b["step"] and a["data_position"] == b["data_position"]
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    for opt_a, opt_b in zip(a["optimizers"], b["optimizers"], strict=True):
        assert opt_a["state"].keys() == opt_b["state"].keys()
        for index, state in opt_a["state"].items():
            for key, value in state.items():
                assert torch.equal(value, opt_b["state"][index][key]), (index, key)
        assert [g["lr"] for g in opt_a["param_groups"]] == [g["lr"] for g in opt_b["param_groups"]]
    assert a["schedulers"] == b["schedulers"]


# Resume: exact, after a signal, keeping the cadence ---------------------------------------------


@pytest.mark.slow
def test_interrupted_and_resumed_run_is_bit_exact(workspace, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    # The uninterrupted run: 4 updates, step files every 2, only the newest kept.
    assert train_lib.main(args(workspace, out, "--run-id", "a", "--checkpoint-every", "2", "--keep-checkpoints", "1",
                               "--save-checkpoint", str(tmp_path / "a.pt"))) == 0
    straight = capsys.readouterr().out
    assert sorted(p.name for p in (out / "checkpoints" / "a").iterdir()) == ["4.pt"]

    # The same run, sent SIGINT during update 2 (the third): that update finishes, the loop
    # stops at the top of step 3 holding 3 updates, and saves them.
    interrupt_at_update(monkeypatch, 2)
    assert train_lib.main(args(workspace, out, "--run-id", "b", "--checkpoint-every", "2")) == 130
    err = capsys.readouterr().err
    folder = out / "checkpoints" / "b"
    assert f"interrupted by SIGINT at step 3; the state after step 3 is in {folder} (continue with --resume {folder})" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in folder.iterdir()) == ["2.pt", "3.pt"]
    monkeypatch.undo()

    # Resumed without --checkpoint-every: the saved cadence (every 2) is kept, step 4 is saved.
    assert train_lib.main(args(workspace, out, "--run-id", "c", "--resume", str(folder),
                               "--save-checkpoint", str(tmp_path / "c.pt"))) == 0
    resumed = capsys.readouterr()
    assert "writes no checkpoint" not in resumed.err
    assert sorted(p.name for p in folder.iterdir()) == ["2.pt", "3.pt", "4.pt"]
    final = ckpt.read_checkpoint(tmp_path / "c.pt")
    assert_same_state(final, ckpt.read_checkpoint(tmp_path / "a.pt"))
    assert final["step"] == 4 and final["data_position"] == {"shard_index": 0, "pos": 4 * SEQ_LEN}
    # The final val line (fp32, same ops on the same state) is the same string.
    assert VAL_LINE.findall(resumed.out)[-1] == VAL_LINE.findall(straight)[-1]
    assert not [p for p in tmp_path.rglob("*") if ckpt.TMP_MARKER in p.name]


def test_sigterm_without_checkpointing_says_nothing_was_saved_and_exits_143(workspace, tmp_path, capsys, monkeypatch):
    interrupt_at_update(monkeypatch, 0, signal.SIGTERM)
    assert train_lib.main(args(workspace, tmp_path / "out", "--val-tokens", "0")) == 143
    err = capsys.readouterr().err
    assert "interrupted by SIGTERM at step 1; no checkpoint was written (checkpointing is off" in err
    assert "Traceback" not in err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are put back


def test_resume_refuses_a_config_change(workspace, tmp_path, capsys):
    state = GPT(VOCAB, 12, 1, 64).state_dict()
    preset, options = cli.parse_args(args(workspace, tmp_path / "out"))
    preset = preflight.run_preset(preset, options, state, None, None)
    saved = {"model": state, "step": 2, "optimizers": [], "schedulers": [],
             "data_position": {"shard_index": 0, "pos": 2 * SEQ_LEN}, "config": ckpt.config_dict(preset)}
    ckpt.write_atomically(saved, tmp_path / "2.pt")
    err = failed(capsys, args(workspace, tmp_path / "out", "--resume", str(tmp_path), "--steps", "5"))
    assert f"cannot resume from {tmp_path / '2.pt'}" in err and "train.steps: 4 -> 5" in err


def test_resume_from_a_weights_only_file_points_to_init_from(workspace, tmp_path, capsys):
    err = failed(capsys, args(workspace, tmp_path / "out", "--resume", str(workspace / "init.pt")))
    assert "init.pt holds no 'config'" in err and "--init-from" in err


def test_resume_from_a_non_torch_file_is_one_line(workspace, tmp_path, capsys):
    (tmp_path / "3.pt").write_text("not a checkpoint\n")
    err = failed(capsys, args(workspace, tmp_path / "out", "--resume", str(tmp_path)))
    assert f"--resume checkpoint {tmp_path / '3.pt'} is not a readable torch checkpoint" in err
    assert len(err.strip().splitlines()) == 1


def test_a_leftover_tmp_file_is_reported_and_never_read(workspace, tmp_path, capsys):
    (tmp_path / "2.pt").write_text("damaged\n")
    (tmp_path / f".5.pt{ckpt.TMP_MARKER}1234").write_text("half written")
    assert ckpt.resume_file(tmp_path) == tmp_path / "2.pt"
    err = failed(capsys, args(workspace, tmp_path / "out", "--resume", str(tmp_path)))
    assert "2.pt is not a readable torch checkpoint" in err  # the newest finished file, not the tmp one


def test_save_step_keeps_the_newest(tmp_path):
    for step in (2, 4, 6, 8):
        ckpt.save_step(tmp_path, step, {"model": {}, "step": step}, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["6.pt", "8.pt"]


# Start-up: a run that saves nothing says so; output paths checked before the first step --------


def test_a_run_without_checkpoints_says_so_at_start(workspace, tmp_path, capsys, monkeypatch):
    def stop(*a, **k):
        raise ValueError("stopped after the start-up checks")

    monkeypatch.setattr(train_lib, "train", stop)
    err = failed(capsys, args(workspace, tmp_path / "out"))
    assert err.startswith("note: this run writes no checkpoint") and "stopped after" in err
    err = failed(capsys, args(workspace, tmp_path / "out", "--checkpoint-every", "2"))
    assert "writes no checkpoint" not in err and "stopped after" in err


@pytest.mark.parametrize("case", ["save-checkpoint folder", "save-checkpoint is a folder", "out-dir is a file", "log-dir"])
def test_output_paths_are_checked_before_the_first_step(workspace, tmp_path, capsys, case):
    (tmp_path / "a_file").write_text("x")
    extra, expected = {
        "save-checkpoint folder": (["--save-checkpoint", str(tmp_path / "a_file" / "m.pt")], "--save-checkpoint folder"),
        "save-checkpoint is a folder": (["--save-checkpoint", str(tmp_path)], "is a directory"),
        "out-dir is a file": (["--checkpoint-every", "2"], "--out-dir"),
        "log-dir": (["--log-dir", str(tmp_path / "a_file" / "logs")], "--log-dir"),
    }[case]
    out = tmp_path / "a_file" if case == "out-dir is a file" else tmp_path / "out"
    err = failed(capsys, args(workspace, out, *extra))
    assert expected in err
    assert not list(tmp_path.rglob("*.txt"))  # no log: nothing ran


# --steps 0: start-up checks and the step-0 validation, then exit 0 ------------------------------


def test_steps_0_validates_and_exits(workspace, tmp_path, capsys):
    assert train_lib.main(args(workspace, tmp_path / "out", "--steps", "0", "--save-checkpoint", str(tmp_path / "init.pt"))) == 0
    captured = capsys.readouterr()
    step_lines = [line for line in captured.out.splitlines() if line.startswith("step:")]
    assert len(step_lines) == 1 and step_lines[0].startswith("step:0/0 val_loss:6.9315 ")  # zero head: ln(1024)
    assert "writes no checkpoint" not in captured.err
    assert ckpt.read_checkpoint(tmp_path / "init.pt")["step"] == 0


def test_steps_0_still_runs_the_start_up_checks(workspace, tmp_path, capsys):
    bad = np.zeros(4 * SEQ_LEN, dtype=np.int64)
    bad[7] = VOCAB  # one past the model's vocabulary
    write_shard(tmp_path / "bad_train_000001.bin", bad)
    err = failed(capsys, [*args(workspace, tmp_path / "out", "--steps", "0"), "--train-files",
                          str(tmp_path / "bad_train_*.bin")])
    assert f"token id {VOCAB} is outside the model's vocabulary of {VOCAB}" in err


# The vocabulary check uses the model that will be trained (--init-from may change it) ---------


def test_token_check_uses_the_init_checkpoint_vocabulary(workspace, tmp_path, capsys):
    """The preset's vocabulary is 50257; the --init-from model's is 1024: id 2000 must be refused."""
    tokens = np.random.default_rng(3).integers(0, VOCAB, 6 * SEQ_LEN)
    tokens[100] = 2000
    write_shard(tmp_path / "other_train_000001.bin", tokens)
    err = failed(capsys, [*args(workspace, tmp_path / "out"), "--train-files", str(tmp_path / "other_train_*.bin")])
    assert "other_train_000001.bin: token id 2000 is outside the model's vocabulary of 1024" in err


# Every shard is checked up front -------------------------------------------------------------


@pytest.mark.parametrize("middle_length", [0, SEQ_LEN + 1])
def test_a_short_shard_in_the_middle_fails_before_training(workspace, tmp_path, capsys, middle_length):
    rng = np.random.default_rng(4)
    for index, length in enumerate((4 * SEQ_LEN, middle_length, 4 * SEQ_LEN), start=1):
        write_shard(tmp_path / f"m_train_{index:06d}.bin", rng.integers(0, VOCAB, length))
    err = failed(capsys, [*args(workspace, tmp_path / "out"), "--train-files", str(tmp_path / "m_train_*.bin")])
    assert f"m_train_000002.bin: {middle_length} tokens cannot hold one batch of {SEQ_LEN}" in err
    assert not list(tmp_path.rglob("*.txt"))  # refused before the log (and the first step)


def test_a_non_torch_init_file_is_one_line(workspace, tmp_path, capsys):
    (tmp_path / "notes.pt").write_text("not a checkpoint\n")
    argv = args(workspace, tmp_path / "out")
    argv[argv.index("--init-from") + 1] = str(tmp_path / "notes.pt")
    err = failed(capsys, argv)
    assert f"--init-from checkpoint {tmp_path / 'notes.pt'} is not a readable torch checkpoint" in err
    assert len(err.strip().splitlines()) == 1
