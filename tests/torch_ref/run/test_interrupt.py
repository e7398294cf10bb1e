"""torch_ref.run.interrupt: SIGINT / SIGTERM stop a run between steps with exit code 128 + the signal
and one line saying where the state is; the handlers are put back afterwards."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from torch_ref import train as train_lib
from torch_ref.run.interrupt import interrupted

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_stop_message_names_where_the_state_is():
    saved = interrupted(signal.SIGINT, 3, Path("runs/checkpoints/a"), resume=None)
    assert saved.exit_code == 130
    assert str(saved) == ("interrupted by SIGINT at step 3; the state after step 3 is in runs/checkpoints/a "
                          "(continue with --resume runs/checkpoints/a)")
    unchanged = interrupted(signal.SIGTERM, 5, None, resume="runs/checkpoints/a")
    assert unchanged.exit_code == 143
    assert str(unchanged).endswith("no step was completed since the start; runs/checkpoints/a still holds step 5")


def test_sigterm_without_checkpointing_says_nothing_was_saved_and_exits_143(small_run, tmp_path, capsys,
                                                                             interrupt_at_update):
    interrupt_at_update(0, signal.SIGTERM)
    assert train_lib.main(small_run.args(tmp_path / "out", "--val-tokens", "0")) == 143
    err = capsys.readouterr().err
    assert "interrupted by SIGTERM at step 1; no checkpoint was written (checkpointing is off" in err
    assert "Traceback" not in err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are put back
