"""Fixtures of the torch_ref tests that call `torch_ref.train.main` as a user's command line would.

`small_run`: the smoke preset's model (4 layers, 64 wide, one head) with a 1024-token vocabulary
(an `init.pt` for --init-from), a train shard of 8 sequences and a val shard of 2, and the
argument list of a 4-step fp32 CPU run on them.
Session-scoped: built once per test process, only read by the tests (outputs go to tmp_path).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from torch_ref import config as torch_config
from torch_ref import loop
from torch_ref import presets as torch_presets
from torch_ref import train as train_lib
from torch_ref.data import write_shard
from torch_ref.model import GPT


@dataclass(frozen=True)
class SmallRun:
    root: Path  # init.pt, t_train_000001.bin, t_val_000000.bin
    vocab: int = 1024
    seq_len: int = 128

    def args(self, out: Path, *extra: str) -> list[str]:
        """A 4-step fp32 run of one sequence per step from init.pt, writing under `out`."""
        return [
            "--preset", "smoke", "--device", "cpu", "--dtype", "fp32", "--init-from", str(self.root / "init.pt"),
            "--head-dim", "64",
            "--train-files", str(self.root / "t_train_*.bin"), "--val-files", str(self.root / "t_val_*.bin"),
            "--seq-len", str(self.seq_len), "--batch-tokens", str(self.seq_len), "--val-tokens", str(self.seq_len),
            "--val-every", "100", "--window-max-tokens", "512", "--steps", "4", "--out-dir", str(out), *extra,
        ]


@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> SmallRun:
    run = SmallRun(tmp_path_factory.mktemp("torch_small_run"))
    rng = np.random.default_rng(0)
    write_shard(run.root / "t_train_000001.bin", rng.integers(0, run.vocab, 8 * run.seq_len + 2))
    write_shard(run.root / "t_val_000000.bin", rng.integers(0, run.vocab, 2 * run.seq_len + 2))
    torch.manual_seed(0)
    model = torch_config.replace(torch_presets.get_preset("smoke").model, vocab_size=run.vocab)
    torch.save({"model": GPT.from_config(model).state_dict()}, run.root / "init.pt")
    return run


@pytest.fixture
def one_thread():
    """One torch thread: two spinning threads on the shared 2-core machine are much slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def fails(capsys) -> Callable[..., str]:
    """fails(argv, code=1): main(argv) returns `code` with an `error: ...` line and no
    traceback; returns stderr."""

    def run(argv: list[str], code: int = 1) -> str:
        assert train_lib.main(argv) == code
        err = capsys.readouterr().err
        assert "error: " in err and "Traceback" not in err, err
        return err

    return run


@pytest.fixture
def interrupt_at_update(monkeypatch) -> Callable[..., None]:
    """interrupt_at_update(update, signum=SIGINT): `signum` to this process during the
    forward/backward of update `update` (0-based); the handler only records it, so that step
    finishes and the loop stops at the top of the next."""

    def arm(update: int, signum: int = signal.SIGINT) -> None:
        real, calls = train_lib.forward_backward, []

        def forward_backward(*a, **k):
            if len(calls) == update:
                os.kill(os.getpid(), signum)
            calls.append(1)
            return real(*a, **k)

        monkeypatch.setattr(loop, "forward_backward", forward_backward)

    return arm


@pytest.fixture
def same_state() -> Callable[[dict, dict], None]:
    """same_state(a, b) asserts two torch_ref checkpoints hold the same run bit for bit: model,
    both optimizers (Muon's momentum gathered from every rank), LR schedulers, step and data
    position."""

    def check(a: dict, b: dict) -> None:
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

    return check
