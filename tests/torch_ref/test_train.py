"""torch_ref.train on the CPU: a short run on shards written here (log lines, log file, metrics,
--init-from and --save-checkpoint), two gloo processes against one, the record's dtype policy,
--steps 0, and an interrupted run resumed bit for bit."""

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

from torch_ref import loop
from torch_ref import train as train_lib
from torch_ref.config import EOT_ID
from torch_ref.data import write_shard
from torch_ref.model import GPT
from torch_ref.presets import get_preset
from torch_ref.run import checkpoint as ckpt_lib
from torch_ref.run.convert import load_record_state_dict, read_checkpoint, strip_compile_prefix
from torch_ref.schedules import window_blocks

REPO_ROOT = Path(__file__).resolve().parents[2]
VAL_LINE = re.compile(r"^step:(\d+)/(\d+) val_loss:(\d+\.\d{4}) train_time:(\d+)ms step_avg:(nan|\d+\.\d{2})ms$")
TRAIN_LINE = re.compile(r"^step:(\d+)/(\d+) train_time:(\d+)ms step_avg:(nan|\d+\.\d{2})ms$")
SEQ_LEN = 128  # one 128-token block per sequence keeps the 50304-way head cheap on 2 cores
STEPS = 24
SMOKE = get_preset("smoke").model  # 4 layers x 64, one head: the runs' model
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
    # The smoke preset's model: each per-layer pattern of the record once, D = 64 in one head.
    model = GPT.from_config(SMOKE)
    torch.save({"model": model.state_dict()}, root / "init.pt")
    return root


def _args(root: Path, *extra: str) -> list[str]:
    return [
        "--preset", "smoke", "--device", "cpu",
        "--init-from", str(root / "init.pt"), "--head-dim", "64",
        "--train-files", str(root / "tiny_train_*.bin"), "--val-files", str(root / "tiny_val_*.bin"),
        "--seq-len", str(SEQ_LEN), "--val-tokens", str(2 * SEQ_LEN),
        "--window-max-tokens", "512", "--dtype", "fp32", "--out-dir", str(root),
        *extra,
    ]


def _val_lines(stdout: str) -> list[re.Match]:
    return [m for m in map(VAL_LINE.match, stdout.splitlines()) if m]


def _val_losses(stdout: str) -> dict[int, float]:
    return {int(m[1]): float(m[3]) for m in _val_lines(stdout)}


def _eval_checkpoint_state(state: dict, tokens: np.ndarray, window: int) -> float:
    """Val loss of a state dict computed here, without the training code: mean over 2 sequences."""
    model = GPT.from_config(SMOKE)
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
    ckpt = workspace / "checkpoints" / "tiny" / f"{STEPS}.pt"  # --save-checkpoint: the final state in the run's folder
    argv = _args(workspace, "--steps", str(STEPS), "--batch-tokens", str(2 * SEQ_LEN), "--val-every", "8",
                 "--run-id", "tiny", "--save-checkpoint")
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
    assert '"preset": "smoke"' in text  # the preset's name, in the header's options
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
                            "--dtype", "record", "--export-torch", str(workspace / "record_policy.pt")))
    val = _val_losses(stdout)
    assert val[0] == pytest.approx(math.log(50304), abs=1e-4)  # zero head: exact in any precision
    assert math.isfinite(val[3]) and val[3] < val[0]
    saved = torch.load(workspace / "record_policy.pt", weights_only=True)["model"]
    assert saved["embed.weight"].dtype == torch.bfloat16  # the record keeps embeddings in bf16
    assert saved["lm_head.weight"].dtype == torch.float32


# --steps 0 and an interrupted run resumed (conftest.small_run: the smoke model, fp32) -----


def test_steps_0_validates_and_exits(small_run, tmp_path, capsys, one_thread):
    assert train_lib.main(small_run.args(tmp_path / "out", "--steps", "0", "--export-torch", str(tmp_path / "init.pt"))) == 0
    captured = capsys.readouterr()
    step_lines = [line for line in captured.out.splitlines() if line.startswith("step:")]
    assert len(step_lines) == 1 and step_lines[0].startswith("step:0/0 val_loss:6.9315 ")  # zero head: ln(1024)
    assert "writes no checkpoint" not in captured.err
    exported = torch.load(tmp_path / "init.pt", weights_only=True)
    assert set(exported) == {"model"} and "lm_head.weight" in exported["model"]  # the record's format


def test_val_every_0_validates_after_the_last_step_only(small_run, tmp_path, capsys, one_thread):
    """The record's val_loss_every 0 ("only at the end"): no step-0 validation (whose eval graph
    Inductor would compile before the timed steps for nothing on a GPU), one after the last step."""
    out = tmp_path / "out"
    assert train_lib.main(small_run.args(out, "--steps", "2", "--val-every", "0", "--run-id", "z")) == 0
    stdout = capsys.readouterr().out
    lines = [line for line in stdout.splitlines() if line.startswith("step:")]
    assert [int(m[1]) for m in _val_lines(stdout)] == [2], lines
    assert [line.split(" ")[0] for line in lines] == ["step:1/2", "step:2/2", "step:2/2"]  # train 1, train 2, val 2
    metrics = [json.loads(line) for line in (out / "logs" / "z.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if m["kind"] == "val"] == [2]


@pytest.mark.slow
def test_interrupted_and_resumed_run_is_bit_exact(small_run, tmp_path, capsys, monkeypatch, one_thread,
                                                  interrupt_at_update, same_state):
    out, seq_len = tmp_path / "out", small_run.seq_len
    # The uninterrupted run: 4 updates, step files every 2, only the newest kept.
    assert train_lib.main(small_run.args(out, "--run-id", "a", "--checkpoint-every", "2", "--keep-checkpoints", "1")) == 0
    straight = capsys.readouterr().out
    assert sorted(p.name for p in (out / "checkpoints" / "a").iterdir()) == ["4.pt"]

    # The same run, sent SIGINT during update 2 (the third): that update finishes, the loop
    # stops at the top of step 3 holding 3 updates, and saves them.
    interrupt_at_update(2)
    assert train_lib.main(small_run.args(out, "--run-id", "b", "--checkpoint-every", "2")) == 130
    err = capsys.readouterr().err
    folder = out / "checkpoints" / "b"
    assert f"interrupted by SIGINT at step 3; the state after step 3 is in {folder} (continue with --resume {folder})" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in folder.iterdir()) == ["2.pt", "3.pt"]
    monkeypatch.undo()

    # Resumed without --checkpoint-every: the saved cadence (every 2) is kept, step 4 is saved.
    assert train_lib.main(small_run.args(out, "--run-id", "c", "--resume", str(folder))) == 0
    resumed = capsys.readouterr()
    assert "writes no checkpoint" not in resumed.err
    assert sorted(p.name for p in folder.iterdir()) == ["2.pt", "3.pt", "4.pt"]
    final = read_checkpoint(folder / "4.pt")
    same_state(final, read_checkpoint(out / "checkpoints" / "a" / "4.pt"))
    assert final["step"] == 4 and final["data_position"] == {"shard_index": 0, "pos": 4 * seq_len, "batches": 4}
    # The final val line (fp32, same ops on the same state) is the same string.
    assert _val_lines(resumed.out)[-1].group(1, 2, 3) == _val_lines(straight)[-1].group(1, 2, 3)
    assert not [p for p in tmp_path.rglob("*") if ckpt_lib.TMP_MARKER in p.name]


# A diverging loss, a NaN state (conftest.small_run) -----------------------------------------------


@pytest.fixture
def scalar_lr(monkeypatch):
    """scalar_lr(value): the smoke preset (small_run's) with the scalars' Adam learning rate set
    to `value`; torch_ref's command line has no flag for it."""
    import torch_ref.config as cfg  # noqa: PLC0415
    from torch_ref import presets  # noqa: PLC0415

    def use(value: float) -> None:
        smoke = presets.PRESETS["smoke"]
        monkeypatch.setitem(presets.PRESETS, "smoke", lambda: cfg.replace(smoke(), optim=cfg.replace(smoke().optim, scalar_lr=value)))

    return use


def test_a_diverging_train_loss_stops_the_run_before_any_later_save(small_run, tmp_path, fails, scalar_lr, one_thread):
    """A scalar learning rate of 1e30: the train loss of update 2 (its line reads step:3) is NaN.
    Every loss is read before a save, so with a save due every step the state after update 2 is
    never written; exit 1 naming the step and the value; step 2 (kept alone) loads, finite."""
    scalar_lr(1e30)
    out = tmp_path / "out"
    err = fails(small_run.args(out, "--run-id", "nan", "--checkpoint-every", "1", "--keep-checkpoints", "1"))
    folder = out / "checkpoints" / "nan"
    assert ("error: train loss is nan at step 3/4; the run stopped without saving any later state. The newest complete "
            f"checkpoint is step 2 in {folder}") in err, err
    assert sorted(p.name for p in folder.iterdir()) == ["2.pt"]
    state = read_checkpoint(folder / "2.pt")
    assert all(torch.isfinite(value).all() for value in state["model"].values())


def test_allow_nonfinite_loss_trains_on(small_run, tmp_path, scalar_lr, one_thread, capsys):
    scalar_lr(1e30)
    assert train_lib.main(small_run.args(tmp_path / "out", "--run-id", "a", "--allow-nonfinite-loss")) == 0
    losses = [json.loads(line)["train_loss"] for line in (tmp_path / "out" / "logs" / "a.jsonl").read_text().splitlines()
              if json.loads(line)["kind"] == "train"]
    assert len(losses) == 4 and math.isnan(losses[-1])


@pytest.fixture
def nan_grads_at_update(monkeypatch):
    """nan_grads_at_update(update): that update's loss is finite but one gradient is NaN (as an
    overflow in the backward pass makes it), so the state after it holds NaN values."""

    def arm(update: int) -> None:
        real, calls = train_lib.forward_backward, []

        def forward_backward(model, *args):
            loss = real(model, *args)
            if len(calls) == update:
                next(model.parameters()).grad.fill_(float("nan"))
            calls.append(1)
            return loss

        monkeypatch.setattr(loop, "forward_backward", forward_backward)

    return arm


def test_a_nan_state_behind_a_finite_loss_is_never_saved(small_run, tmp_path, fails, nan_grads_at_update, one_thread):
    nan_grads_at_update(1)
    out = tmp_path / "out"
    err = fails(small_run.args(out, "--run-id", "s", "--checkpoint-every", "1"))
    assert "error: the state after step 2 holds NaN or infinite values although every loss before it was finite" in err
    assert sorted(p.name for p in (out / "checkpoints" / "s").iterdir()) == ["1.pt"]


def test_a_nan_val_loss_stops_the_run_before_its_save(small_run, tmp_path, fails, nan_grads_at_update, one_thread):
    """Validation after step 2 comes before its save: the NaN state's real val loss is NaN."""
    nan_grads_at_update(1)
    out = tmp_path / "out"
    err = fails(small_run.args(out, "--run-id", "v", "--checkpoint-every", "1", "--val-every", "2"))
    assert "error: val loss is nan at step 2/4" in err and "The newest complete checkpoint is step 1" in err, err
    assert sorted(p.name for p in (out / "checkpoints" / "v").iterdir()) == ["1.pt"]
