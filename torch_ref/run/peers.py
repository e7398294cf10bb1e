"""A lost rank in a multi-process torch_ref run: say which one, and end the others at once.

A rank that dies (SIGKILL, a crash, a lost host) breaks the next collective of every other
rank: gloo fails with "Connection reset by peer" and the loop raises a RuntimeError. Each
survivor then holds a roll call over the process group's key-value store (the rendezvous
store): it writes its own key and waits up to ROLL_CALL_WAIT_S for every other rank's; whoever
does not answer is named lost, and the rank exits 1 with one line. A rank that hangs without
dying (a lost host whose connections never close) is caught by the CPU process group's
timeout, PEER_TIMEOUT_S. The same concept as jaxgpt.run.peers, written here: torch_ref imports
nothing from jaxgpt. docs/RELIABILITY.md gives the measured times.
"""

from __future__ import annotations

import time
from datetime import timedelta

import torch.distributed as dist

PEER_TIMEOUT_S = 60  # gloo's bound on one collective in a CPU run (torch's default: 30 minutes)
ROLL_CALL_WAIT_S = 10  # how long a survivor waits for the others' answers after a failed collective
ROLL_CALL_KEY = "torch_ref/roll-call/{}"


class PeerLost(RuntimeError):
    """A collective with the other ranks failed; the message names who did not answer."""


def is_collective_failure(error: BaseException, world_size: int) -> bool:
    """A runtime error of torch.distributed (gloo raises RuntimeError) in a run of several ranks."""
    return world_size > 1 and isinstance(error, RuntimeError) and not isinstance(error, PeerLost)


def process_group_timeout(device_type: str) -> timedelta | None:
    """The timeout of a CPU run's gloo process group; None (torch's defaults) on CUDA, where
    torch.compile's first step takes minutes and may end at different times on different ranks."""
    return timedelta(seconds=PEER_TIMEOUT_S) if device_type == "cpu" else None


def roll_call(rank: int, world_size: int, wait_s: float = ROLL_CALL_WAIT_S) -> list[int] | None:
    """The ranks that did not answer this rank's roll call within `wait_s` seconds (every
    survivor calls it once after a failed collective). None when the store itself cannot be
    reached (rank 0 hosts the TCP store of a torchrun-style launch)."""
    store = dist.distributed_c10d._get_default_store()  # the rendezvous store; torch has no public accessor
    try:
        store.set(ROLL_CALL_KEY.format(rank), "here")
    except Exception:  # noqa: BLE001 - the store raises DistStoreError, RuntimeError or OSError
        return None
    others = [ROLL_CALL_KEY.format(other) for other in range(world_size) if other != rank]
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if store.check(others):
                return []
        except Exception:  # noqa: BLE001
            return None
        time.sleep(0.2)
    try:
        return [other for other in range(world_size) if other != rank and not store.check([ROLL_CALL_KEY.format(other)])]
    except Exception:  # noqa: BLE001
        return None


def peer_lost(error: BaseException, rank: int, world_size: int, checkpoints: str) -> PeerLost:
    """The PeerLost error of a failed collective `error` on `rank`, after a roll call;
    `checkpoints` says where the newest complete checkpoint is (checkpoint.where_to_resume)."""
    missing = roll_call(rank, world_size)
    if missing is None:
        who = f"rank 0 (it holds the rendezvous store) of this {world_size}-rank run is gone"
    elif missing:
        names = ", ".join(str(other) for other in missing)
        who = (f"rank {names} of this {world_size}-rank run {'is' if len(missing) == 1 else 'are'} gone "
               f"(no answer within {ROLL_CALL_WAIT_S} s)")
    else:
        who = f"every rank of this {world_size}-rank run answered, but a collective between them failed"
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    return PeerLost(f"{who}: the training step failed ({first_line}); rank {rank} stops too. {checkpoints}")
