"""torch_ref under torchrun: `torchrun --standalone --nproc_per_node 2 -m torch_ref.train` on the
CPU (gloo) trains as the same run's 2 processes spawned by `--devices 2`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def metrics(out: Path, run_id: str) -> list[dict]:
    return [json.loads(line) for line in (out / "logs" / f"{run_id}.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_torchrun_matches_the_spawned_processes(small_run, tmp_path):
    two_sequences = ["--batch-tokens", str(2 * small_run.seq_len), "--val-tokens", str(2 * small_run.seq_len)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]  # = torchrun
    launched = subprocess.run(
        [*torchrun, "-m", "torch_ref.train", *small_run.args(tmp_path, *two_sequences, "--run-id", "torchrun")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert launched.returncode == 0, launched.stderr[-3000:]
    spawned = subprocess.run(
        [sys.executable, "-m", "torch_ref.train", *small_run.args(tmp_path, *two_sequences, "--devices", "2", "--run-id", "spawned")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert spawned.returncode == 0, spawned.stderr[-3000:]

    header = (tmp_path / "logs" / "torchrun.txt").read_text()
    assert '"devices": 2' in header, header[:2000]
    assert launched.stdout.count("step:4/4 val_loss:") == 1  # rank 0 alone prints
    # Same ranks, data slices, gloo all-reduces and initial weights: the same numbers exactly.
    by_torchrun, by_spawn = metrics(tmp_path, "torchrun"), metrics(tmp_path, "spawned")
    losses = [(r["kind"], r["step"], r.get("train_loss", r.get("val_loss"))) for r in by_torchrun]
    assert losses == [(r["kind"], r["step"], r.get("train_loss", r.get("val_loss"))) for r in by_spawn]
    assert [kind for kind, _, _ in losses].count("train") == 4
