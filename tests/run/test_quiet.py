"""jaxgpt.run.quiet: what orbax, tensorstore and asyncio print when they fail inside our code is one
line or nothing, unless --debug; the error that reaches our code is still reported (by it)."""

from __future__ import annotations

import gc
import logging
import sys
import threading
import types

import jax.numpy as jnp

from jaxgpt.run import checkpoint, quiet


def library_error() -> None:
    try:
        raise OSError("[Errno 39] Directory not empty: 'DIR/2.orbax-checkpoint-tmp'")
    except OSError as error:
        logging.getLogger("absl").error("_SignalingThread.run() raised an exception: %s", error, exc_info=True)
        logging.getLogger("absl").warning("Attempted to create temporary directory DIR\nsecond line", exc_info=True)


class RaisesWhenCollected:
    def __del__(self):
        raise RuntimeError("Event loop is closed")


def provoke_all() -> None:
    library_error()
    RaisesWhenCollected()  # collected at once: an unraisable exception
    thread = threading.Thread(target=lambda: 1 / 0, name="orbax-writer")
    thread.start()
    thread.join()
    gc.collect()


def test_library_errors_are_one_line_or_none(capfd, caplog):
    with quiet.third_party_errors(debug=False):
        provoke_all()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Event loop is closed" not in err, err
    assert "warning: background thread orbax-writer failed (ZeroDivisionError: division by zero)" in err
    records = [record for record in caplog.records if record.name == "absl"]
    assert [(record.levelname, record.getMessage(), record.exc_info) for record in records] == [
        ("WARNING", "Attempted to create temporary directory DIR", None)]  # the ERROR record dropped


def test_debug_and_the_end_of_the_block_leave_everything_as_it_was(caplog):
    """(pytest's own hooks collect the unraisable and thread exceptions outside the block.)"""
    hooks = (sys.unraisablehook, threading.excepthook)
    with quiet.third_party_errors(debug=True):
        assert (sys.unraisablehook, threading.excepthook) == hooks
        library_error()
    with quiet.third_party_errors(debug=False):
        assert (sys.unraisablehook, threading.excepthook) != hooks
    assert threading.excepthook == hooks[1]
    assert isinstance(sys.unraisablehook, quiet.LateLibraryFilter) and sys.unraisablehook.previous in (
        hooks[0], getattr(hooks[0], "previous", None))  # others' unraisables go to the hook before
    library_error()
    records = [record for record in caplog.records if record.name == "absl"]
    assert [record.levelname for record in records] == ["ERROR", "WARNING"] * 2 and all(r.exc_info for r in records)


def test_two_savers_in_one_folder_fail_in_one_line(tmp_path, capfd, caplog):
    """The issue's case without the run lock: two writers of one step folder. orbax logged 40
    lines of tracebacks before the run's one-line error; now only that error remains."""
    state = {"params": {"a": jnp.arange(64, dtype=jnp.float32).reshape(8, 8)}, "opt_state": {"m": jnp.ones(4)}}
    errors = []
    with quiet.third_party_errors(debug=False):
        first, second = checkpoint.Checkpointer(tmp_path / "c"), checkpoint.Checkpointer(tmp_path / "c")
        for step in (2, 4):
            for saver in (first, second):
                try:
                    saver.save(step, state, data_position={}, config={})
                except checkpoint.CheckpointSaveError as error:
                    errors.append(error)
        for saver in (first, second):
            try:
                saver.close()
            except checkpoint.CheckpointSaveError as error:
                errors.append(error)
    assert errors and all(str(tmp_path / "c") in str(error) for error in errors)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ERROR" not in err, err
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def test_after_the_block_only_the_libraries_late_reports_are_dropped():
    def raised_in(filename: str) -> types.SimpleNamespace:
        try:
            exec(compile("raise RuntimeError('Event loop is closed')", filename, "exec"))
        except RuntimeError as error:
            return types.SimpleNamespace(exc_type=RuntimeError, exc_value=error, exc_traceback=error.__traceback__)
        raise AssertionError("not raised")

    passed_on = []
    late = quiet.LateLibraryFilter(passed_on.append)
    late(raised_in("/site-packages/asyncio/base_events.py"))
    late(raised_in("/site-packages/orbax/checkpoint/serialization.py"))
    ours = raised_in("jaxgpt/data.py")
    late(ours)
    assert passed_on == [ours]
