"""Several hosts through jax.distributed, run as 2 local processes over loopback.

Two processes with 2 virtual CPU devices each form one 4-device JAX job (coordinator on
127.0.0.1, cross-process collectives by gloo) and train the tiny model of tests/test_train.py
for a few steps; a single process with 4 devices runs the same config as the reference. The
test checks the loss curves agree, that each process reads only its own sequences of every
batch, that only process 0 writes the logs, and that the checkpoint the two processes save
together resumes in a single process. The same job then meets two faults through the command
line (docs/RELIABILITY.md): SIGTERM at different steps (one agreed step, exit 143, a bit-exact
resume) and a process killed with SIGKILL (the other names it and exits within the bound). The
runs share a compilation cache.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from jaxgpt import config as cfg
from jaxgpt import config_json, data
from jaxgpt import train as train_lib
from jaxgpt.run import checkpoint, interrupt, peers
from jaxgpt.run.cli import PROG
from jaxgpt.testing import (
    SMALL_VOCAB,
    free_port,
    kill_children,
    log_tail,
    small_model_config,
    start_children,
    synthetic_tokens,
    wait_children,
)

VOCAB = SMALL_VOCAB
STEPS = 4
SEQ_LEN = 256
NUM_PROCESSES, DEVICES_PER_PROCESS = 2, 2
CHILD_TIMEOUT_S = 150  # compile + 4 steps takes ~15 s; a hung rendezvous must not hang CI

REPO_ROOT = Path(__file__).resolve().parents[1]

# The child: joins the job through the CLI's distributed flags, records what its loader was
# asked for and the host-local batches it placed on the mesh, trains, and writes its losses.
RUNNER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from jaxgpt import config_json
    from jaxgpt import data
    from jaxgpt import train as train_lib

    config_path, coordinator, process_id, out_path = sys.argv[1:5]
    preset = config_json.preset_from_json(json.loads(open(config_path).read()))
    _, options = train_lib.parse_args([
        "--coordinator", coordinator, "--num-processes", "2", "--process-id", process_id,
        "--run-id", "multihost", "--no-progress", "--compile-cache", sys.argv[5],
    ])
    loader_calls, local_inputs = [], []
    real_loader, real_val, real_place = data.BatchLoader, data.val_batches, data.to_global_arrays

    def loader(*args, **kwargs):
        loader_calls.append(["BatchLoader", kwargs["process_index"], kwargs["process_count"]])
        return real_loader(*args, **kwargs)

    def val_batches(*args, **kwargs):
        loader_calls.append(["val_batches", kwargs["process_index"], kwargs["process_count"]])
        return real_val(*args, **kwargs)

    def place(batch, sharding):
        local_inputs.append(np.array(batch.inputs))
        return real_place(batch, sharding)

    data.BatchLoader, data.val_batches, data.to_global_arrays = loader, val_batches, place
    result = train_lib.train(preset, options)
    np.save(out_path + ".npy", np.stack(local_inputs))
    with open(out_path + ".json", "w") as file:
        json.dump({
            "train_losses": {str(k): v for k, v in result.train_losses.items()},
            "val_losses": {str(k): v for k, v in result.val_losses.items()},
            "loader_calls": loader_calls,
        }, file)
    """
)


# The command line (train.main: exit codes, messages) with the test's preset registered by name.
CLI_RUNNER = textwrap.dedent(
    """
    import json, sys
    from jaxgpt import config_json, presets
    from jaxgpt import train as train_lib

    preset = config_json.preset_from_json(json.loads(open(sys.argv[1]).read()))
    presets.PRESETS["multihost"] = lambda: preset
    sys.exit(train_lib.main(["--preset", "multihost", *sys.argv[2:]]))
    """
)


def make_preset(folder: Path, out_dir: Path) -> cfg.Preset:
    data.write_shard(folder / "mh_train_000001.bin", synthetic_tokens(8_000, seed=11))
    data.write_shard(folder / "mh_val_000000.bin", synthetic_tokens(4_000, seed=12))
    model = small_model_config()
    train = cfg.TrainConfig(
        train_files=str(folder / "mh_train_*.bin"), val_files=str(folder / "mh_val_*.bin"), steps=STEPS,
        batch_tokens=4 * SEQ_LEN, seq_len=SEQ_LEN, val_every=2, val_tokens=2 * 4 * SEQ_LEN,
        window_max_tokens=512, devices=NUM_PROCESSES * DEVICES_PER_PROCESS, out_dir=str(out_dir),
    )
    # fp32 Newton-Schulz so no bf16 rounding can hide a real difference between the two runs.
    return cfg.Preset(model=model, optim=cfg.OptimConfig(ns_dtype="fp32"), train=train)


def child_environment(devices_per_process: int = DEVICES_PER_PROCESS) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices_per_process}",
        JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo",  # jax 0.10.2's default too; explicit for older jaxlibs
        PYTHONPATH=str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    for name in ("JAX_COORDINATOR_ADDRESS", "JAXGPT_DISTRIBUTED"):
        env.pop(name, None)
    return env


def child_logs(folder: Path, count: int) -> list[Path]:
    return [folder / f"child{process_id}.log" for process_id in range(count)]


def start_processes(folder: Path, commands: list[list[str]], envs: list[dict[str, str]]) -> list[subprocess.Popen]:
    """One child per command, its stdout and stderr in folder/child<p>.log."""
    return start_children(commands, envs, child_logs(folder, len(commands)), folder)


def wait_for(folder: Path, children: list[subprocess.Popen], timeout_s: float = CHILD_TIMEOUT_S) -> list[int]:
    """The children's exit codes; fails the test (and kills them) when one is still running
    after `timeout_s`: a hang must not hang CI."""
    return wait_children(children, child_logs(folder, len(children)), timeout_s)


def run_two_processes(tmp_path: Path, preset: cfg.Preset, cache: Path) -> list[tuple[str, dict, np.ndarray]]:
    """(stdout+stderr, result json, local inputs) per process; kills both children on any failure."""
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config_json.config_to_json(preset)))
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    coordinator = f"127.0.0.1:{free_port()}"
    commands = [[sys.executable, str(runner), str(config_path), coordinator, str(process_id),
                 str(tmp_path / f"result{process_id}"), str(cache)] for process_id in range(NUM_PROCESSES)]
    codes = wait_for(tmp_path, start_processes(tmp_path, commands, [child_environment()] * NUM_PROCESSES))
    for process_id, code in enumerate(codes):
        assert code == 0, f"process {process_id} exited {code}:\n" + _tail(tmp_path, process_id)
    return [
        (
            (tmp_path / f"child{p}.log").read_text(),
            json.loads((tmp_path / f"result{p}.json").read_text()),
            np.load(tmp_path / f"result{p}.npy"),
        )
        for p in range(NUM_PROCESSES)
    ]


def _tail(tmp_path: Path, process_id: int) -> str:
    return log_tail(tmp_path / f"child{process_id}.log")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One compilation cache for this module's children: the runs below compile the same steps
    (a cached executable is the one compiled before: bitwise the same losses)."""
    return tmp_path_factory.mktemp("compile_cache")


@pytest.fixture(scope="module")
def multi_run(tmp_path_factory, cache):
    """The 2-process, 4-device run, checkpoints after steps 2 and 4: (folder, preset, its
    preset with the checkpoints, the children's outputs)."""
    folder = tmp_path_factory.mktemp("multihost")
    preset = make_preset(folder, folder / "out_multi")
    multi_preset = cfg.Preset(model=preset.model, optim=preset.optim, train=cfg.replace(preset.train, checkpoint_every=2))
    return folder, preset, multi_preset, run_two_processes(folder, multi_preset, cache)


@pytest.mark.slow
def test_two_processes_match_one_process(multi_run, tmp_path, monkeypatch):
    folder, preset, multi_preset, children = multi_run

    # Reference: one process, 4 of conftest's 8 virtual devices, the same global batch.
    single_inputs = []
    real_place = data.to_global_arrays

    def place(batch, sharding):
        single_inputs.append(np.array(batch.inputs))
        return real_place(batch, sharding)

    monkeypatch.setattr(data, "to_global_arrays", place)
    single = train_lib.train(
        cfg.Preset(model=preset.model, optim=preset.optim,
                   train=cfg.replace(preset.train, out_dir=str(tmp_path / "out_single"))),
        # The session's compilation cache (conftest.py): the resume below loads this step.
        train_lib.RunOptions(run_id="single", progress=False, compile_cache=os.environ["JAXGPT_COMPILE_CACHE"]),
    )

    val_steps = [0, 2, STEPS]
    expected = [single.train_losses[s] for s in range(STEPS)] + [single.val_losses[s] for s in val_steps]
    for process_id, (output, result, _) in enumerate(children):
        got = [result["train_losses"][str(s)] for s in range(STEPS)] + [result["val_losses"][str(s)] for s in val_steps]
        assert len(result["train_losses"]) == STEPS and len(result["val_losses"]) == len(val_steps)
        # Same 4-device mesh, same per-device sequences, same program: before the second update
        # (train steps 0-1, val step 0) the losses are bitwise equal here, so 1e-6 is pure headroom.
        np.testing.assert_allclose(got[:2] + got[STEPS:STEPS + 1], expected[:2] + expected[STEPS:STEPS + 1], rtol=1e-6)
        # Later the pmean's all-reduce (gloo across processes vs XLA's in-process one) sums the 4
        # fp32 partial gradients in another order (~1e-7), which Adam's eps 1e-10 turns into +-lr
        # sign flips of near-cancelling entries: measured 4.8e-5 at step 4 (tests/test_train.py
        # uses 3e-4 for the same drift). Wrong slices are caught exactly by the batch check below.
        print(f"process {process_id}: max relative loss difference {np.max(np.abs(np.subtract(got, expected)) / np.abs(expected)):.2e}")
        np.testing.assert_allclose(got, expected, rtol=3e-4, err_msg=f"process {process_id}")
        assert expected[-1] < expected[0] - 0.3, "the loss must fall for the comparison to mean anything"

    # Each process asked its loaders for its own slice only, and the host-local batches it
    # placed are exactly its half of each global batch the single process placed.
    assert len(single_inputs) == STEPS + len(val_steps) * 2
    for process_id, (_, result, local_inputs) in enumerate(children):
        calls = [tuple(call) for call in result["loader_calls"]]
        # val_batches builds a BatchLoader of its own, so one BatchLoader per evaluation plus the train one.
        assert calls.count(("val_batches", process_id, NUM_PROCESSES)) == len(val_steps)
        assert calls.count(("BatchLoader", process_id, NUM_PROCESSES)) == len(val_steps) + 1
        assert len(calls) == 2 * len(val_steps) + 1, calls
        assert local_inputs.shape == (len(single_inputs), 2, SEQ_LEN)
        for index, global_inputs in enumerate(single_inputs):
            np.testing.assert_array_equal(local_inputs[index], global_inputs[2 * process_id : 2 * process_id + 2])

    # Only process 0 logs: one text log and one metrics file, and process 1 prints no step lines.
    logs = sorted(path.name for path in (folder / "out_multi" / "logs").iterdir())
    assert logs == ["multihost.jsonl", "multihost.txt"]
    text_log = (folder / "out_multi" / "logs" / "multihost.txt").read_text()
    assert "processes 2 (this is 0)" in text_log
    assert f"step:{STEPS}/{STEPS} val_loss:" in children[0][0]
    assert "step:" not in children[1][0]

    # The two processes saved one checkpoint together (orbax, shared folder); a single process
    # resumes it from step 2 and continues the multi-host curve.
    resume_dir = tmp_path / "resume"
    shutil.copytree(folder / "out_multi" / "checkpoints" / "multihost", resume_dir)
    shutil.rmtree(resume_dir / str(STEPS))
    resumed = train_lib.train(
        cfg.Preset(model=preset.model, optim=preset.optim,
                   train=cfg.replace(multi_preset.train, out_dir=str(tmp_path / "out_resumed"))),
        train_lib.RunOptions(resume=str(resume_dir), run_id="resumed", progress=False,
                             compile_cache=os.environ["JAXGPT_COMPILE_CACHE"]),
    )
    multi_losses = children[0][1]["train_losses"]
    assert sorted(resumed.train_losses) == [2, 3]
    for step in (2, 3):
        # Same state as the multi-host run at step 2; only the all-reduce order differs (see
        # above; measured: losses bitwise equal, params within 1e-7 except Adam sign flips).
        print(f"resumed step {step}: relative difference {abs(resumed.train_losses[step] / multi_losses[str(step)] - 1):.2e}")
        np.testing.assert_allclose(resumed.train_losses[step], multi_losses[str(step)], rtol=1e-5)


# Faults of a multi-process run: a preempted job, a dead process (docs/RELIABILITY.md) ----------


def run_command_line(folder: Path, preset: cfg.Preset, args: list[str], cache: Path,
                     signals: tuple[str | None, ...] = (None, None)) -> list[subprocess.Popen]:
    """Start `python -m jaxgpt.train`'s main in 2 processes of 2 devices each with `preset`;
    `signals[p]`: interrupt.TEST_SIGNAL_AT_STEP for process p ("STEP:SIGNAL") or None."""
    folder.mkdir()
    config_path = folder / "config.json"
    config_path.write_text(json.dumps(config_json.config_to_json(preset)))
    runner = folder / "runner.py"
    runner.write_text(CLI_RUNNER)
    coordinator = f"127.0.0.1:{free_port()}"
    commands, envs = [], []
    for process_id, at_step in enumerate(signals):
        commands.append([sys.executable, str(runner), str(config_path), *args, "--no-progress", "--compile-cache",
                         str(cache), "--coordinator", coordinator, "--num-processes", "2", "--process-id", str(process_id)])
        envs.append({**child_environment(), **({interrupt.TEST_SIGNAL_AT_STEP: at_step} if at_step else {})})
    return start_processes(folder, commands, envs)


@pytest.mark.slow
def test_sigterm_at_different_steps_stops_both_processes_at_one_step_and_resumes_bit_exactly(multi_run, cache):
    """A preempted job: process 0 gets SIGTERM at the top of step 1, process 1 at step 2 (as a
    scheduler's signals land at different moments). Step 1 carries the stop flag to every
    device; both read it with step 1's loss when they validate at the top of step 2 and stop
    there: one checkpoint of step 2 saved by both (checkpoints are every 3 steps otherwise),
    exit 143 each. Resumed by 2 processes, the run ends bitwise where the uninterrupted
    2-process run ended (same program, same gloo reduction order, fp32)."""
    folder, _, multi_preset, _ = multi_run
    out = folder / "out_preempted"
    children = run_command_line(folder / "preempted", multi_preset,
                                ["--out-dir", str(out), "--run-id", "p", "--checkpoint-every", "3"], cache,
                                signals=("1:SIGTERM", "2:SIGTERM"))
    codes = wait_for(folder / "preempted", children)
    directory = out / "checkpoints" / "p"
    for process_id, code in enumerate(codes):
        output = _tail(folder / "preempted", process_id)
        assert code == 143, f"process {process_id} exited {code}:\n{output}"
        assert f"interrupted by SIGTERM at step 2; the state after step 2 is in {directory}" in output, output
    assert checkpoint.completed_steps(directory) == [2]
    assert not [path for path in directory.iterdir() if "tmp" in path.name]

    children = run_command_line(folder / "resumed_cli", multi_preset,
                                ["--resume", str(directory), "--run-id", "r", "--out-dir", str(out)], cache)
    codes = wait_for(folder / "resumed_cli", children)
    assert codes == [0, 0], _tail(folder / "resumed_cli", 0) + _tail(folder / "resumed_cli", 1)
    resumed, meta = checkpoint.restore_params(directory, STEPS)
    uninterrupted, _ = checkpoint.restore_params(folder / "out_multi" / "checkpoints" / "multihost", STEPS)
    assert meta["step"] == STEPS and sorted(resumed) == sorted(uninterrupted)
    for name, value in uninterrupted.items():
        np.testing.assert_array_equal(np.asarray(resumed[name]), np.asarray(value), err_msg=name)
    losses = [json.loads(line) for line in (folder / "out_multi" / "logs" / "multihost.jsonl").read_text().splitlines()]
    resumed_losses = [json.loads(line) for line in (out / "logs" / "r.jsonl").read_text().splitlines()]
    assert [r["train_loss"] for r in resumed_losses if r["kind"] == "train"] == \
           [r["train_loss"] for r in losses if r["kind"] == "train" and r["step"] > 2]


@pytest.mark.slow
def test_a_killed_process_ends_the_other_with_its_name_within_the_bound(multi_run, cache):
    """Process 1 dies by SIGKILL at the top of step 5 (saves every 2 steps). Process 0 then
    waits for step 5's all-reduce, which never completes (its ring also runs through process 0's
    own second device, so gloo sees no closed connection): its peers.PeerWatch finds process 1's
    counter silent for --peer-timeout (10 s here, 20 s by default; a live process on a loaded CI
    machine still beats within it), says which process is gone and where the newest complete
    checkpoint is, and exits 1 instead of waiting for JAX's heartbeat timeout and aborting. The
    checkpoint named restores; the unfinished save of step 4 stays a *-tmp folder."""
    folder, _, multi_preset, _ = multi_run
    out = folder / "out_killed"
    children = run_command_line(folder / "killed", multi_preset,
                                ["--out-dir", str(out), "--run-id", "k", "--steps", "40", "--cycle-data",
                                 "--peer-timeout", "10"], cache,
                                signals=(None, "5:SIGKILL"))
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        while children[1].poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        killed_at = time.monotonic()
        code = children[0].wait(timeout=max(1.0, deadline - time.monotonic()) + peers.HEARTBEAT_TIMEOUT_S)
        seconds = time.monotonic() - killed_at
    finally:
        kill_children(children)
    output = _tail(folder / "killed", 0)
    print(f"process 0 ended {seconds:.1f} s after process 1 was killed")
    assert children[1].returncode == -signal.SIGKILL, _tail(folder / "killed", 1)
    assert code == 1 and seconds <= peers.HEARTBEAT_TIMEOUT_S, output
    directory = out / "checkpoints" / "k"
    steps = checkpoint.completed_steps(directory)
    assert steps and steps[-1] in (2, 4), steps
    lines = [line for line in output.splitlines() if line.startswith(f"{PROG}: error: ")]
    assert lines == [line for line in lines if "process 1 of this 2-process run is gone (silent for 10 s)" in line
                     and f"The newest complete checkpoint is step {steps[-1]} in {directory}" in line], output
    assert len(lines) == 1 and "Traceback" not in output
    params, meta = checkpoint.restore_params(directory)
    assert meta["step"] == steps[-1]
    assert all(np.isfinite(np.asarray(value, dtype=np.float32)).all() for value in params.values())
