"""Cluster launchers: a run started by SLURM's srun or Open MPI's mpirun joins jax.distributed
from the launcher's environment, with no distributed flags.

The arguments for each environment are checked directly; then 2 local processes whose
environment imitates an srun step of 2 tasks (coordinator on 127.0.0.1, gloo) train together.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sys
import textwrap
from pathlib import Path

import pytest

from jaxgpt import config as cfg
from jaxgpt import config_json, data
from jaxgpt.run import preflight
from jaxgpt.run.cli import RunOptions
from jaxgpt.testing import log_tail, small_model_config, start_children, synthetic_tokens, wait_children

REPO_ROOT = Path(__file__).resolve().parents[1]
CHILD_TIMEOUT_S = 300  # compile + 2 steps: ~15 s idle, 146 s seen at load 20 on 2 cores; a hung rendezvous must not hang CI
SLURM_STEP = {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "node[003-004]", "SLURM_NTASKS": "16",
              "SLURM_PROCID": "9", "SLURM_LOCALID": "1"}


def test_no_launcher_and_no_flags_is_one_process():
    assert preflight.distributed_arguments(RunOptions(), {}) is None
    # An sbatch script itself, or an srun step of one task, is one process.
    assert preflight.distributed_arguments(RunOptions(), {**SLURM_STEP, "SLURM_NTASKS": "1"}) is None
    batch_script = {name: value for name, value in SLURM_STEP.items() if name != "SLURM_STEP_NODELIST"}
    assert preflight.distributed_arguments(RunOptions(), batch_script) is None
    assert preflight.distributed_arguments(RunOptions(), {"OMPI_COMM_WORLD_SIZE": "1"}) is None


def test_srun_step_uses_jax_slurm_detection():
    assert preflight.distributed_arguments(RunOptions(), SLURM_STEP) == {"cluster_detection_method": "slurm"}
    # Explicit flags win over the environment; JAX fills in the rest from it.
    assert preflight.distributed_arguments(RunOptions(coordinator="h:1"), SLURM_STEP) == {
        "coordinator_address": "h:1", "cluster_detection_method": "slurm"}


def test_open_mpi_ranks():
    ompi4 = {"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "3",
             "OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.0.0.1:34911"}
    assert preflight.distributed_arguments(RunOptions(), ompi4) == {"cluster_detection_method": "ompi"}
    ompi5 = {name: value for name, value in ompi4.items() if name != "OMPI_MCA_orte_hnp_uri"}
    with pytest.raises(ValueError, match="pass --coordinator HOST:PORT"):
        preflight.distributed_arguments(RunOptions(), ompi5)
    assert preflight.distributed_arguments(RunOptions(coordinator="h:1"), ompi5) == {
        "coordinator_address": "h:1", "num_processes": 8, "process_id": 3, "local_device_ids": [3]}


def test_flags_alone():
    options = RunOptions(coordinator="h:1", num_processes=2, process_id=1)
    assert preflight.distributed_arguments(options, {}) == {"coordinator_address": "h:1", "num_processes": 2, "process_id": 1}
    assert preflight.distributed_arguments(RunOptions(), {"JAXGPT_DISTRIBUTED": "1"}) == {}


# The child: no distributed flag at all; the SLURM variables of its environment decide.
RUNNER = textwrap.dedent(
    """
    import json, sys
    import jax
    from jaxgpt import config_json
    from jaxgpt import train as train_lib

    config_path, out_path = sys.argv[1:3]
    preset = config_json.preset_from_json(json.loads(open(config_path).read()))
    _, options = train_lib.parse_args(["--run-id", "slurm", "--no-progress"])
    result = train_lib.train(preset, options)
    with open(out_path, "w") as file:
        json.dump({"process": [jax.process_index(), jax.process_count()], "devices": jax.local_device_count(),
                   "train_losses": {str(k): v for k, v in result.train_losses.items()}}, file)
    """
)


def free_slurm_port() -> tuple[int, int]:
    """(job id, port) such that JAX's SLURM detection picks this free loopback port (it uses
    job id % 4096 + 61440)."""
    candidates = list(range(61440, 65536))
    random.shuffle(candidates)
    for port in candidates:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port - 61440, port
    raise RuntimeError("no free port in 61440..65535")


@pytest.mark.slow
def test_two_tasks_of_an_srun_step_join_one_run(tmp_path):
    data.write_shard(tmp_path / "sl_train_000001.bin", synthetic_tokens(4_000, seed=41))
    train = cfg.TrainConfig(
        train_files=str(tmp_path / "sl_train_*.bin"), val_files=str(tmp_path / "sl_val_*.bin"), steps=2,
        batch_tokens=2 * 256, seq_len=256, val_tokens=0, window_max_tokens=512, devices=2, out_dir=str(tmp_path / "out"),
    )
    preset = cfg.Preset(model=small_model_config(), optim=cfg.OptimConfig(), train=train)
    (tmp_path / "config.json").write_text(json.dumps(config_json.config_to_json(preset)))
    (tmp_path / "runner.py").write_text(RUNNER)
    job_id, _ = free_slurm_port()
    base = {name: value for name, value in os.environ.items()
            if not name.startswith(("SLURM_", "OMPI_", "JAX_COORDINATOR", "JAXGPT_DISTRIBUTED"))}
    base.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1",
                JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo",
                PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                SLURM_JOB_ID=str(job_id), SLURM_STEP_NODELIST="127.0.0.1", SLURM_NTASKS="2", SLURM_STEP_NUM_NODES="1")
    logs = [tmp_path / f"task{task}.log" for task in range(2)]
    children = start_children(
        [[sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "config.json"), str(tmp_path / f"task{task}.json")]
         for task in range(2)],
        [{**base, "SLURM_PROCID": str(task), "SLURM_LOCALID": str(task)} for task in range(2)], logs, tmp_path)
    codes = wait_children(children, logs, CHILD_TIMEOUT_S, name="task")
    for task, code in enumerate(codes):
        assert code == 0, f"task {task} exited {code}:\n" + log_tail(logs[task])
    results = [json.loads((tmp_path / f"task{task}.json").read_text()) for task in range(2)]
    # Task p became process p of 2, each with its one device; the losses are global, so equal.
    assert [result["process"] for result in results] == [[0, 2], [1, 2]]
    assert [result["devices"] for result in results] == [1, 1]
    assert results[0]["train_losses"] == results[1]["train_losses"] and len(results[0]["train_losses"]) == 2
    assert "joined 2 processes from the SLURM environment" in (tmp_path / "task0.log").read_text()
    assert "processes 2 (this is 0)" in (tmp_path / "out" / "logs" / "slurm.txt").read_text()
