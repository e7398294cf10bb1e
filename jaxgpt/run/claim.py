"""What a jaxgpt run settles before jax is imported: whether it is one process, its run id,
that its outputs are writable, and the locks on every place it writes (jaxgpt.run.lock).

`python -m jaxgpt.train` imports jax, flax and orbax (seconds) only once a one-process run holds
its folders (`claim_one_process`), so a second run on a live run's folders is refused in a
fraction of a second (docs/RELIABILITY.md). A run of several processes is the exception: only
process 0 takes the locks and the others learn its answer through jax.distributed's key-value
store, which needs jax, so preflight.start_run takes them there once jax.distributed has joined
every process (the refusal then waits for jax's import and for the last process to join).
Imports no jax (tests/run/test_lock.py checks it).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jaxgpt import config as cfg
from jaxgpt.run.cli import RunOptions
from runkit import checkpoint, lock, names, places

SLURM_TASK_VARIABLES = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")


def cluster_launcher(environ: Mapping[str, str] = os.environ) -> str | None:
    """"slurm" when this process is one of several tasks of an `srun` job step, "ompi" when one
    of several Open MPI ranks (`mpirun`), else None: JAX's cluster detection method that reads
    the coordinator, the process count and this process's index from that environment.
    A lone task (an `sbatch` script itself, `salloc`'s shell, `srun -n 1`) is not a cluster."""
    if all(name in environ for name in SLURM_TASK_VARIABLES) and int(environ["SLURM_NTASKS"]) > 1:
        return "slurm"
    if int(environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
        return "ompi"
    return None


def distributed_arguments(options: RunOptions, environ: Mapping[str, str] = os.environ) -> dict[str, Any] | None:
    """The arguments of `jax.distributed.initialize` for this process, None for a one-process
    run. Explicit flags win, JAX fills in what they leave out (from $JAX_COORDINATOR_ADDRESS or
    the launcher's environment, `cluster_launcher`); under SLURM and Open MPI each process
    sees one local device, its local rank's (launch one task per GPU)."""
    from_env = bool(environ.get("JAX_COORDINATOR_ADDRESS")) or environ.get("JAXGPT_DISTRIBUTED") == "1"
    launcher = cluster_launcher(environ)
    if options.coordinator is None and options.num_processes is None and not from_env and launcher is None:
        return None
    kwargs: dict[str, Any] = {"coordinator_address": options.coordinator, "num_processes": options.num_processes,
                              "process_id": options.process_id}
    if launcher == "ompi" and "OMPI_MCA_orte_hnp_uri" not in environ:
        # Open MPI 5 sets no ORTE URI, from which JAX's detection reads the coordinator.
        if options.coordinator is None and not environ.get("JAX_COORDINATOR_ADDRESS"):
            raise ValueError("this Open MPI (5 or later) sets no OMPI_MCA_orte_hnp_uri, from which JAX reads the "
                             "coordinator: pass --coordinator HOST:PORT (a free port on rank 0's host)")
        kwargs["num_processes"] = options.num_processes or int(environ["OMPI_COMM_WORLD_SIZE"])
        kwargs["process_id"] = options.process_id if options.process_id is not None else int(environ["OMPI_COMM_WORLD_RANK"])
        kwargs["local_device_ids"] = [int(environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))]
    elif launcher is not None:
        kwargs["cluster_detection_method"] = launcher
    return {name: value for name, value in kwargs.items() if value is not None}


def check_outputs(preset: cfg.Preset, options: RunOptions) -> None:
    """Every place the run writes to takes a file (runkit.places.check_outputs)."""
    places.check_outputs(preset.train.out_dir, resume=options.resume, export=options.export_torch,
                         tensorboard=options.tensorboard)


def run_id_of(options: RunOptions) -> str:
    """The run's id: --run-id (a plain name, runkit.names), else a fresh uuid4."""
    return names.plain_name(options.run_id) if options.run_id is not None else str(uuid.uuid4())


def places_of(preset: cfg.Preset, options: RunOptions, run_id: str) -> list[lock.Place]:
    """Every place the run `run_id` writes (runkit.places.run_places), its outputs checked first."""
    check_outputs(preset, options)
    return places.run_places(preset.train.out_dir, run_id, resume=options.resume, export=options.export_torch,
                               saves=checkpoint.saves(preset.train, options.save_checkpoint),
                               tensorboard=options.tensorboard)


@dataclass(frozen=True)
class Claim:
    """A run's id and the locks it holds, taken before jax (handed to preflight.start_run)."""

    run_id: str
    lock: lock.RunLock


def claim_one_process(preset: cfg.Preset, options: RunOptions) -> Claim | None:
    """A one-process run's id and locks (stale-lock notes printed); None for a run of several
    processes (flags, JAX's variables or a launcher's environment ask for jax.distributed),
    whose locks process 0 takes once every process has joined (jaxgpt.run.lock.take_for_processes).
    Raises FolderInUseError (another live run holds a place) or ValueError (a run id that is
    not a plain name, an unwritable output)."""
    if distributed_arguments(options) is not None:
        return None
    run_id = run_id_of(options)
    return Claim(run_id, lock.announce(lock.RunLock(places_of(preset, options, run_id)).acquire()))
