"""Which of a jaxgpt run's processes locks the places it writes (runkit.places.run_places, both
trainers' list; the lock itself: runkit.lock): `take_for_processes` takes them in process 0
alone, and in a run of several processes tells the others its answer through jax.distributed's
key-value store, so that every process stops when it was refused.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from runkit import lock

AGREE_KEY = "jaxgpt/run_lock"
AGREE_TIMEOUT_MS = 60_000  # process 0 takes its locks within seconds; beyond this it is gone
_RUNS = itertools.count()  # runs started by this process: every process of a run counts alike


def take_for_processes(places: Sequence[lock.Place], process_index: int,
                       process_count: int) -> lock.RunLock | lock.NoLock:
    """The run's locks, taken by process 0 alone; in a run of several processes the others
    learn its answer through jax.distributed's key-value store and stop with it when refused.
    Prints the stale-lock notes (process 0)."""
    if process_count == 1:
        return lock.announce(lock.RunLock(places).acquire())
    from jaxgpt import compat  # jax only for several processes

    client = compat.distributed_client()
    key = f"{AGREE_KEY}/{next(_RUNS)}"  # the n-th run of these processes (the store outlives a run)
    if process_index == 0:
        try:
            held = lock.RunLock(places).acquire()
        except Exception as error:
            client.key_value_set(key, f"refused: {error}")
            raise
        client.key_value_set(key, "ok")
        return lock.announce(held)
    try:
        answer = client.blocking_key_value_get(key, AGREE_TIMEOUT_MS)
    except Exception as error:  # noqa: BLE001 - the client's timeout error type is private
        raise lock.FolderInUseError(f"process 0 did not say within {AGREE_TIMEOUT_MS // 1000} s whether it holds the "
                                    f"run's locks ({type(error).__name__}); this process stops") from None
    if answer != "ok":
        raise lock.FolderInUseError(f"process 0 could not take the run's locks: {answer.removeprefix('refused: ')}")
    return lock.NoLock()
