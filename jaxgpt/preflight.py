"""Everything a run checks and opens before anything compiles: devices, output paths, the
checkpoint to resume, the run's geometry and its data.

`python -m jaxgpt.train` calls `start_run` before building the model, so a bad flag, a short
or foreign shard, or an unwritable folder costs seconds, not a compilation (or a finished run
whose final save then fails). Each check raises ValueError (or data's own errors) naming the
problem and the flag that fixes it. Mirrors torch_ref.preflight.
"""

from __future__ import annotations

import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from jaxgpt import checkpoint, convert, data
from jaxgpt import config as cfg
from jaxgpt.cli import RunOptions
from jaxgpt.data import DataPosition


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


def scan_shards(preset: cfg.Preset, start_step: int, start: DataPosition, *, announce: bool = True) -> None:
    """Every shard the run can reach (headers, lengths, one batch each, token ids below the
    vocabulary) and enough batches: val_tokens of validation, and steps start_step.. of
    training unless the data cycles. `announce`: print the note on shard folders without a
    completion marker (process 0 only)."""
    train = preset.train
    train_files = data.list_shards(train.train_files)  # refuses a folder whose build never finished
    val_or_none = data.list_shards(train.val_files) if train.val_tokens else []
    for folder in data.check_shard_folders(train_files + val_or_none) if announce else ():
        print(f"note: {folder} has no {data.COMPLETE_MARKER} marker (shards not written by make_shards); "
              "using them as they are", file=sys.stderr)
    reachable = train_files if train.cycle_data else train_files[start.shard_index:]
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
        needed = train.steps - start_step
        available = data.batches_available(train_files, train.batch_tokens, start)
        if available < needed:
            raise ValueError(
                f"training data exhausted: steps {start_step}..{train.steps - 1} need {needed} batches of {train.batch_tokens} "
                f"tokens, but the {len(train_files)} shard(s) matching {train.train_files!r} hold {available}; "
                "add shards, lower --steps, or pass --cycle-data"
            )


def check_run(preset: cfg.Preset, num_devices: int, process_count: int, start_step: int, start: DataPosition,
              *, announce: bool = True) -> None:
    """The geometry, then the shard scan (the geometry's messages name the cheaper fix)."""
    check_geometry(preset, num_devices, process_count)
    scan_shards(preset, start_step, start, announce=announce)


def check_writable(directory: Path, what: str) -> None:
    """Create `directory` if needed and prove a file can be written there; ValueError otherwise
    (checked before the first step, so no trained state is lost to a bad path at the end)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-test-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise ValueError(f"{what} {directory} is not writable: {error.strerror or error}") from None


def check_outputs(preset: cfg.Preset, options: RunOptions) -> None:
    """Every place the run writes to (--out-dir with its logs and checkpoints, --resume,
    --export-torch's folder) is writable; --export-torch does not name a folder."""
    check_writable(Path(preset.train.out_dir), "--out-dir")
    if options.resume is not None and Path(options.resume).is_dir():
        check_writable(Path(options.resume), "--resume directory")
    if options.export_torch is not None:
        target = Path(options.export_torch)
        if target.is_dir():
            raise ValueError(f"--export-torch {target} is a directory; give a file path such as {target / 'model.pt'}")
        check_writable(target.parent, "--export-torch folder")


def maybe_initialize_distributed(options: RunOptions) -> None:
    """Join a multi-host run when flags or the environment ask for it (several processes,
    one per host; process p reads only its own sequences of every batch)."""
    from_env = os.environ.get("JAX_COORDINATOR_ADDRESS") or os.environ.get("JAXGPT_DISTRIBUTED") == "1"
    if options.coordinator is None and options.num_processes is None and not from_env:
        return
    kwargs = {"coordinator_address": options.coordinator, "num_processes": options.num_processes,
              "process_id": options.process_id}
    jax.distributed.initialize(**{name: value for name, value in kwargs.items() if value is not None})


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


def start_run(preset: cfg.Preset, options: RunOptions) -> RunStart:
    """Join the hosts, pick the devices, check the outputs, open the checkpoint to resume and
    the --init-from file, then check the geometry and the data: where the run starts."""
    maybe_initialize_distributed(options)
    devices = select_devices(preset.train.devices)
    run_id = options.run_id or str(uuid.uuid4())
    check_outputs(preset, options)
    checkpointer, step, position, saved_meta = checkpoint.open_run_checkpoints(
        preset, options.resume, run_id, options.save_checkpoint)
    if saved_meta is not None:
        preset = checkpoint.keep_saved_cadence(preset, saved_meta, options.overridden)
    # --init-from's dims before the checks, so that the token-id scan uses its vocabulary.
    preset, init_state = convert.init_preset(preset, options.init_from, options.head_dim)
    check_run(preset, len(devices), jax.process_count(), step, position, announce=jax.process_index() == 0)
    if checkpointer is None and preset.train.steps > 0 and jax.process_index() == 0:
        print("note: this run writes no checkpoint (pass --checkpoint-every K or --save-checkpoint to keep its state)",
              file=sys.stderr)
    return RunStart(preset, devices, run_id, checkpointer, step, position, saved_meta, init_state)
