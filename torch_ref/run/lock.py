"""Which of a torch_ref run's processes locks the places it writes: the one that launches it
(`take_for_run`: rank 0 under torchrun; the parent of spawned ranks). The places are both
trainers' (runkit.places.run_places) and the lock is runkit.lock, so that either trainer refuses
a run of the other on the same folders (parity_tests/test_lock_parity.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from runkit import lock


def take_for_run(places: Sequence[lock.Place], owner: bool) -> lock.RunLock | lock.NoLock:
    """The run's locks when this process is its `owner` (printing the stale-lock notes), else
    nothing: torchrun's other ranks write only through rank 0's folders, and rank 0 refused
    ends the job (torchrun stops the other workers when one fails)."""
    if not owner:
        return lock.NoLock()
    return lock.announce(lock.RunLock(places).acquire())
