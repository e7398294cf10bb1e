"""Items of an iterator made ready ahead of use by a background thread (the batch loader's
prefetch): an error raised while producing is raised again by the consumer's next(), and
close() stops the thread even while its queue is full."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple


class _Failure(NamedTuple):
    error: BaseException


def _put_unless_stopped(out: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put `item`, polling so that a stop request is seen even while the queue is full."""
    while not stop.is_set():
        try:
            out.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _produce(stream: Iterator[Any], out: queue.Queue, stop: threading.Event) -> None:
    """Thread body: move items of `stream` into `out`; hand any error over as a _Failure."""
    try:
        for item in stream:
            if not _put_unless_stopped(out, item, stop):
                return
    except BaseException as error:  # re-raised by the consumer's next()
        _put_unless_stopped(out, _Failure(error), stop)


class Prefetcher:
    """Iterator over `stream`'s items with up to `depth` of them prefetched by a daemon thread
    (depth 0: no thread, each item produced on demand). After an error every next() raises it
    again; after close() next() raises StopIteration."""

    def __init__(self, stream: Iterator[Any], depth: int, *, name: str = "prefetch") -> None:
        if depth < 0:
            raise ValueError(f"prefetch must be >= 0, got {depth}")
        self._stream = stream
        self._failure: BaseException | None = None
        self._stop = threading.Event()
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        if depth:
            self._queue = queue.Queue(maxsize=depth)
            # The thread gets no reference to `self`, so a dropped prefetcher is collected and stops it.
            self._thread = threading.Thread(target=_produce, args=(stream, self._queue, self._stop), name=name,
                                            daemon=True)
            self._thread.start()

    def __iter__(self) -> Prefetcher:
        return self

    def __next__(self) -> Any:
        if self._failure is not None:
            raise self._failure
        if self._stop.is_set():
            raise StopIteration
        if self._queue is None:
            try:
                return next(self._stream)
            except BaseException as error:
                self._failure = error
                raise
        item = self._queue.get()
        if isinstance(item, _Failure):
            self._failure = item.error
            self.close()
            raise item.error
        return item

    def close(self) -> None:
        """Stop the thread and wait for it (unless called from it)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __del__(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
