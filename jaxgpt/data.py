"""The record's batch stream over its token shards, for JAX hosts (RECORD.md section 8).

The shards themselves (the `.bin` format, shard lists, token-id checks) are `jaxgpt.shards`;
`read_shard` and `write_shard` stay importable from here (docs/spec/INTERFACES.md), as do the
shard-list names the trainers' preflight reads.

Batches follow RECORD.md 8.3, generalised from one sequence per rank to S = batch_tokens /
seq_len packed sequences per step: global sequence i of a step is
`tokens[pos + i*T : pos + i*T + T + 1]` (inputs are its first T tokens, targets its last T).
Before every batch, including the first, a shard with `pos + batch_tokens + 1 >= len` is left
for the next one (its tail is dropped), and `pos` advances by `batch_tokens` after each batch.
Host p of P gets sequences [p*S/P, (p+1)*S/P) and reads only that slice of the memmap.

The lineage's data streams (LINEAGE.md 3.7, 5.9; TrainConfig's data switches) differ in two
quirks, kept here so that a preset sees its record's token stream:
- `repeat_first_batch` (#8/#9): the first batch is served twice (BatchLoader's `repeat_first`).
- per-rank shard switches (#8/#9 "per_rank_inclusive", #15 "per_rank"): each of the record's
  `data_ranks` ranks tests its own rank-offset position after reading, so ranks 6 and 7 of 8
  leave a 10^8-token shard one batch early; the ranks' streams then differ by shard.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from jaxgpt.prefetch import Prefetcher
from jaxgpt.shards import (  # noqa: F401 - re-exported: INTERFACES.md's write_shard, preflight's shard-list names
    COMPLETE_MARKER,
    check_shard_folders,
    check_token_ids,
    list_shards,
    read_shard,
    read_shard_header,
    write_shard,
)

SEQ_LEN_MULTIPLE = 128  # the attention's mask block; sequences are whole blocks


# --------------------------------------------------------------------------------------
# The stream's errors


class ShardsExhaustedError(RuntimeError):
    """The shards of a pattern ran out and cycling was not requested."""


def exhausted_message(pattern: str, num_shards: int) -> str:
    return (
        f"ran out of data: all {num_shards} shard(s) matching {pattern!r} were used; "
        "add shards, train fewer steps, or enable cycling (cycle=True) for multi-epoch use"
    )


def too_short_message(path: Path, num_tokens: int, batch_tokens: int) -> str:
    return (
        f"{path}: {num_tokens} tokens cannot hold one batch of {batch_tokens} tokens "
        f"(the advance rule needs at least batch + 2 = {batch_tokens + 2})"
    )


# --------------------------------------------------------------------------------------
# Batches for JAX hosts


@dataclass(frozen=True)
class DataPosition:
    """Where the next batch is read from: `shard_index` into the sorted shard list and the
    token offset `pos` in that shard (before the shard-advance check), and `batches`, the
    number of batches the stream has served. Saving the position after a batch and resuming
    from it reproduces the uninterrupted batch stream exactly (the per-rank shard switches,
    whose ranks sit in different shards, resume by replaying `batches`)."""

    shard_index: int = 0
    pos: int = 0
    batches: int = 0

    def __post_init__(self) -> None:
        if self.shard_index < 0 or self.pos < 0 or self.batches < 0:
            raise ValueError(f"DataPosition fields must be >= 0, got {self}")

    def to_dict(self) -> dict[str, int]:
        return {"shard_index": self.shard_index, "pos": self.pos, "batches": self.batches}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataPosition:
        return cls(shard_index=int(data["shard_index"]), pos=int(data["pos"]), batches=int(data.get("batches", 0)))


class Batch(NamedTuple):
    """One host's share of a step: `inputs` and `targets`, each (S_local, T) int32."""

    inputs: np.ndarray
    targets: np.ndarray


def check_batch_layout(batch_tokens: int, seq_len: int, process_count: int = 1) -> int:
    """Validate the batch geometry and return S_local, the sequences per host."""
    if seq_len <= 0 or seq_len % SEQ_LEN_MULTIPLE:
        raise ValueError(f"seq_len must be a positive multiple of {SEQ_LEN_MULTIPLE}, got {seq_len}")
    if process_count <= 0:
        raise ValueError(f"process_count must be positive, got {process_count}")
    if batch_tokens <= 0 or batch_tokens % (seq_len * process_count):
        raise ValueError(
            f"batch_tokens {batch_tokens} must be a positive multiple of seq_len * process_count "
            f"= {seq_len} * {process_count} = {seq_len * process_count}"
        )
    return batch_tokens // (seq_len * process_count)


def _host_batch(tokens: np.ndarray, pos: int, first_seq: int, num_seqs: int, seq_len: int) -> Batch:
    """Sequences [first_seq, first_seq + num_seqs) of the step starting at `pos`."""
    start = pos + first_seq * seq_len
    span = np.asarray(tokens[start : start + num_seqs * seq_len + 1], dtype=np.int32)
    # Sequence i's inputs and targets are the same tokens shifted by one.
    inputs = span[:-1].reshape(num_seqs, seq_len)
    targets = span[1:].reshape(num_seqs, seq_len)
    return Batch(inputs, targets)


def shard_serves_batch(pos: int, batch_tokens: int, num_tokens: int) -> bool:
    """The record's shard-advance test: a shard of `num_tokens` tokens serves a batch at `pos`
    while pos + batch_tokens + 1 < num_tokens (else the loader moves on to the next shard)."""
    return pos + batch_tokens + 1 < num_tokens


def rank_serves_batch(pos: int, batch_tokens: int, num_tokens: int, rule: str = "global", offset: int = 0) -> bool:
    """Does a shard of `num_tokens` serve the batch at base position `pos` under a shard switch?

    "global" (Sub3Min, #18): `shard_serves_batch`. The per-rank rules test a rank's own position
    pos + offset (offset = r * B / data_ranks) after reading the batch before, so the first batch
    of a shard (pos 0) is always read: "per_rank" (#15) while pos + offset + B + 1 < len,
    "per_rank_inclusive" (#8/#9) while pos + offset + B + 1 <= len."""
    if rule == "global":
        return shard_serves_batch(pos, batch_tokens, num_tokens)
    if pos == 0:
        return True
    end = pos + offset + batch_tokens + 1
    if rule == "per_rank_inclusive":
        return end <= num_tokens
    if rule == "per_rank":
        return end < num_tokens
    raise ValueError(f"unknown shard switch {rule!r}")


def batch_starts(
    files: Sequence[Path], pattern: str, batch_tokens: int, *, cycle: bool = False, start: DataPosition = DataPosition(),
    rule: str = "global", offset: int = 0,
) -> Iterator[tuple[np.ndarray, DataPosition]]:
    """The record's shard-advance rule, shared by the JAX loader and torch_ref's generator.

    Yields, for each global batch of `batch_tokens` tokens, the current shard's tokens and the
    position of the batch's first token. Before every batch (the first included) a shard with
    pos + batch_tokens + 1 >= len is left for the next shard at pos 0, so each shard's tail is
    dropped. Running out of shards raises ShardsExhaustedError unless `cycle` (then wraps).
    `rule`, `offset`: a per-rank shard switch (`rank_serves_batch`) seen by the rank at `offset`.
    """
    shard_index, pos = start.shard_index, start.pos
    tokens = read_shard(files[shard_index])
    while True:
        if not rank_serves_batch(pos, batch_tokens, len(tokens), rule, offset):
            shard_index += 1
            if shard_index == len(files):
                if not cycle:
                    raise ShardsExhaustedError(exhausted_message(pattern, len(files)))
                shard_index = 0
            tokens, pos = read_shard(files[shard_index]), 0
            if not shard_serves_batch(pos, batch_tokens, len(tokens)):
                raise ValueError(too_short_message(files[shard_index], len(tokens), batch_tokens))
        yield tokens, DataPosition(shard_index, pos)
        pos += batch_tokens


def check_shards(files: Sequence[Path], batch_tokens: int, vocab_size: int | None = None) -> None:
    """Check every shard of a list up front, before anything compiles: its header and length
    (`read_shard_header`), that it can serve at least one batch of `batch_tokens` on its own
    (the loader reaches any shard at pos 0, and a shard that cannot serve one is an error there),
    and, when `vocab_size` is given, that every token id is below it (`check_token_ids`).
    Raises ValueError naming the first shard that fails."""
    for path in files:
        num_tokens = read_shard_header(path)
        if not shard_serves_batch(0, batch_tokens, num_tokens):
            raise ValueError(too_short_message(Path(path), num_tokens, batch_tokens))
        if vocab_size is not None:
            check_token_ids(path, read_shard(path), vocab_size)


def batches_available(files: Sequence[Path], batch_tokens: int, start: DataPosition = DataPosition(),
                      rule: str = "global", data_ranks: int = 1) -> int:
    """Batches `batch_starts` yields from `files` starting at `start` before it runs out: a
    shard serves batches at pos, pos + B, ... while pos + B + 1 < its length (RECORD.md 8.3).
    Per-rank shard switches: the fewest any of the `data_ranks` ranks can read, less the
    `start.batches` already served."""
    if rule != "global":
        lengths = [read_shard_header(path) for path in files]
        per_rank = [sum(_rank_batches_in_shard(n, batch_tokens, rule, r * (batch_tokens // data_ranks)) for n in lengths)
                    for r in range(data_ranks)]
        return max(0, min(per_rank) - start.batches)
    total = 0
    for index in range(start.shard_index, len(files)):
        length = read_shard_header(files[index])
        pos = start.pos if index == start.shard_index else 0
        if shard_serves_batch(pos, batch_tokens, length):  # at pos, pos + B, ... up to the last that serves
            total += (length - batch_tokens - 2 - pos) // batch_tokens + 1
    return total


def _rank_batches_in_shard(num_tokens: int, batch_tokens: int, rule: str, offset: int) -> int:
    """Batches a rank at `offset` reads from one shard under a per-rank rule (pos 0, B, 2B, ...)."""
    count, pos = 0, 0
    while rank_serves_batch(pos, batch_tokens, num_tokens, rule, offset):
        count, pos = count + 1, pos + batch_tokens
    return count


def _batch_stream(
    files: list[Path],
    pattern: str,
    batch_tokens: int,
    seq_len: int,
    process_index: int,
    process_count: int,
    cycle: bool,
    start: DataPosition,
    shard_switch: str = "global",
    data_ranks: int = 1,
) -> Iterator[tuple[Batch, DataPosition]]:
    """Synchronous generator of (this host's batch, position after it)."""
    local_seqs = batch_tokens // (seq_len * process_count)
    first_seq = process_index * local_seqs
    if shard_switch != "global":
        yield from _per_rank_stream(files, pattern, batch_tokens, seq_len, first_seq, local_seqs, cycle, start,
                                    shard_switch, data_ranks)
        return
    served = start.batches
    for tokens, at in batch_starts(files, pattern, batch_tokens, cycle=cycle, start=start):
        served += 1
        yield _host_batch(tokens, at.pos, first_seq, local_seqs, seq_len), DataPosition(at.shard_index, at.pos + batch_tokens, served)


def _per_rank_stream(
    files: list[Path], pattern: str, batch_tokens: int, seq_len: int, first_seq: int, local_seqs: int, cycle: bool,
    start: DataPosition, rule: str, data_ranks: int,
) -> Iterator[tuple[Batch, DataPosition]]:
    """This host's sequences when each record rank follows its own shard switch: rank r owns
    tokens [r L, (r + 1) L) of every batch (L = B / data_ranks) and reads them from its own
    shard at its base position pos_r (+ r L); a part's targets are the next tokens of the same
    shard. Resumes by replaying `start.batches` batches (their positions only)."""
    rank_tokens = batch_tokens // data_ranks
    lo, hi = first_seq * seq_len, (first_seq + local_seqs) * seq_len
    parts = [(r, max(lo, r * rank_tokens), min(hi, (r + 1) * rank_tokens))
             for r in range(lo // rank_tokens, -(-hi // rank_tokens))]
    streams = {r: batch_starts(files, pattern, batch_tokens, cycle=cycle, rule=rule, offset=r * rank_tokens)
               for r, _, _ in parts}
    for _ in range(start.batches):  # replay: positions only, the memmaps are not read
        for stream in streams.values():
            next(stream)
    served = start.batches
    while True:
        at_rank = {r: next(stream) for r, stream in streams.items()}
        inputs, targets = [], []
        for r, first, end in parts:
            tokens, at = at_rank[r]
            span = np.asarray(tokens[at.pos + first:at.pos + end + 1], dtype=np.int32)
            inputs.append(span[:-1])
            targets.append(span[1:])
        served += 1
        _, head = at_rank[parts[0][0]]
        yield (Batch(np.concatenate(inputs).reshape(local_seqs, seq_len), np.concatenate(targets).reshape(local_seqs, seq_len)),
               DataPosition(head.shard_index, head.pos + batch_tokens, served))


def _repeat_first(stream: Iterator[tuple[Batch, DataPosition]], start: DataPosition
                  ) -> Iterator[tuple[Batch, DataPosition]]:
    """`stream` with its first batch served once more up front, at the unchanged position."""
    first = next(stream)
    yield first[0], start
    yield first
    yield from stream


class BatchLoader:
    """Iterator over this host's batches of the record's data stream, prefetched in a thread.

    Args:
      pattern: glob of shard files (sorted by name).
      batch_tokens: global tokens per step, Bg; S = Bg / seq_len sequences per step.
      seq_len: T, tokens per sequence, a multiple of 128.
      process_index, process_count: this host p of P; it gets sequences [p*S/P, (p+1)*S/P).
      cycle: wrap around to the first shard instead of raising ShardsExhaustedError.
      position: resume point (from `loader.position` of an earlier run); default the start.
      prefetch: batches kept ready by the background thread (0: no thread, read on demand).
      repeat_first: serve the first batch twice (#8/#9's loader reset after its first fetch);
        the position stays where it was after the first copy.
      shard_switch, data_ranks: TrainConfig's per-rank shard switch ("global": the record's).

    Yields `Batch(inputs, targets)`, each (S/P, T) int32 numpy arrays. `position` is the
    DataPosition after the last batch returned (save it with a checkpoint). Errors raised
    while reading (bad shard, data exhausted) are re-raised by `next()`. Call `close()` (or
    use `with`) to stop the thread; it is a daemon, so a forgotten loader never blocks exit.
    """

    def __init__(
        self,
        pattern: str,
        batch_tokens: int,
        seq_len: int,
        *,
        process_index: int = 0,
        process_count: int = 1,
        cycle: bool = False,
        position: DataPosition | None = None,
        prefetch: int = 2,
        repeat_first: bool = False,
        shard_switch: str = "global",
        data_ranks: int = 1,
    ) -> None:
        check_batch_layout(batch_tokens, seq_len, process_count)
        if not 0 <= process_index < process_count:
            raise ValueError(f"process_index {process_index} is outside [0, {process_count})")
        self.pattern = pattern
        self.files = list_shards(pattern)
        position = position or DataPosition()
        if position.shard_index >= len(self.files):
            raise ValueError(
                f"resume position {position} points past the {len(self.files)} shard(s) matching {pattern!r}"
            )
        self.batch_tokens, self.seq_len = batch_tokens, seq_len
        self.process_index, self.process_count = process_index, process_count
        self._position = position
        self._stream = _batch_stream(
            self.files, pattern, batch_tokens, seq_len, process_index, process_count, cycle, position,
            shard_switch, data_ranks,
        )
        if repeat_first:
            self._stream = _repeat_first(self._stream, position)
        self._batches = Prefetcher(self._stream, prefetch, name="BatchLoader-prefetch")

    @property
    def position(self) -> DataPosition:
        """Position after the last batch returned by `next()` (the start before any)."""
        return self._position

    def __iter__(self) -> BatchLoader:
        return self

    def __next__(self) -> Batch:
        batch, self._position = next(self._batches)
        return batch

    def close(self) -> None:
        """Stop the prefetch thread and wait for it; further next() calls raise StopIteration."""
        self._batches.close()

    def __enter__(self) -> BatchLoader:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def num_val_batches(val_tokens: int, batch_tokens: int) -> int:
    """Batches of one evaluation; val_tokens must be a multiple of batch_tokens (as the record asserts)."""
    if batch_tokens <= 0 or val_tokens < 0 or val_tokens % batch_tokens:
        raise ValueError(f"val_tokens {val_tokens} must be a non-negative multiple of batch_tokens {batch_tokens}")
    return val_tokens // batch_tokens


def val_batches(
    pattern: str,
    val_tokens: int,
    batch_tokens: int,
    seq_len: int,
    *,
    process_index: int = 0,
    process_count: int = 1,
    prefetch: int = 2,
) -> Iterator[Batch]:
    """One evaluation's batches: a fresh stream over the val shards, val_tokens // batch_tokens
    batches, so every evaluation covers exactly the first `val_tokens` tokens (as the record).

    Yields `Batch` like `BatchLoader` (each (S/P, T) int32). Geometry and file errors are
    raised at the call, before the first batch is requested.
    """
    count = num_val_batches(val_tokens, batch_tokens)
    loader = BatchLoader(
        pattern,
        batch_tokens,
        seq_len,
        process_index=process_index,
        process_count=process_count,
        prefetch=min(prefetch, count),
    )
    return _take(loader, count)


def _take(loader: BatchLoader, count: int) -> Iterator[Batch]:
    try:
        for _ in range(count):
            yield next(loader)
    finally:
        loader.close()


def to_global_arrays(batch: Batch, sharding: Any) -> tuple[Any, Any]:
    """This host's `Batch` as global jax.Arrays of shape (S, T), laid out by `sharding`
    (for example NamedSharding(mesh, P("data"))); the analogue of the record's
    non-blocking host-to-device copies."""
    import jax  # local: the stream above stays numpy-only

    def put(local: np.ndarray) -> Any:
        global_shape = (local.shape[0] * jax.process_count(), local.shape[1])
        return jax.make_array_from_process_local_data(sharding, local, global_shape)

    return put(batch.inputs), put(batch.targets)
