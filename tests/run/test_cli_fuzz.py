"""Fuzzed: the training command line, `python -m jaxgpt.train` (jaxgpt.train.main), on
combinations of its flags with values of every kind (tests.fuzzing.command_lines): edge-case
numbers, unknown choices, paths to nothing, to files, to folders and to shards, any text. The
run stops after its start-up checks (preflight.start_run: devices, outputs, locks, --init-from,
--resume, the geometry and the shards), where every refusal happens; nothing compiles.

Property: exit 0, 1 (one `error:` line) or 2 (a usage error), never a traceback or any other
exception, no hang. Left out: the multi-host flags (they would join a jax.distributed run) and
--compile-cache (it sets JAX's persistent cache for the whole test process) and --debug (its tracebacks are the point).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io

import pytest
from hypothesis import given, settings

from jaxgpt import loop
from jaxgpt import train as train_lib
from jaxgpt.run import cli, preflight
from jaxgpt.run.cli import PROG
from tests import fuzzing

pytestmark = pytest.mark.fuzz
# --init-from reads a torch file: without torch (make test-compat) it is left out too.
EXCLUDED = frozenset({"--coordinator", "--num-processes", "--process-id", "--compile-cache", "--debug",
                      *(() if importlib.util.find_spec("torch") else ("--init-from",))})


def start_only(preset, options, claim=None):
    """The trainer up to its first compilation: every start-up check, then nothing."""
    start = preflight.start_run(preset, options, claim)
    start.lock.release()
    if start.checkpointer is not None:
        start.checkpointer.close()


@pytest.fixture
def paths(tmp_path):
    (tmp_path / "a_file").write_text("not a checkpoint")
    (tmp_path / "a_folder").mkdir()
    return [str(tmp_path / "nowhere"), str(tmp_path / "a_file"), str(tmp_path / "a_folder"), "data/sample/*.bin",
            "data/sample/sample_val_000000.bin", str(tmp_path / "out"), "", "-", "../x", "/"]


def test_training_command_lines(paths, tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "train", start_only)
    monkeypatch.chdir(train_lib.__file__.rsplit("/jaxgpt/", 1)[0])  # the sample shards' relative glob
    base = ["--preset", "tiny", "--out-dir", str(tmp_path / "out"), "--no-progress", "--steps", "2", "--devices", "1"]

    @settings(max_examples=fuzzing.examples(100))
    @given(argv=fuzzing.command_lines(cli.build_parser(), paths=paths, exclude=EXCLUDED))
    def property_holds(argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), fuzzing.guarded():
            try:
                code = train_lib.main([*base, *argv])
            except SystemExit as exited:  # argparse: a usage error (2), or --help (0)
                code = exited.code
        text = err.getvalue()
        assert code in (0, 1, 2), (code, text)
        assert "Traceback" not in text, text
        if code == 1:  # one error line; besides it only the run's notes and warnings
            lines = text.splitlines()
            assert [line for line in lines if line.startswith(f"{PROG}: error: ")] == [lines[-1]], text
            assert all(line.startswith(("note: ", "warning: ")) for line in lines[:-1]), text

    property_holds()
