"""What a torch_ref run settles before torch is imported: its run id, that its outputs are
writable, and the locks on every place it writes (torch_ref.run.lock), taken by its one owner.

`python -m torch_ref.train` imports torch (seconds) only once the run holds its folders
(`claim_run`), so a second run on a live run's folders is refused in a fraction of a second
(docs/RELIABILITY.md). Every launch takes this path: the owner (rank 0 under torchrun, the
launching process otherwise) is known from the environment alone. The same concept as
jaxgpt.run.claim. Imports no torch (tests/torch_ref/run/test_lock.py checks it).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch_ref.config as cfg
from runkit import checkpoint, lock, places
from torch_ref.run import lock as run_lock
from torch_ref.run.cli import RunOptions, with_run_id


def log_directory(preset: cfg.Preset) -> Path:
    """Where rank 0 writes the run's .txt and .jsonl: <out_dir>/logs, as jaxgpt's runs."""
    return Path(preset.train.out_dir) / "logs"


def checkpoint_directory(preset: cfg.Preset, options: RunOptions) -> Path | None:
    """Where the run's <step>.pt files go (runkit.places.checkpoint_folder): the --resume folder,
    else <out_dir>/checkpoints/<run id> when --checkpoint-every or --save-checkpoint asks for any."""
    return places.checkpoint_folder(preset.train.out_dir, options.run_id or "unnamed", resume=options.resume,
                                    saves=checkpoint.saves(preset.train, options.save_checkpoint))


def check_outputs(preset: cfg.Preset, options: RunOptions) -> None:
    """Every place the run writes to takes a file (runkit.places.check_outputs)."""
    places.check_outputs(preset.train.out_dir, resume=options.resume, export=options.export_torch,
                         tensorboard=options.tensorboard)


def claim_run(preset: cfg.Preset, options: RunOptions) -> tuple[RunOptions, lock.RunLock | lock.NoLock]:
    """(`options` with its run id, the run's locks): the folders checked writable, then locked
    when this process owns the run (rank 0 under torchrun, else the launching process; the
    stale-lock notes printed). Raises FolderInUseError (another live run holds a place) or
    ValueError (a run id that is not a plain name, an unwritable output)."""
    options = with_run_id(options)
    return options, run_lock.take_for_run(places_of(preset, options), owner=int(os.environ.get("RANK", 0)) == 0)


def places_of(preset: cfg.Preset, options: RunOptions) -> list[lock.Place]:
    """Every place the run writes (runkit.places.run_places; `options` carry the run id), its
    outputs checked writable first."""
    assert options.run_id is not None  # with_run_id set it
    check_outputs(preset, options)
    return places.run_places(preset.train.out_dir, options.run_id, resume=options.resume,
                             saves=checkpoint.saves(preset.train, options.save_checkpoint),
                             export=options.export_torch, tensorboard=options.tensorboard)
