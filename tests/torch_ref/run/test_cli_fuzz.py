"""Fuzzed: torch_ref's training command line, `python -m torch_ref.train` (torch_ref.train.main),
as jaxgpt's in tests/test_cli_fuzz.py: combinations of its flags with values of every kind
(tests.fuzzing.command_lines), the run stopped after its start-up checks (the outputs, the
locks, --init-from, --resume, the geometry and the shards: torch_ref.run.preflight.start_run); no
rank is spawned and nothing trains.

Property: exit 0, 1 (one `python -m torch_ref.train: error:` line, after notes and warnings) or 2 (a usage
error), never a traceback or any other exception, no hang. --debug is left out (its tracebacks
are the point).
"""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given, settings

from tests import fuzzing
from torch_ref import loop
from torch_ref import train as train_lib
from torch_ref.run import cli
from torch_ref.run.cli import PROG

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("one_thread")]


@pytest.fixture
def paths(small_run, tmp_path):
    (tmp_path / "a_file").write_text("not a checkpoint")
    (tmp_path / "a_folder").mkdir()
    return [str(tmp_path / "nowhere"), str(tmp_path / "a_file"), str(tmp_path / "a_folder"),
            str(small_run.root / "init.pt"), str(small_run.root / "t_*.bin"), str(small_run.root / "t_val_000000.bin"),
            str(tmp_path / "out"), "", "-", "../x"]


def test_training_command_lines(small_run, paths, tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "train", lambda *args, **kwargs: None)  # after the checks: no step
    monkeypatch.setattr(loop, "_spawn", lambda *args, **kwargs: None)  # --devices N: no rank
    base = small_run.args(tmp_path / "out")

    @settings(max_examples=fuzzing.examples(100))
    @given(argv=fuzzing.command_lines(cli.build_parser(), paths=paths, exclude=frozenset({"--debug"})))
    def property_holds(argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), fuzzing.guarded():
            try:
                code = train_lib.main([*base, *argv])
            except SystemExit as exited:  # argparse: a usage error (2)
                code = exited.code
        text = err.getvalue()
        assert code in (0, 1, 2), (code, text)
        assert "Traceback" not in text, text
        if code == 1:  # one error line; besides it only the run's notes and warnings
            lines = text.splitlines()
            assert [line for line in lines if "error: " in line] == [lines[-1]], text
            assert lines[-1].startswith(f"{PROG}: error: "), text
            assert all(line.startswith(("note: ", "warning: ")) for line in lines[:-1]), text

    property_holds()
