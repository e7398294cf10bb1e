"""Helpers of the property-based tests of every reader (tests/*_fuzz.py; docs/RELIABILITY.md,
"Fuzzed readers").

Each reader is given inputs nobody planned for, built from a valid file: truncated, extended,
bit-flipped, overwritten in part, entirely random, and valid-looking headers with absurd sizes
(`damaged`). The property: the reader returns the right result or raises its documented error
naming the file, within `HANG_S` seconds and without a huge allocation (`guarded`), never any
other exception. The budget per reader is fixed and the examples pinned (`examples`; hypothesis
derandomised, root conftest.py), seconds each in `make test`; JAXGPT_FUZZ_EXAMPLES=N gives every
reader N examples (the long run: `JAXGPT_FUZZ_EXAMPLES=10000 pytest -m fuzz`). hypothesis is a
test extra: imported where a strategy is built. A tests-only module (imported as tests.fuzzing),
not part of the jaxgpt library.
"""

from __future__ import annotations

import collections
import contextlib
import os
import resource
import signal
import sys
from collections.abc import Iterator
from typing import Any

ENV_VAR = "JAXGPT_FUZZ_EXAMPLES"
HANG_S = 30.0  # one example's bound: a reader that takes longer is hung (a loaded 2-core machine included)
MAX_GROWTH_MIB = 512  # one example's bound on the growth of the process's peak resident memory


def examples(default: int) -> int:
    """The examples a reader gets: `default` (make test's pinned budget), else $JAXGPT_FUZZ_EXAMPLES."""
    return int(os.environ.get(ENV_VAR) or default)


EXAMPLES: collections.Counter = collections.Counter()  # examples run per test (`guarded` blocks), for the figures


class Hang(BaseException):  # not an Exception: a reader's `except Exception` must not swallow it
    """An example ran past its time bound."""


class HugeAllocation(AssertionError):
    """An example grew the process's peak resident memory by more than the bound."""


def _peak_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB on Linux


@contextlib.contextmanager
def guarded(hang_s: float = HANG_S, max_growth_mib: float = MAX_GROWTH_MIB) -> Iterator[None]:
    """Raises Hang when the block runs past `hang_s` (SIGALRM: the main thread only) and
    HugeAllocation when it raised the peak resident memory by more than `max_growth_mib`.
    Counts the example for the current test (EXAMPLES; pytest's summary lists them)."""

    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"the reader took more than {hang_s} s")

    EXAMPLES[os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]] += 1
    before = _peak_mib()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, hang_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    growth = _peak_mib() - before
    if growth > max_growth_mib:
        raise HugeAllocation(f"the reader raised the peak resident memory by {growth:.0f} MiB")


def _flip_bits(valid: bytes, positions: list[int]) -> bytes:
    data = bytearray(valid)
    for position in positions:
        bit = position % (8 * len(data))
        data[bit // 8] ^= 1 << (bit % 8)
    return bytes(data)


def damaged(valid: bytes, *, max_extra: int = 256) -> Any:
    """A hypothesis strategy of inputs made from `valid` (non-empty): the file itself, truncated,
    extended with random bytes, 1-16 bits flipped, a slice overwritten with random bytes, or
    random bytes of a similar size."""
    from hypothesis import strategies as st

    size = len(valid)
    return st.one_of(
        st.just(valid),
        st.integers(0, size - 1).map(lambda cut: valid[:cut]),
        st.binary(min_size=1, max_size=max_extra).map(lambda extra: valid + extra),
        st.lists(st.integers(0, 8 * size - 1), min_size=1, max_size=16).map(lambda bits: _flip_bits(valid, bits)),
        st.tuples(st.integers(0, size - 1), st.binary(min_size=1, max_size=64)).map(
            lambda cut: valid[:cut[0]] + cut[1] + valid[cut[0] + len(cut[1]):]),
        st.binary(max_size=min(2 * size, 1 << 16)),
    )


def names_file(error: BaseException, path: Any) -> bool:
    """The error's message names `path` (as given, or its file name in a longer path)."""
    text = str(error)
    return str(path) in text or os.path.basename(str(path)) in text


def _paths(node: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path (keys and indices) into a nested structure of dicts and lists, itself first."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


def _replaced(node: Any, path: tuple, value: Any, delete: bool) -> Any:
    """`node` with the item at `path` set to `value` (or deleted); only the containers along the
    path are copied (the leaves, tensors included, are shared)."""
    if not path:
        return value
    copy = dict(node) if isinstance(node, dict) else list(node)
    head, rest = path[0], path[1:]
    if rest:
        copy[head] = _replaced(node[head], rest, value, delete)
    elif delete:
        del copy[head]
    else:
        copy[head] = value
    return copy


def mutated(structure: Any, values: Any) -> Any:
    """A hypothesis strategy of `structure` (nested dicts and lists: a checkpoint payload, a JSON
    object) with one item anywhere in it replaced by a value drawn from `values`, or deleted."""
    from hypothesis import strategies as st

    paths = list(_paths(structure))[1:]
    return st.tuples(st.sampled_from(paths), values, st.booleans()).map(
        lambda change: _replaced(structure, *change))


def json_values() -> Any:
    """A hypothesis strategy of JSON values, small and nested, with the edge cases of numbers."""
    from hypothesis import strategies as st

    scalars = (st.none() | st.booleans() | st.integers() | st.sampled_from([-1, 0, 2**31, 2**63, -(2**63), 10**30])
               | st.floats(allow_nan=False) | st.text(max_size=20))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                                           max_size=4), max_leaves=12)


INTEGERS = ["0", "1", "-1", "2", "3", "4", "7", "128", "256", "1024", "2048", "65536", "2147483648",
            "-9223372036854775809", "1" + "0" * 30, "x"]
FLOATS = ["0", "1", "-1", "0.5", "0.04", "1e-30", "1e30", "1e309", "-1e309", "nan", "inf", "-inf", "-0.0", "x"]
BOOLEANS = ["true", "false", "1", "no", "none", "maybe"]
NAMES = ["r", "same", "run-2.a", "../x", ".hidden", "a/b", "tab\there", ""]


def _value_strings(action: Any, paths: list[str]) -> Any:
    """Mostly values the flag accepts (its edge cases included), now and then one it refuses."""
    from hypothesis import strategies as st

    if action.choices is not None:
        return st.sampled_from([*sorted(map(str, action.choices)), "not-a-choice"])
    pool = {"int": INTEGERS, "float": FLOATS, "parse_bool": BOOLEANS, "name": NAMES}.get(
        getattr(action.type, "__name__", ""), paths)
    return st.sampled_from(pool)


def command_lines(parser: Any, *, paths: list[str], exclude: frozenset[str] = frozenset()) -> Any:
    """A hypothesis strategy of argument lists for `parser` (an argparse.ArgumentParser): up to 8
    of its optional flags, each with a value of its kind (ints, floats, booleans, names and
    choices with their edge cases, `paths`), flags repeated, now and then an unknown one."""
    from hypothesis import strategies as st

    skipped = {"-h", "--help", *exclude}
    actions = [action for action in parser._actions  # argparse keeps its flags only there
               if action.option_strings and not skipped & set(action.option_strings)]

    def one(action: Any) -> Any:
        flag = st.sampled_from(action.option_strings)
        if action.nargs == 0:
            return flag.map(lambda name: [name])
        return st.tuples(flag, _value_strings(action, paths)).map(list)

    pieces = st.sampled_from(actions).flatmap(one)
    unknown = st.sampled_from([["--no-such-flag"], ["stray"], ["--steps"]])
    return st.tuples(st.lists(pieces, max_size=8), st.lists(unknown, max_size=1)).map(
        lambda parts: [word for part in (*parts[0], *parts[1]) for word in part])
