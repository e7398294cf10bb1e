"""Everything a run checks and opens before anything compiles: devices, output paths, the
checkpoint to resume, the run's geometry and its data.

`python -m jaxgpt.train` calls `start_run` before building the model, so a bad flag, a short
or foreign shard, or an unwritable folder costs seconds, not a compilation (or a finished run
whose final save then fails). Each check raises ValueError (or data's own errors) naming the
problem and the flag that fixes it. Mirrors torch_ref.run.preflight; the checks both make alike
are runkit's (runkit.preflight, runkit.profiling).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import jax

from jaxgpt import config as cfg
from jaxgpt import data, lineage
from jaxgpt.data import DataPosition
from jaxgpt.run import checkpoint, compile_cache, convert, peers
from jaxgpt.run import lock as run_lock
from jaxgpt.run.claim import Claim, cluster_launcher, distributed_arguments, places_of, run_id_of
from jaxgpt.run.cli import RunOptions
from runkit.lock import NoLock, RunLock
from runkit.preflight import check_shard_digests
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
        stream = lineage.stream_variants(train)
        needed = train.steps - start_step - stream.repeated_batches(start_step, train.steps)
        available = data.batches_available(train_files, train.batch_tokens, start, *stream.shard_rule())
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
    # The --init-from state dict, read and checked once (convert.init_preset; `preset` has its dims):
    # step.build_model takes it as it is.
    init_state: dict[str, Any] | None
    lock: RunLock | NoLock  # the run's folders, held until the run ends (runkit.lock)


def start_run(preset: cfg.Preset, options: RunOptions, claim: Claim | None = None) -> RunStart:
    """Join the hosts, pick the devices, check the outputs and take the run's locks (unless the
    command did before jax: `claim`, released here on any error), open the checkpoint to resume
    and the --init-from file, then check the geometry and the data: where the run starts."""
    try:
        compile_cache.use(options.compile_cache)
        maybe_initialize_distributed(options)
        devices = select_devices(preset.train.devices)
        lock: RunLock | NoLock
        if claim is not None:
            run_id, lock = claim.run_id, claim.lock
        else:
            run_id = run_id_of(options)
            lock = run_lock.take_for_processes(places_of(preset, options, run_id), jax.process_index(),
                                               jax.process_count())
    except BaseException:
        if claim is not None:
            claim.lock.release()
        raise
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
