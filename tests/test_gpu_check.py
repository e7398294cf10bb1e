"""scripts/gpu_check.py --dry-run: the lent-GPU command runs end to end on the CPU at tiny sizes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxgpt.data import write_shard
from jaxgpt.testing import synthetic_tokens

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_check_dry_run_writes_the_report(tmp_path):
    # GPT-2's EOT id, since the dry run trains the tiny preset (GPT-2 vocabulary).
    write_shard(tmp_path / "train_000.bin", synthetic_tokens(20_000, seed=0, eot_id=50256))
    write_shard(tmp_path / "val_000.bin", synthetic_tokens(4_096, seed=1, eot_id=50256))
    out = tmp_path / "check"
    done = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--dry-run", "--out", str(out),
         "--train-files", str(tmp_path / "train_*.bin"), "--val-files", str(tmp_path / "val_*.bin")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
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
        assert run["steps_logged"] == 12 and run["step_ms_median"] > 0 and run["val_losses"]
    assert train["ratio_jax_over_torch"] > 0
    text = (out / "gpu_check.md").read_text()
    assert "Dry run on the CPU" in text and "| jaxgpt |" in text and "| torch_ref |" in text
