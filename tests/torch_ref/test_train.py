"""torch_ref.train on the CPU: a short run on shards written here, log format, checkpoints, errors."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from torch_ref.config import EOT_ID, get_preset
from torch_ref import runlog
from torch_ref import train as train_lib
from torch_ref.data import batches_available, write_shard
from torch_ref.model import GPT, load_record_state_dict, model_config_from_state_dict, strip_compile_prefix
from torch_ref.optim import window_blocks

REPO_ROOT = Path(__file__).resolve().parents[2]
VAL_LINE = re.compile(r"^step:(\d+)/(\d+) val_loss:(\d+\.\d{4}) train_time:(\d+)ms step_avg:(nan|\d+\.\d{2})ms$")
TRAIN_LINE = re.compile(r"^step:(\d+)/(\d+) train_time:(\d+)ms step_avg:(nan|\d+\.\d{2})ms$")
SEQ_LEN = 128  # one 128-token block per sequence keeps the 50304-way head cheap on 2 cores
STEPS = 24
# One OpenMP thread: on a shared 2-core CI box, 2 spinning threads made a step ~10x slower.
_ONE_THREAD_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _corpus(num_tokens: int, seed: int) -> np.ndarray:
    """Documents opened by EOT whose tokens follow a fixed successor rule 90% of the time: learnable."""
    rng = np.random.default_rng(seed)
    tokens: list[int] = []
    while len(tokens) < num_tokens:
        state = int(rng.integers(0, 64))
        tokens.append(EOT_ID)
        for _ in range(int(rng.integers(40, 300))):
            state = (state * 5 + 3) % 64 if rng.random() < 0.9 else int(rng.integers(0, 64))
            tokens.append(1000 + state)
    return np.asarray(tokens[:num_tokens], dtype=np.uint16)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("torch_train")
    write_shard(root / "tiny_train_000001.bin", _corpus(STEPS * SEQ_LEN * 2 + 4096, seed=1))
    write_shard(root / "tiny_val_000000.bin", _corpus(2048, seed=2))
    torch.manual_seed(0)
    # 12 layers keep every per-layer pattern of the record; D = 64 with head_dim 64 is one head.
    model = GPT(50257, 12, 1, 64)
    torch.save({"model": model.state_dict()}, root / "init.pt")
    return root


def _args(root: Path, *extra: str) -> list[str]:
    return [
        "--device", "cpu",
        "--init-from", str(root / "init.pt"), "--head-dim", "64",
        "--train-files", str(root / "tiny_train_*.bin"), "--val-files", str(root / "tiny_val_*.bin"),
        "--seq-len", str(SEQ_LEN), "--val-tokens", str(2 * SEQ_LEN),
        "--window-max-tokens", "512", "--dtype", "fp32", "--log-dir", str(root / "logs"),
        *extra,
    ]


def _val_losses(stdout: str) -> dict[int, float]:
    return {int(m[1]): float(m[3]) for m in map(VAL_LINE.match, stdout.splitlines()) if m}


def _eval_checkpoint_state(state: dict, tokens: np.ndarray, window: int) -> float:
    """Val loss of a state dict computed here, without the training code: mean over 2 sequences."""
    model = GPT(50257, 12, 1, 64)
    load_record_state_dict(model, state)
    model.eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # see _ONE_THREAD_ENV; restored below
    try:
        with torch.no_grad():
            losses = []
            for i in range(2):
                chunk = torch.from_numpy(tokens[i * SEQ_LEN : (i + 1) * SEQ_LEN + 1].astype(np.int64))
                losses.append(model(chunk[:-1], chunk[1:], window).item())
    finally:
        torch.set_num_threads(threads)
    return sum(losses) / len(losses)


@pytest.fixture(scope="module")
def tiny_run(workspace):
    """One 24-step fp32 run (2 sequences per step, processed one after another)."""
    ckpt = workspace / "final.pt"
    argv = _args(workspace, "--steps", str(STEPS), "--batch-tokens", str(2 * SEQ_LEN), "--val-every", "8",
                 "--save-checkpoint", str(ckpt))
    completed = subprocess.run([sys.executable, "-m", "torch_ref.train", *argv], cwd=REPO_ROOT, env=_ONE_THREAD_ENV,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout, ckpt


@pytest.mark.slow
def test_val_loss_falls_and_lines_have_the_record_format(tiny_run):
    stdout, _ = tiny_run
    lines = [line for line in stdout.splitlines() if line.startswith("step:")]
    val = _val_losses(stdout)
    train_steps = [int(m[1]) for m in map(TRAIN_LINE.match, lines) if m]
    assert all(VAL_LINE.match(line) or TRAIN_LINE.match(line) for line in lines), lines
    assert sorted(val) == [0, 8, 16, 24]
    assert train_steps == list(range(1, STEPS + 1))
    # Zero-init head: every capped logit is 15, so the step-0 loss is ln(50304) (RECORD.md 2.3, step 9).
    assert val[0] == pytest.approx(math.log(50304), abs=1e-4)
    assert val[8] < val[0] - 2.0 and val[24] < val[8], val
    # The record's timing columns: NaN averages until step 11, then train_time / (step - 9).
    last = TRAIN_LINE.match(lines[-2])
    assert last[1] == str(STEPS) and last[4] != "nan"
    assert float(last[4]) == pytest.approx(int(last[3]) / (STEPS - 1 - 9), rel=1e-2, abs=0.01)


@pytest.mark.slow
def test_log_file_holds_config_environment_and_lines(tiny_run, workspace):
    stdout, _ = tiny_run
    log_path = Path(stdout.splitlines()[0])
    assert log_path.parent == workspace / "logs" and log_path.suffix == ".txt"
    text = log_path.read_text()
    assert '"steps": 24' in text and "Running PyTorch" in text and "=" * 100 in text
    assert f"step:{STEPS}/{STEPS} val_loss:" in text


@pytest.mark.slow
def test_metrics_jsonl_records_every_step(tiny_run):
    stdout, _ = tiny_run
    metrics_path = Path(stdout.splitlines()[0]).with_suffix(".jsonl")
    records = [json.loads(line) for line in metrics_path.read_text().splitlines()]
    assert {(r["framework"], r["run_id"]) for r in records} == {("torch_ref", metrics_path.stem)}
    assert [r["step"] for r in records if r["kind"] == "val"] == [0, 8, 16, 24]
    assert [r["step"] for r in records if r["kind"] == "train"] == list(range(1, STEPS + 1))
    val = _val_losses(stdout)
    assert all(r["val_loss"] == pytest.approx(val[r["step"]], abs=5e-5) for r in records if r["kind"] == "val")
    first_train = next(r for r in records if r["kind"] == "train")
    assert first_train["train_loss"] == pytest.approx(math.log(50304), abs=1e-4)  # zero head before update 1


@pytest.mark.slow
def test_init_from_and_save_checkpoint_round_trip(tiny_run, workspace):
    stdout, ckpt = tiny_run
    val = _val_losses(stdout)
    from torch_ref.data import read_shard

    val_tokens = np.asarray(read_shard(workspace / "tiny_val_000000.bin"))
    # --init-from: the step-0 val loss is the initial checkpoint's own loss (window 1 block).
    init_state = torch.load(workspace / "init.pt", weights_only=True)["model"]
    # Same fp32 ops on the same weights; the log rounds to 4 decimals.
    assert val[0] == pytest.approx(_eval_checkpoint_state(init_state, val_tokens, 1), abs=6e-5)

    saved = torch.load(ckpt, weights_only=True)
    assert {"model", "optimizers", "step"} <= set(saved) and saved["step"] == STEPS
    assert set(saved["model"]) == set(init_state)  # record keys, no `_orig_mod.` prefix
    assert all(saved["model"][k].dtype == torch.float32 for k in saved["model"])  # --dtype fp32
    final_window = window_blocks(STEPS, STEPS, 512)[0]
    # The saved weights reproduce the last logged val loss (4 decimals in the log).
    assert val[STEPS] == pytest.approx(_eval_checkpoint_state(saved["model"], val_tokens, final_window), abs=6e-5)
    # A record-style compiled prefix is accepted by --init-from's loader.
    prefixed = {"_orig_mod." + k: v for k, v in saved["model"].items()}
    assert strip_compile_prefix(prefixed).keys() == saved["model"].keys()


def test_model_dims_are_inferred_from_a_state_dict():
    state = GPT(50257, 12, 2, 64, rotary_max_len=128).state_dict()
    base = get_preset("tiny").model
    got = model_config_from_state_dict(base, state, head_dim=32)
    assert (got.vocab_size, got.model_dim, got.num_layers, got.num_heads) == (50257, 64, 12, 2)
    assert got.attention_free_layers == (7,)
    with pytest.raises(ValueError, match="not divisible by --head-dim"):
        model_config_from_state_dict(base, state, head_dim=48)


def test_log_line_helpers_follow_the_record():
    assert runlog.val_line(0, 1393, 10.82580, 0.0) == "step:0/1393 val_loss:10.8258 train_time:0ms step_avg:nanms"
    # RECORD.md 9: the final val line of the logged run.
    assert runlog.val_line(1393, 1393, 3.2785, 179527.0) == (
        "step:1393/1393 val_loss:3.2785 train_time:179527ms step_avg:129.81ms"
    )
    # The last train line: step 1393 at 179,392 ms, step_avg 129.71 ms (update made at step 1392).
    assert runlog.train_line(1392, 1393, 179392.0) == "step:1393/1393 train_time:179392ms step_avg:129.71ms"
    assert runlog.train_line(11, 1393, 1234.0).endswith("step_avg:nanms")


@pytest.mark.parametrize(
    "extra, message, code",
    [
        (["--seq-len", "100"], "seq_len", 2),  # invalid config values are usage errors
        (["--batch-tokens", "384"], "batch_tokens", 2),  # not a multiple of seq_len 256
        (["--devices", "0"], "--devices must be >= 1", 2),
        (["--devices", "2", "--batch-tokens", "256"], "not divisible by devices", 1),
        (["--train-files", "nowhere/none_*.bin"], "no shard files match", 1),
        (["--steps", "1000"], "1000 steps need 1000", 1),
        (["--val-tokens", str(256 * 64)], "--val-tokens 16384 needs 64", 1),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(workspace, capsys, extra, message, code):
    argv = _args(workspace, "--steps", "1", "--seq-len", "256", "--batch-tokens", "512", "--val-tokens", "512", *extra)
    assert train_lib.main(argv) == code
    assert message in capsys.readouterr().err


def test_token_ids_beyond_the_vocabulary_are_refused(workspace, capsys, tmp_path):
    bad = np.zeros(5000, dtype=np.int64)
    bad[4321] = 60000  # as a shard made with another tokenizer
    write_shard(tmp_path / "other_train_000001.bin", bad)
    argv = _args(workspace, "--steps", "1", "--seq-len", "256", "--batch-tokens", "512", "--val-tokens", "512",
                 "--train-files", str(tmp_path / "other_train_*.bin"))
    assert train_lib.main(argv) == 1
    err = capsys.readouterr().err
    assert "other_train_000001.bin: token id 60000 is outside the model's vocabulary" in err


def test_batches_available_follows_the_advance_rule(tmp_path):
    write_shard(tmp_path / "a.bin", np.zeros(1000, dtype=np.uint16))
    # pos = 0, 256, 512 serve (pos + 257 < 1000); pos = 768 does not (768 + 257 >= 1000).
    assert batches_available([tmp_path / "a.bin"], 256) == 3
    assert batches_available([tmp_path / "a.bin"] * 2, 998) == 2  # 998 + 1 < 1000
    assert batches_available([tmp_path / "a.bin"], 999) == 0


def test_missing_init_checkpoint_is_refused(workspace, capsys):
    argv = _args(workspace, "--steps", "1", "--batch-tokens", "128")
    argv[argv.index("--init-from") + 1] = str(workspace / "absent.pt")
    assert train_lib.main(argv) == 1
    assert "--init-from checkpoint not found" in capsys.readouterr().err


def _run_cli(argv: list[str]) -> str:
    completed = subprocess.run([sys.executable, "-m", "torch_ref.train", *argv], cwd=REPO_ROOT, env=_ONE_THREAD_ENV,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


@pytest.mark.slow
def test_two_gloo_processes_match_one_process(workspace):
    common = ["--steps", "4", "--batch-tokens", str(2 * SEQ_LEN), "--val-every", "4"]
    one = _val_losses(_run_cli(_args(workspace, *common)))
    two = _val_losses(_run_cli(_args(workspace, *common, "--devices", "2")))
    assert sorted(one) == sorted(two) == [0, 4]
    assert two[0] == one[0]  # rank 0's initial weights everywhere; the same val tokens
    # Sequence-averaged vs AVG-all-reduced fp32 gradients differ in rounding only; bf16 NS can
    # turn that into a few bf16 ulps of the Muon update, so allow 1e-3 after 4 steps.
    assert two[4] == pytest.approx(one[4], abs=1e-3)


@pytest.mark.slow
def test_record_dtype_policy_trains_on_the_cpu(workspace):
    stdout = _run_cli(_args(workspace, "--steps", "3", "--batch-tokens", str(SEQ_LEN), "--val-every", "3",
                            "--dtype", "record", "--save-checkpoint", str(workspace / "record_policy.pt")))
    val = _val_losses(stdout)
    assert val[0] == pytest.approx(math.log(50304), abs=1e-4)  # zero head: exact in any precision
    assert math.isfinite(val[3]) and val[3] < val[0]
    saved = torch.load(workspace / "record_policy.pt", weights_only=True)["model"]
    assert saved["embed.weight"].dtype == torch.bfloat16  # the record keeps embeddings in bf16
    assert saved["lm_head.weight"].dtype == torch.float32
