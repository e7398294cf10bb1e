"""torch_ref.train as 2 processes on the loopback (gloo, CPU), launched as torchrun launches
them (RANK, WORLD_SIZE, MASTER_ADDR/PORT; each process its own command line): a preempted job
(SIGTERM at different steps: one agreed step, one checkpoint, exit 143, a bit-exact resume), a
killed rank (the other exits within the bound naming it), and a run moved between 1 and 2
ranks (docs/RELIABILITY.md). The run is conftest.small_run's, one sequence per rank."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxgpt.testing import free_port, start_children, wait_children
from torch_ref import train as train_lib
from torch_ref.run import peers
from torch_ref.run.convert import read_checkpoint
from torch_ref.run.interrupt import TEST_SIGNAL_AT_STEP

REPO_ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 300  # the 4-step run takes ~10 s here; a hang must not hang CI


def two_rank_args(small_run, out: Path, *extra: str) -> list[str]:
    """small_run's 4-step run with one 128-token sequence per rank (and a 256-token val batch)."""
    return small_run.args(out, "--batch-tokens", "256", "--val-tokens", "256", *extra)


def launch(folder: Path, args: list[str], signals: tuple[str | None, str | None] = (None, None)) -> list[subprocess.Popen]:
    """`python -m torch_ref.train ARGS` as ranks 0 and 1; `signals[r]`: rank r's
    interrupt.TEST_SIGNAL_AT_STEP ("STEP:SIGNAL") or None. Output in folder/rank<r>.log."""
    folder.mkdir(parents=True, exist_ok=True)
    port, envs = free_port(), []
    for rank, at_step in enumerate(signals):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        envs.append({**env, TEST_SIGNAL_AT_STEP: at_step} if at_step is not None else env)
    return start_children([[sys.executable, "-m", "torch_ref.train", *args]] * 2, envs, rank_logs(folder), REPO_ROOT)


def rank_logs(folder: Path) -> list[Path]:
    return [folder / f"rank{rank}.log" for rank in range(2)]


def finish(folder: Path, children: list[subprocess.Popen]) -> tuple[list[int], list[str]]:
    """Exit codes and outputs; both killed (and the test failed) when one outlives WAIT_S."""
    codes = wait_children(children, rank_logs(folder), WAIT_S, name="rank")
    return codes, [log.read_text() for log in rank_logs(folder)]


@pytest.fixture(scope="module")
def straight(small_run, tmp_path_factory):
    """The uninterrupted 2-rank run: step files every 2 steps (the final state in out/checkpoints/a)."""
    folder = tmp_path_factory.mktemp("straight")
    codes, outputs = finish(folder, launch(folder, two_rank_args(small_run, folder / "out", "--run-id", "a",
                                                                 "--checkpoint-every", "2")))
    assert codes == [0, 0], outputs
    return folder


@pytest.mark.slow
def test_sigterm_at_different_steps_stops_both_ranks_at_one_step_and_resumes_bit_exactly(small_run, straight, tmp_path,
                                                                                         same_state):
    """Rank 0 gets SIGTERM at the top of step 1, rank 1 at step 2: the ranks' per-step agreement
    stops both at step 1, one step file of step 1 (gathered from both), exit 143 each; resumed
    by 2 ranks, the final state is the uninterrupted run's bit for bit (fp32, gloo)."""
    out = tmp_path / "out"
    codes, outputs = finish(tmp_path / "preempted", launch(
        tmp_path / "preempted", two_rank_args(small_run, out, "--run-id", "p", "--checkpoint-every", "3"),
        signals=("1:SIGTERM", "2:SIGTERM")))
    folder = out / "checkpoints" / "p"
    assert codes == [143, 143], outputs
    assert f"interrupted by SIGTERM at step 1; the state after step 1 is in {folder}" in outputs[0], outputs[0]
    assert sorted(p.name for p in folder.iterdir()) == ["1.pt"]

    codes, outputs = finish(tmp_path / "resumed", launch(
        tmp_path / "resumed", two_rank_args(small_run, out, "--run-id", "r", "--resume", str(folder))))
    assert codes == [0, 0], outputs  # the saved cadence (every 3 steps and the last) wrote step 4 into the folder
    same_state(read_checkpoint(folder / "4.pt"), read_checkpoint(straight / "out" / "checkpoints" / "a" / "4.pt"))


@pytest.mark.slow
def test_a_killed_rank_ends_the_other_with_its_name_within_the_bound(small_run, tmp_path):
    """Rank 1 dies by SIGKILL at the top of step 2. Rank 0's next collective fails at once
    (gloo: connection reset); it holds a roll call over the rendezvous store (rank 1 does not
    answer within peers.ROLL_CALL_WAIT_S), names rank 1 and the newest complete step file, and
    exits 1 well within peers.PEER_TIMEOUT_S of the kill."""
    out = tmp_path / "out"
    children = launch(tmp_path / "killed", two_rank_args(small_run, out, "--run-id", "k", "--checkpoint-every", "1"),
                      signals=(None, "2:SIGKILL"))
    deadline = time.monotonic() + WAIT_S
    while children[1].poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    killed_at = time.monotonic()
    codes, outputs = finish(tmp_path / "killed", children)
    seconds = time.monotonic() - killed_at
    print(f"rank 0 ended {seconds:.1f} s after rank 1 was killed")
    folder = out / "checkpoints" / "k"
    assert codes == [1, -signal.SIGKILL], outputs
    assert seconds <= peers.PEER_TIMEOUT_S
    errors = [line for line in outputs[0].splitlines() if "error: " in line]
    assert len(errors) == 1 and "rank 1 of this 2-rank run is gone (no answer within 10 s)" in errors[0], outputs[0]
    assert f"The newest complete checkpoint is step 1 in {folder}" in errors[0] and "Traceback" not in outputs[0]
    assert read_checkpoint(folder / "1.pt")["step"] == 1


def losses(metrics: Path) -> tuple[float, float]:
    """(train loss of update 2, the first one after the resume; the final val loss) of a run's metrics."""
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    return next(r["train_loss"] for r in records if r["kind"] == "train" and r["step"] == 3), records[-1]["val_loss"]


@pytest.mark.slow
def test_a_run_saved_by_two_ranks_resumes_on_one_and_back(small_run, straight, tmp_path, capsys, one_thread):
    """The global batch, the whole optimizer state (Muon's momentum is gathered into the file)
    and the schedules do not depend on the rank count: step 2 saved by 2 ranks continues in 1
    process along the 2-rank curve, and a 1-rank step 2 continues on 2 ranks along its own."""
    def step_2_of(folder: Path, copy: Path) -> Path:  # a folder holding only `folder`'s 2.pt
        copy.mkdir(parents=True)
        (copy / "2.pt").write_bytes((folder / "2.pt").read_bytes())
        return copy

    # 2 ranks -> 1: the uninterrupted 2-rank run's step 2, resumed in this process.
    moved = tmp_path / "moved"
    resume = step_2_of(straight / "out" / "checkpoints" / "a", tmp_path / "from_two")
    assert train_lib.main(two_rank_args(small_run, moved, "--run-id", "m", "--resume", str(resume))) == 0
    capsys.readouterr()
    # 1 rank -> 2: a 1-rank run's step 2, resumed by 2 ranks.
    single = tmp_path / "single"
    assert train_lib.main(two_rank_args(small_run, single, "--run-id", "s", "--checkpoint-every", "2")) == 0
    resume = step_2_of(single / "checkpoints" / "s", tmp_path / "from_one")
    codes, outputs = finish(tmp_path / "two", launch(tmp_path / "two", two_rank_args(
        small_run, tmp_path / "two", "--run-id", "t", "--resume", str(resume))))
    assert codes == [0, 0], outputs
    # Sequence-averaged (1 rank) vs AVG-all-reduced (2 ranks) fp32 gradients differ in rounding
    # only; the bf16 Newton-Schulz can turn that into a few bf16 ulps of a Muon update: the
    # 1e-3 of test_two_gloo_processes_match_one_process, here over 2 steps.
    pairs = {"2 ranks -> 1": (moved / "logs" / "m.jsonl", straight / "out" / "logs" / "a.jsonl"),
             "1 rank -> 2": (tmp_path / "two" / "logs" / "t.jsonl", single / "logs" / "s.jsonl")}
    for name, (resumed, saved) in pairs.items():
        (first, got), (first_saved, expected) = losses(resumed), losses(saved)
        print(f"{name}: update 2's loss {first:.8f} vs {first_saved:.8f}, final val loss {got:.6f} vs {expected:.6f}")
        # Update 2 starts from the same state on the same global batch: only the fp32 order of
        # the mean over its 2 sequences differs (~1e-7); another batch would differ by far more.
        assert first == pytest.approx(first_saved, rel=1e-6), name
        assert got == pytest.approx(expected, abs=1e-3), name
