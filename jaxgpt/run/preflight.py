"""Everything a run checks and opens before anything compiles: devices, output paths, the
checkpoint to resume, the run's geometry and its data.

`python -m jaxgpt.train` calls `start_run` before building the model, so a bad flag, a short
or foreign shard, or an unwritable folder costs seconds, not a compilation (or a finished run
whose final save then fails). Each check raises ValueError (or data's own errors) naming the
problem and the flag that fixes it. Mirrors torch_ref.run.preflight; the checks both make alike
are runkit's (runkit.preflight, runkit.profiling).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from jaxgpt import config as cfg
from jaxgpt import data
from jaxgpt.data import DataPosition
from jaxgpt.run import checkpoint, compile_cache, convert, peers
from jaxgpt.run import lock as run_lock
from jaxgpt.run.cli import RunOptions
from runkit import names
from runkit.lock import NoLock, RunLock
from runkit.preflight import check_shard_digests, check_writable
from runkit.profiling import check_window


def check_geometry(preset: cfg.Preset, num_devices: int, process_count: int) -> None:
    """The global batch splits over the devices and processes, the sequence fits the rotary
    table, and every evaluation reads whole global batches (as the record)."""
    train = preset.train
    if train.sequences_per_step % num_devices:
        raise ValueError(
            f"global batch of {train.batch_tokens} tokens = {train.sequences_per_step} sequences of {train.seq_len} "
            f"cannot be split over {num_devices} devices: batch_tokens must be a multiple of "
            f"seq_len * devices = {train.seq_len * num_devices}"
        )
    if num_devices % process_count:
        raise ValueError(f"{num_devices} devices cannot be split evenly over {process_count} processes")
    if train.seq_len > preset.model.rope_max_len:
        raise ValueError(f"seq_len {train.seq_len} exceeds the rotary table length {preset.model.rope_max_len}")
    if train.val_tokens % train.batch_tokens:
        raise ValueError(
            f"val_tokens {train.val_tokens} must be a multiple of batch_tokens {train.batch_tokens} "
            "(each evaluation reads whole global batches, as the record)"
        )


def scan_shards(preset: cfg.Preset, start_step: int, start: DataPosition, *, announce: bool = True,
                verify_shards: bool = False) -> None:
    """Every shard the run can reach (its SHA-256 against meta.json's, headers, lengths, one
    batch each, token ids below the vocabulary) and enough batches: val_tokens of validation,
    and steps start_step.. of training unless the data cycles. `announce`: print the notes on
    shard folders without a completion marker, and on shards unchecked (process 0 only); `verify_shards`:
    hash every shard even when its identity is unchanged since it was last hashed."""
    train = preset.train
    train_files = data.list_shards(train.train_files)  # refuses a folder whose build never finished
    val_or_none = data.list_shards(train.val_files) if train.val_tokens else []
    for folder in data.check_shard_folders(train_files + val_or_none) if announce else ():
        print(f"note: {folder} has no {data.COMPLETE_MARKER} marker (shards not written by make_shards); "
              "using them as they are", file=sys.stderr)
    reachable = train_files if train.cycle_data else train_files[start.shard_index:]
    # A changed byte is another token, read silently: each shard is hashed once per file identity.
    notes = check_shard_digests(reachable + val_or_none, full=verify_shards)  # refuses a changed shard
    for note in notes if announce else ():
        print(note, file=sys.stderr)
    data.check_shards(reachable, train.batch_tokens, preset.model.vocab_size)
    if train.val_tokens:
        val_files = data.list_shards(train.val_files)
        data.check_shards(val_files, train.batch_tokens, preset.model.vocab_size)
        if data.batches_available(val_files, train.batch_tokens) < train.val_tokens // train.batch_tokens:
            raise ValueError(
                f"validation needs {train.val_tokens} tokens (+1) from {train.val_files!r}, which holds fewer "
                f"whole batches of {train.batch_tokens}; lower --val-tokens"
            )
    if not train.cycle_data:
        # With #8/#9's repeated first batch, steps 0 and 1 share one batch of the stream.
        needed = train.steps - start_step - int(train.lineage.repeat_first_batch and start_step == 0 and train.steps > 1)
        available = data.batches_available(train_files, train.batch_tokens, start, train.lineage.shard_switch, train.lineage.data_ranks)
        if available < needed:
            raise ValueError(
                f"training data exhausted: steps {start_step}..{train.steps - 1} need {needed} batches of {train.batch_tokens} "
                f"tokens, but the {len(train_files)} shard(s) matching {train.train_files!r} hold {available}; "
                "add shards, lower --steps, or pass --cycle-data"
            )


def check_run(preset: cfg.Preset, num_devices: int, process_count: int, start_step: int, start: DataPosition,
              *, announce: bool = True, verify_shards: bool = False) -> None:
    """The geometry, then the shard scan (the geometry's messages name the cheaper fix)."""
    check_geometry(preset, num_devices, process_count)
    scan_shards(preset, start_step, start, announce=announce, verify_shards=verify_shards)


def check_outputs(preset: cfg.Preset, options: RunOptions) -> None:
    """Every place the run writes to (--out-dir with its logs and checkpoints, --resume,
    --export-torch's folder, --tensorboard) is writable; --export-torch does not name a folder."""
    check_writable(Path(preset.train.out_dir), "--out-dir")
    if options.resume is not None and Path(options.resume).is_dir():
        check_writable(Path(options.resume), "--resume directory")
    if options.export_torch is not None:
        target = Path(options.export_torch)
        if target.is_dir():
            raise ValueError(f"--export-torch {target} is a directory; give a file path such as {target / 'model.pt'}")
        check_writable(target.parent, "--export-torch folder")
    if options.tensorboard is not None:
        check_writable(Path(options.tensorboard), "--tensorboard")


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


def maybe_initialize_distributed(options: RunOptions) -> None:
    """Join a multi-process run when the flags, JAX's variables or a launcher ask for it
    (process p then reads only its own sequences of every batch)."""
    kwargs = distributed_arguments(options)
    if kwargs is None:
        return
    jax.distributed.initialize(**kwargs, heartbeat_timeout_seconds=peers.HEARTBEAT_TIMEOUT_S)
    launcher = cluster_launcher()
    if launcher is not None and jax.process_index() == 0:
        print(f"note: joined {jax.process_count()} processes from the {'SLURM' if launcher == 'slurm' else 'Open MPI'} "
              f"environment, {jax.local_device_count()} device(s) each", file=sys.stderr)


def select_devices(requested: int | None) -> list:
    """The first `requested` devices (all when None); several hosts must use all of them."""
    available = jax.devices()
    if requested is None:
        return available
    if requested < 1 or requested > len(available):
        raise ValueError(f"--devices {requested} asked for, but {len(available)} device(s) are visible")
    if jax.process_count() > 1 and requested != len(available):
        raise ValueError(f"with {jax.process_count()} processes all {len(available)} devices must be used")
    return available[:requested]


@dataclass(frozen=True)
class RunStart:
    """Where a run starts, once everything that can fail before compiling has been checked."""

    preset: cfg.Preset  # a resumed run's checkpoint cadence kept (checkpoint.keep_saved_cadence)
    devices: list
    run_id: str
    checkpointer: checkpoint.Checkpointer | None  # None: the run saves nothing
    step: int  # updates already applied: 0, or the resumed checkpoint's step
    position: DataPosition  # of the training data at `step`
    saved_meta: dict[str, Any] | None  # the resumed checkpoint's meta
    init_state: dict[str, Any] | None  # the --init-from state dict, read once (convert.init_preset)
    lock: RunLock | NoLock  # the run's folders, held until the run ends (runkit.lock)


def start_run(preset: cfg.Preset, options: RunOptions) -> RunStart:
    """Join the hosts, pick the devices, check the outputs, open the checkpoint to resume and
    the --init-from file, then check the geometry and the data: where the run starts."""
    compile_cache.use(options.compile_cache)
    maybe_initialize_distributed(options)
    devices = select_devices(preset.train.devices)
    run_id = names.plain_name(options.run_id) if options.run_id is not None else str(uuid.uuid4())
    check_outputs(preset, options)
    places = run_lock.run_places(preset.train.out_dir, run_id, resume=options.resume, export=options.export_torch,
                                 saves=preset.train.checkpoint_every > 0 or options.save_checkpoint,
                                 tensorboard=options.tensorboard)
    lock = run_lock.take_for_processes(places, jax.process_index(), jax.process_count())
    try:
        return _open_run(preset, options, devices, run_id, lock)
    except BaseException:
        lock.release()
        raise


def _open_run(preset: cfg.Preset, options: RunOptions, devices: list, run_id: str,
              lock: RunLock | NoLock) -> RunStart:
    """The rest of `start_run`, once the run holds its folders."""
    checkpointer, step, position, saved_meta = checkpoint.open_run_checkpoints(
        preset, options.resume, run_id, options.save_checkpoint)
    if saved_meta is not None:
        preset = checkpoint.keep_saved_cadence(preset, saved_meta, options.overridden)
    # --init-from's dims before the checks, so that the token-id scan uses its vocabulary.
    preset, init_state = convert.init_preset(preset, options.init_from, options.head_dim)
    check_window(options.profile, step, preset.train.steps)
    check_run(preset, len(devices), jax.process_count(), step, position, announce=jax.process_index() == 0,
              verify_shards=options.verify_shards)
    if checkpointer is None and preset.train.steps > 0 and jax.process_index() == 0:
        print("note: this run writes no checkpoint (pass --checkpoint-every K or --save-checkpoint to keep its state)",
              file=sys.stderr)
    return RunStart(preset, devices, run_id, checkpointer, step, position, saved_meta, init_state, lock)
