"""The places a torch_ref run writes, locked by the process that launches it (the lock itself:
runkit.lock, the same files, holder and rules as jaxgpt's, so that either trainer refuses a run
of the other on the same folders: parity_tests/test_lock_parity.py).

`run_places` lists the places of a training run (its log folder, checkpoint folder,
--export-torch file, TensorBoard folder); `take_for_run` takes their locks in the run's one
owner: the launching process (rank 0 under torchrun; the parent of spawned ranks).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from runkit import lock


def run_places(log_dir: Path, run_id: str, checkpoint_folder: Path | None, *, resume: str | None,
               export: str | None = None, tensorboard: str | None = None) -> list[lock.Place]:
    """Every place a training run writes: its log files under `log_dir`, its checkpoint folder
    (`--resume DIR` or `<out_dir>/checkpoints/<run id>`; None: none), the --export-torch file
    and its TensorBoard folder."""
    places = [lock.logs_place(log_dir, run_id)]
    if checkpoint_folder is not None:
        resumed = resume is not None and Path(resume).is_dir()
        places.append(lock.folder_place(checkpoint_folder, f"the checkpoint folder {checkpoint_folder}",
                                        lock.RESUME_LATER if resumed else lock.ANOTHER_RUN_ID))
    if export is not None:
        places.append(lock.name_place(Path(export), f"--export-torch {export}", "export to another path"))
    if tensorboard is not None:
        places.append(lock.tensorboard_place(tensorboard, run_id))
    return places


def take_for_run(places: Sequence[lock.Place], owner: bool) -> lock.RunLock | lock.NoLock:
    """The run's locks when this process is its `owner` (printing the stale-lock notes), else
    nothing: torchrun's other ranks write only through rank 0's folders, and rank 0 refused
    ends the job (torchrun stops the other workers when one fails)."""
    if not owner:
        return lock.NoLock()
    return lock.announce(lock.RunLock(places).acquire())
