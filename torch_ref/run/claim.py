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
from runkit import lock
from runkit.preflight import check_writable
from torch_ref.run import lock as run_lock
from torch_ref.run.cli import RunOptions, with_run_id


def log_directory(preset: cfg.Preset) -> Path:
    """Where rank 0 writes the run's .txt and .jsonl: <out_dir>/logs, as jaxgpt's runs."""
    return Path(preset.train.out_dir) / "logs"


def checkpoint_directory(preset: cfg.Preset, options: RunOptions) -> Path | None:
    """Where the run's <step>.pt files go: the --resume folder, else <out_dir>/checkpoints/<run
    id> when --checkpoint-every or --save-checkpoint asks for any, else None."""
    if options.resume is not None and Path(options.resume).is_dir():
        return Path(options.resume)
    if preset.train.checkpoint_every > 0 or options.save_checkpoint:
        return Path(preset.train.out_dir) / "checkpoints" / (options.run_id or "unnamed")
    return None


def check_outputs(preset: cfg.Preset, options: RunOptions) -> None:
    """Every place the run writes to: the log folder, the checkpoint folder, --export-torch's
    folder (and --export-torch does not name a folder), --tensorboard."""
    check_writable(log_directory(preset), "--out-dir")
    directory = checkpoint_directory(preset, options)
    if directory is not None:
        check_writable(directory, "--resume folder" if options.resume else "checkpoint folder")
    if options.export_torch is not None:
        target = Path(options.export_torch)
        if target.is_dir():
            raise ValueError(f"--export-torch {target} is a directory; give a file path such as {target / 'final.pt'}")
        check_writable(target.parent, "--export-torch folder")
    if options.tensorboard is not None:
        check_writable(Path(options.tensorboard), "--tensorboard")


def claim_run(preset: cfg.Preset, options: RunOptions) -> tuple[RunOptions, lock.RunLock | lock.NoLock]:
    """(`options` with its run id, the run's locks): the folders checked writable, then locked
    when this process owns the run (rank 0 under torchrun, else the launching process; the
    stale-lock notes printed). Raises FolderInUseError (another live run holds a place) or
    ValueError (a run id that is not a plain name, an unwritable output)."""
    options = with_run_id(options)
    assert options.run_id is not None  # with_run_id set it
    check_outputs(preset, options)  # the folders exist and are writable before they are locked
    places = run_lock.run_places(log_directory(preset), options.run_id, checkpoint_directory(preset, options),
                                 resume=options.resume, export=options.export_torch,
                                 tensorboard=options.tensorboard)
    return options, run_lock.take_for_run(places, owner=int(os.environ.get("RANK", 0)) == 0)
