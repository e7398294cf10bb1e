"""A lost process in a multi-process run: say which one, and end the others within seconds.

A process that dies (SIGKILL, a crash, a lost host) leaves every other process waiting for it in
the next collective. Depending on where the waiting happens, XLA's CPU collectives (gloo) fail
at once ("Connection reset by peer"), or wait for their timeout (a ring through two devices of
the same living process never sees the closed connection), and NCCL waits on a GPU. JAX's own
end to this is its coordination service's heartbeat timeout: every surviving process is aborted
with a C++ stack trace (97 s after the kill with JAX's default, measured here) and nothing says
where the last checkpoint is.

`PeerWatch` is a daemon thread per process that bumps a counter of its own in the coordination
service's key-value store every BEAT_S and reads everyone's. A process whose counter has not
moved for `stale_s` (the run's --peer-timeout, 20 s unless set) is lost. While the training
loop waits for a step's result (`waiting`), the watch ends its process when a peer is lost,
with one line naming it and the newest complete checkpoint (`os._exit(1)`: the shutdown
barrier and an unfinished save cannot complete without the lost process; the save's `*-tmp`
folder is never restored). A collective that fails outright (`is_collective_failure`) is
reported by the loop the same way (`peer_lost`). JAX's heartbeat timeout, HEARTBEAT_TIMEOUT_S,
stays the backstop for a process waiting elsewhere (in a save's barrier); and when process 0,
which hosts the coordination service, is the one lost, JAX ends every other process at once
with its own message. docs/RELIABILITY.md gives the measured times.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import jax

from jaxgpt import compat
from jaxgpt.run import checkpoint, cli

HEARTBEAT_TIMEOUT_S = 60  # jax.distributed's bound for a silent process (JAX's default: 100 s)
BEAT_S = 2.0  # how often each process bumps its counter (cli.MIN_PEER_TIMEOUT_S is three beats)
BEAT_KEY = "jaxgpt/beat/"


class PeerLost(RuntimeError):
    """A collective with the other processes failed or stalled; the message names the lost ones."""


def is_collective_failure(error: BaseException) -> bool:
    """An error of the runtime (a collective, a transfer) in a run of several processes."""
    return jax.process_count() > 1 and isinstance(error, jax.errors.JaxRuntimeError)


def lost_message(lost: list[int], cause: str, directory: Path | None, stale_s: float) -> str:
    count = jax.process_count()
    if lost:
        names = ", ".join(str(process) for process in lost)
        who = (f"process {names} of this {count}-process run {'is' if len(lost) == 1 else 'are'} gone "
               f"(silent for {stale_s:g} s)")
    else:
        who = f"every process of this {count}-process run is alive, but a collective between them failed"
    return f"{who}: {cause}; this process stops too. {checkpoint.where_to_resume(directory)}"


class PeerWatch:
    """The watch over the other processes of a multi-process run (the module docstring); does
    nothing in a one-process run. Use as a context manager around the training loop."""

    def __init__(self, directory: Path | None, stale_s: float = cli.PEER_TIMEOUT_S) -> None:
        self._directory = directory  # the run's checkpoints, named in the message
        self._stale_s = stale_s  # a counter unchanged this long: its process is lost
        self._peers = [p for p in range(jax.process_count()) if p != jax.process_index()]
        self._changed = {peer: time.monotonic() for peer in self._peers}  # when each counter last moved
        self._seen: dict[int, str | None] = {}
        self._waiting = 0  # > 0 while the loop waits for a step's result
        self._reported = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="jaxgpt-peer-watch", daemon=True)

    def __enter__(self) -> PeerWatch:
        if self._peers:
            self._thread.start()
        return self

    def __exit__(self, exc_type: object, error: BaseException | None, traceback: object) -> None:
        if error is None or not is_collective_failure(error):  # else peer_lost still reads the counters
            self._stop.set()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """While inside, a lost peer ends this process (the loop is blocked on the collective)."""
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1

    def stale(self) -> list[int]:
        """The peers whose counter has not moved for `stale_s`."""
        now = time.monotonic()
        return [peer for peer in self._peers if now - self._changed[peer] > self._stale_s]

    def peer_lost(self, error: BaseException) -> PeerLost:
        """The PeerLost error of a failed collective `error`, once the lost process is known (up
        to `stale_s` + BEAT_S: its counter must go stale first)."""
        deadline = time.monotonic() + self._stale_s + 2 * BEAT_S
        while not self.stale() and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.2)
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        self._reported.acquire()  # the watch thread reports nothing after this
        return PeerLost(lost_message(self.stale(), f"the training step failed ({first_line})", self._directory,
                                     self._stale_s))

    def _watch(self) -> None:
        client, me, beat = compat.distributed_client(), jax.process_index(), 0
        while not self._stop.wait(BEAT_S):
            beat += 1
            try:
                client.key_value_set(f"{BEAT_KEY}{me}", str(beat), allow_overwrite=True)
                values = dict(client.key_value_dir_get(BEAT_KEY))
            except Exception:  # noqa: BLE001 - the coordinator is gone: JAX's client ends this process
                continue
            now = time.monotonic()
            for peer in self._peers:
                value = values.get(f"{BEAT_KEY}{peer}")
                if value != self._seen.get(peer):
                    self._seen[peer], self._changed[peer] = value, now
            lost = self.stale()
            if lost and self._waiting and self._reported.acquire(blocking=False):
                cause = "the training step waits for it"
                cli.print_error(lost_message(lost, cause, self._directory, self._stale_s))
                os._exit(1)
