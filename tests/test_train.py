"""jaxgpt.train: mesh data parallelism, resume, compile-once, the log a run writes.

The runs use a 4-layer, 64-wide model over a 512-token vocabulary (EOT = 511) so that a
compile plus a few steps takes seconds on 2 CPU cores; every per-layer feature of the record
(value-embedding slots, long and short windows, an attention-free layer, U-net skips) is kept.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

from jaxgpt import config as cfg
from jaxgpt import data
from jaxgpt import train as train_lib
from jaxgpt.testing import SMALL_VOCAB, small_model_config, synthetic_tokens

VOCAB = SMALL_VOCAB
STEPS = 6


def write_shards(folder: Path) -> tuple[str, str]:
    data.write_shard(folder / "tiny_train_000001.bin", synthetic_tokens(12_000, seed=1))
    data.write_shard(folder / "tiny_train_000002.bin", synthetic_tokens(12_000, seed=2))
    data.write_shard(folder / "tiny_val_000000.bin", synthetic_tokens(9_000, seed=3))
    return str(folder / "tiny_train_*.bin"), str(folder / "tiny_val_*.bin")


def small_preset(folder: Path, **train_fields) -> cfg.Preset:
    train_files, val_files = write_shards(folder)
    model = small_model_config()
    fields = dict(
        train_files=train_files, val_files=val_files, steps=STEPS, batch_tokens=8 * 256, seq_len=256,
        val_every=2, val_tokens=4 * 1024, window_max_tokens=512, devices=8, out_dir=str(folder / "out"),
    )
    fields.update(train_fields)
    # Newton-Schulz in fp32 here so that no bf16 rounding adds to the 8- vs 1-device drift.
    return cfg.Preset(model=model, optim=cfg.OptimConfig(ns_dtype="fp32"), train=cfg.TrainConfig(**fields))


def run_options(**fields) -> train_lib.RunOptions:
    """No progress bar; the session's compilation cache (conftest.py), so that the resumes below
    load the step that run8 or run1 compiled (a cached executable is the one compiled before:
    bitwise the same losses) instead of compiling it again."""
    return train_lib.RunOptions(progress=False, compile_cache=os.environ["JAXGPT_COMPILE_CACHE"], **fields)


@pytest.fixture(scope="module")
def run8(tmp_path_factory):
    """8 devices, one sequence each; val after steps 0, 2, 4, 6, checkpoints after 3 and 6 (so
    step 4 validates without saving)."""
    folder = tmp_path_factory.mktemp("run8")
    preset = small_preset(folder, checkpoint_every=3)
    return train_lib.train(preset, run_options(run_id="run8"))


@pytest.fixture(scope="module")
def run1(tmp_path_factory):
    """run8 on 1 device, with the same checkpoints."""
    folder = tmp_path_factory.mktemp("run1")
    return train_lib.train(small_preset(folder, devices=1, checkpoint_every=3),
                           run_options(run_id="run1"))


@pytest.mark.slow
def test_one_device_matches_eight_devices(run8, run1):
    assert sorted(run1.train_losses) == list(range(STEPS))
    assert sorted(run1.val_losses) == [0, 2, 4, STEPS]
    losses1 = np.array([run1.train_losses[s] for s in range(STEPS)] + [run1.val_losses[s] for s in (0, 2, 4, STEPS)])
    losses8 = np.array([run8.train_losses[s] for s in range(STEPS)] + [run8.val_losses[s] for s in (0, 2, 4, STEPS)])
    # Steps 0 and 1 (before and after the first update): only the fp32 summation order of the
    # mean loss and pmean-ed grads differs, ~1e-7.
    np.testing.assert_allclose(losses1[:2], losses8[:2], rtol=1e-6)
    # Later steps: Adam with eps 1e-10 turns a gradient entry that cancels to rounding level into
    # a full-size +-lr update whose sign follows the summation order (the world-size dependence
    # the record's script mentions), so the curves drift apart slowly: measured 6e-5 after 6 steps,
    # while the loss itself falls by ~0.2 per step.
    np.testing.assert_allclose(losses1, losses8, rtol=3e-4)
    for name, value in run8.params.items():
        # Same reason, per tensor in relative norm: measured <= 1.7e-2 (value embeddings) after 6 steps.
        a, b = run1.params[name].astype(np.float32), value.astype(np.float32)
        assert np.linalg.norm(a - b) <= 5e-2 * np.linalg.norm(b), name


@pytest.mark.slow
def test_loss_falls_and_step_compiles_once(run8):
    assert run8.val_losses[STEPS] < run8.val_losses[0] - 1.0
    assert math.isclose(run8.val_losses[0], math.log(VOCAB), rel_tol=1e-6)  # zero head: uniform logits
    windows = {json.loads(line)["window_blocks"] for line in run8.metrics_path.read_text().splitlines()}
    assert len(windows) >= 3, "the window must change during the run for this check to mean anything"
    assert run8.train_step_compiles == 1
    assert run8.eval_step_compiles == 1


@pytest.mark.slow
def test_saved_final_state_is_announced_with_the_sample_command(run8):
    text = run8.log_path.read_text()
    assert f"saved the final state to {run8.checkpoint_dir}" in text
    assert f"-m jaxgpt.sample --checkpoint {shlex.quote(str(run8.checkpoint_dir))} --prompt 'def '" in text


@pytest.mark.slow
@pytest.mark.parametrize("saved_on, resumed_on", [(1, 8), (8, 1)])
def test_a_run_saved_on_one_device_count_resumes_on_another(run1, run8, tmp_path, saved_on, resumed_on):
    """The global batch, the optimizer state and the schedules do not depend on the device
    count (train.devices is not compared on resume), so a checkpoint of step 3 saved on 1
    device continues on 8 devices, and back, along the saved run's own curve."""
    saved = {1: run1, 8: run8}[saved_on]
    resume_dir = tmp_path / "ckpt"
    shutil.copytree(saved.checkpoint_dir, resume_dir)
    shutil.rmtree(resume_dir / str(STEPS))
    moved = train_lib.train(
        cfg.Preset(model=saved.preset.model, optim=saved.preset.optim,
                   train=cfg.replace(saved.preset.train, devices=resumed_on, out_dir=str(tmp_path))),
        run_options(resume=str(resume_dir), run_id="moved"),
    )
    assert sorted(moved.train_losses) == [3, 4, 5]
    assert f"devices used {resumed_on} of" in moved.log_path.read_text()
    # Step 3: the same state and the same global batch; only the fp32 summation order of the
    # loss mean differs (~1e-7). Another batch would differ by far more than 1e-6.
    np.testing.assert_allclose(moved.train_losses[3], saved.train_losses[3], rtol=1e-6)
    # Then Adam's sign flips of near-cancelling gradient entries (see the 1- vs 8-device test):
    # the same 3e-4 as there, over 3 steps instead of 6.
    got = [moved.train_losses[s] for s in (3, 4, 5)] + [moved.val_losses[s] for s in (4, STEPS)]
    expected = [saved.train_losses[s] for s in (3, 4, 5)] + [saved.val_losses[s] for s in (4, STEPS)]
    print(f"saved on {saved_on}, resumed on {resumed_on}: max relative loss difference "
          f"{np.max(np.abs(np.subtract(got, expected)) / np.abs(expected)):.2e}")
    np.testing.assert_allclose(got, expected, rtol=3e-4)


@pytest.fixture(scope="module")
def resumed(run8, tmp_path_factory):
    """run8 resumed from its checkpoint of step 3 (as if it had died after saving it), with
    --sync: every step waited for before the next is dispatched."""
    folder = tmp_path_factory.mktemp("resumed")
    resume_dir = folder / "ckpt"
    shutil.copytree(run8.checkpoint_dir, resume_dir)
    shutil.rmtree(resume_dir / str(STEPS))
    preset = run8.preset
    return train_lib.train(
        cfg.Preset(model=preset.model, optim=preset.optim, train=cfg.replace(preset.train, out_dir=str(folder))),
        run_options(resume=str(resume_dir), run_id="resumed", sync=True, export_torch=str(folder / "final.pt")),
    )


@pytest.mark.slow
def test_resume_continues_exactly(run8, resumed):
    assert sorted(resumed.train_losses) == [3, 4, 5]
    for step in (3, 4, 5):
        # Same compiled program, same inputs, deterministic CPU kernels: bitwise equal.
        assert resumed.train_losses[step] == run8.train_losses[step]
    for name, value in run8.params.items():
        np.testing.assert_array_equal(resumed.params[name], value, err_msg=name)
    # --export-torch: the record's {"model": state_dict}, the same values.
    torch = pytest.importorskip("torch")
    exported = torch.load(resumed.log_path.parents[1] / "final.pt", map_location="cpu", weights_only=True)["model"]
    assert set(exported) == set(resumed.params)
    for name, value in resumed.params.items():
        np.testing.assert_array_equal(exported[name].float().numpy(), value.astype(np.float32), err_msg=name)


def _lines_from(run: train_lib.RunResult, shown_step: int) -> tuple[list[str], list[dict]]:
    """The record's log lines and the metrics records from the first one showing `shown_step`
    on, times (and the run id) removed."""
    lines = [re.sub(r" (train_time|step_avg):\S+", "", line) for line in run.log_path.read_text().splitlines()
             if VAL_LINE.match(line) or TRAIN_LINE.match(line)]
    records = [{key: value for key, value in json.loads(line).items() if key not in ("train_time_ms", "step_avg_ms", "run_id")}
               for line in run.metrics_path.read_text().splitlines()]
    first_line = next(i for i, line in enumerate(lines) if line.startswith(f"step:{shown_step}/"))
    first_record = next(i for i, record in enumerate(records) if record["step"] == shown_step)
    return lines[first_line:], records[first_record:]


@pytest.mark.slow
def test_asynchronous_loop_logs_what_the_synchronous_one_does(run8, resumed):
    # run8 reads each train loss one step late, with the next step already dispatched; `resumed`
    # (--sync) waits for every step. After update 4 of both: the same lines in the same order
    # (train 4, val 4 (no save there: the val alone must wait for the step in flight), train 5,
    # train 6, val 6) and the same metrics records, bitwise (times aside).
    async_lines, async_records = _lines_from(run8, 4)
    sync_lines, sync_records = _lines_from(resumed, 4)
    assert len(sync_lines) == 5 and async_lines == sync_lines
    assert async_records == sync_records


@pytest.mark.slow
def test_record_policy_trains_on_the_mesh(tmp_path):
    # bf16 + FP8 head (custom_vjp) under shard_map; 256 tokens per device, so the FP8 gradient
    # scale must shrink with the tokens per device (2^29 would overflow e5m2 to inf -> NaN).
    preset = small_preset(tmp_path, steps=3, val_every=3)
    preset = cfg.Preset(model=cfg.replace(preset.model, dtype_policy="record"), optim=preset.optim, train=preset.train)
    result = train_lib.train(preset, run_options(run_id="record"))
    assert train_lib.device_model_config(preset, 8).fp8_grad_scale == 2.0**29 * 256 / 65536
    assert all(math.isfinite(loss) for loss in result.train_losses.values())
    assert result.val_losses[3] < result.val_losses[0] - 0.3
    assert result.params["embed.weight"].dtype.name == "bfloat16"  # the record keeps the tables in bf16


VAL_LINE = re.compile(r"^step:(\d+)/(\d+) val_loss:(\d+\.\d{4}) train_time:(\d+)ms step_avg:(nan|\d+\.\d{2})ms$")
TRAIN_LINE = re.compile(r"^step:(\d+)/(\d+) train_time:(\d+)ms step_avg:(nan|\d+\.\d{2})ms train_loss:(\d+\.\d{4})$")


@pytest.mark.slow
def test_log_file_has_the_record_lines_and_environment(run8):
    lines = run8.log_path.read_text().splitlines()
    assert any(line.startswith("Running Python ") for line in lines)
    assert any(line.startswith("Running JAX ") for line in lines)
    assert any(line.startswith("config: ") for line in lines)
    val = [VAL_LINE.match(line) for line in lines if VAL_LINE.match(line)]
    trains = [TRAIN_LINE.match(line) for line in lines if TRAIN_LINE.match(line)]
    assert [int(m.group(1)) for m in val] == [0, 2, 4, STEPS]
    assert [int(m.group(1)) for m in trains] == list(range(1, STEPS + 1))
    assert all(int(m.group(2)) == STEPS for m in val + trains)
    assert float(val[-1].group(3)) == pytest.approx(run8.val_losses[STEPS], abs=5e-5)
    metrics = [json.loads(line) for line in run8.metrics_path.read_text().splitlines()]
    assert [m["step"] for m in metrics if m["kind"] == "train"] == list(range(1, STEPS + 1))
    assert [m["step"] for m in metrics if m["kind"] == "val"] == [0, 2, 4, STEPS]
