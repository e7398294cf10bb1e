"""jaxgpt_tools.gpu.check through scripts/gpu_check.py --dry-run (the lent-GPU command end to end on the
CPU at tiny sizes), and its log reader."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxgpt.shards import write_shard
from jaxgpt.testing import synthetic_tokens
from jaxgpt_tools import upstream_record
from jaxgpt_tools.gpu import check as gpu_check
from jaxgpt_tools.gpu import check_report

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_gpu_check_dry_run_writes_the_report(tmp_path, stand_in):
    # GPT-2's EOT id, since the dry run trains the smoke preset (GPT-2 vocabulary).
    write_shard(tmp_path / "train_000.bin", synthetic_tokens(20_000, seed=0, eot_id=50256))
    write_shard(tmp_path / "val_000.bin", synthetic_tokens(4_096, seed=1, eot_id=50256))
    out = tmp_path / "check"
    # The record's code is never committed: a stand-in with its setting names takes the patches
    # (the record leg only prepares its run on a CPU; tests/tools/test_upstream_record.py patches
    # the real script when it was fetched).
    record_script = tmp_path / "train_gpt.py"
    record_script.write_text(stand_in)
    # jaxgpt's train leg and its schedule compile the same step: one compilation cache in tmp_path
    # serves both (on a GPU machine they share the user's cache, the command line's default).
    env = {**os.environ, "JAXGPT_COMPILE_CACHE": str(tmp_path / "compile_cache")}
    done = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--dry-run", "--out", str(out), "--only", "train,parity,schedule",
         "--record-script", str(record_script), "--scratch", str(tmp_path / "scratch"),
         "--train-files", str(tmp_path / "train_*.bin"), "--val-files", str(tmp_path / "val_*.bin")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["dry_run"] and report["environment"]["ok"]
    parity = report["parity"]
    # Same weights and tokens, fp32 policy, both on the CPU: fp32-level agreement.
    assert parity["ok"] and parity["loss_rel_diff"] < 1e-5 and parity["argmax_agreement"] > 0.99
    train = report["train"]
    assert train["ok"] and set(train["runs"]) == {"jaxgpt", "torch_ref"}
    for key in ("jaxgpt", "torch_ref"):
        run = train["runs"][key][0]
        assert run["steps_logged"] == 4 and run["step_ms_median"] > 0 and run["val_losses"]
    assert train["ratio_jax_over_torch"] > 0
    # The record leg: patched into its run folder and compiled, not run without CUDA.
    record = train["record_skipped"]
    assert "needs CUDA" in record["skipped"] and train["record_step_ms"] is None
    assert [p["name"] for p in record["patches"]][:3] == ['train_files = "shards/train/*.bin"',
                                                          'val_files = "shards/val/*.bin"', "num_iterations = 4"]
    assert (out / "record" / upstream_record.PATCHED_NAME).is_file()
    assert sorted(p.name for p in (out / "record" / "shards" / "train").iterdir()) == ["train_000.bin"]
    # The schedule: both trainers from one initial state, to the end, a final checkpoint each.
    schedule = report["schedule"]
    assert schedule["ok"] and len(schedule["init_sha256"]) == 64
    for key in ("jaxgpt", "torch_ref"):
        run = schedule["runs"][key]
        assert run["steps_logged"] == 4 and set(run["val_losses"]) == {"0", "2", "4"} and run["checkpoint"]["bytes"] > 0
        assert (out / "schedule" / f"{key}.jsonl").is_file() and (out / "schedule" / f"{key}.txt").is_file()
    # Same initial state: the step-0 validations agree to fp32 rounding.
    assert schedule["val"]["steps"] == [0, 2, 4]
    assert abs(schedule["val"]["jaxgpt"][0] - schedule["val"]["torch_ref"][0]) < 1e-4
    assert schedule["plot"].endswith("val_curves.png") and (out / "schedule" / "val_curves.png").stat().st_size > 0
    text = (out / "gpu_check.md").read_text()
    assert report["total_seconds"] > 0
    assert "Dry run on the CPU" in text and "| jaxgpt |" in text and "| torch_ref |" in text
    assert "`num_iterations = 4`: step count" in text and "Whole schedule" in text


def test_train_comparison_skips_the_record_leg_with_its_reason(tmp_path, monkeypatch):
    """Without the fetched script the record leg is skipped and said why; the ratios come from the
    runs there are (the trainers stand in here: their runs are tested end to end above)."""
    steps = {"jaxgpt": 200.0, "torch_ref": 160.0}
    monkeypatch.setattr(gpu_check, "train_run", lambda framework, *args: {
        "step_ms_median": steps[framework], "peak_mib": 1, "val_losses": {}})
    summary = gpu_check.train_comparison(gpu_check.GPU_SIZES, {}, tmp_path, True, 1, tmp_path / "absent.py")
    assert "no record script at" in summary["record_skipped"]["skipped"] and "fetch_record.py" in summary["record_skipped"]["skipped"]
    assert (summary["jax_step_ms"], summary["torch_step_ms"], summary["record_step_ms"]) == (200.0, 160.0, None)
    assert summary["ratio_jax_over_torch"] == 1.25 and "ratio_jax_over_record" not in summary


def test_gpu_check_reads_step_times_from_the_record_log_lines():
    lines = ["step:0/14 val_loss:10.8258 train_time:0ms step_avg:nanms",
             "step:1/14 train_time:30000ms step_avg:nanms train_loss:10.8"]
    lines += [f"step:{s}/14 train_time:{30000 + 1000 * (s - 1)}ms step_avg:nanms train_loss:3.0" for s in range(2, 11)]
    # The clock restarts after step 10: step 11 shows 110 ms, then 100 ms per step.
    lines += [f"step:{s}/14 train_time:{110 + 100 * (s - 11)}ms step_avg:1.0ms train_loss:3.0" for s in range(11, 15)]
    lines += ["step:14/14 val_loss:2.5000 train_time:410ms step_avg:102.5ms", "peak memory allocated: 31033 MiB"]
    parsed = gpu_check.parse_log("\n".join(lines))
    assert parsed["step_ms"] == [100, 100, 100] and parsed["step_ms_median"] == 100
    assert parsed["first_step_ms"] == 30000 and parsed["peak_mib"] == 31033
    assert parsed["val_losses"] == {0: 10.8258, 14: 2.5}
    short = gpu_check.parse_log("\n".join(lines[:5]))  # steps 1..4 only: falls back to steps 2..4
    assert short["step_ms"] == [1000, 1000, 1000]


def test_a_failed_or_timed_out_run_keeps_the_other_runs_numbers(tmp_path, monkeypatch, stand_in):
    """Each run of the train leg is guarded on its own: the record's run timing out (and
    torch_ref failing) leaves jaxgpt's median and says why the others have none."""
    def train_run(framework, *args):
        if framework == "torch_ref":
            raise RuntimeError("torch_ref.train exited 1: ['CUDA out of memory']")
        return {"step_ms_median": 200.0, "first_step_ms": 26000, "peak_mib": 1, "val_losses": {}}

    def record_run(*args):
        raise TimeoutError("train_gpt_patched.py ran past 300 s and was stopped")

    monkeypatch.setattr(gpu_check, "train_run", train_run)
    monkeypatch.setattr(gpu_check, "record_run", record_run)
    script = tmp_path / "train_gpt.py"
    script.write_text(stand_in)
    summary = gpu_check.train_comparison(gpu_check.GPU_SIZES, {}, tmp_path, True, 1, script)
    assert summary["jax_step_ms"] == 200.0 and summary["torch_step_ms"] is None and summary["record_step_ms"] is None
    assert "out of memory" in summary["failed_runs"]["torch_ref"][0]
    assert summary["failed_runs"]["record"][0].startswith("TimeoutError: train_gpt_patched.py ran past 300 s")
    text = "\n".join(check_report.train_markdown({"ok": True, **summary}))
    assert "- record FAILED: TimeoutError" in text and "- torch_ref FAILED: RuntimeError" in text


def test_a_run_past_its_limit_leaves_its_log(tmp_path):
    log = tmp_path / "run.log"
    code = "import time; print('step:1/30 train_time:26000ms', flush=True); time.sleep(30)"
    with pytest.raises(TimeoutError, match="ran past 1 s"):
        gpu_check.run_logged([sys.executable, "-c", code], log, timeout_s=1)
    assert "step:1/30 train_time:26000ms" in log.read_text() and "killed after 1 s" in log.read_text()
