"""jaxgpt's trainer on runkit.names: a run id that is not a plain name is refused at parse time
(exit 2), and a Python caller's likewise (the rule itself: tests/runkit/test_names.py)."""

from __future__ import annotations

import pytest

from jaxgpt import train as train_lib
from jaxgpt.run import cli


@pytest.mark.parametrize("text", ["../../escape", ".hidden", "a/b", "tab\there"])
def test_the_command_line_refuses_it_at_parse_time_with_exit_2(text, capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:
        train_lib.main(["--preset", "tiny", "--out-dir", str(tmp_path / "out"), "--run-id", text])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --run-id: --run-id " in err and "is not a plain name" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_a_python_caller_is_held_to_the_same_rule(tmp_path):
    from jaxgpt import config as cfg  # noqa: PLC0415
    from jaxgpt import presets  # noqa: PLC0415
    from jaxgpt.run import preflight  # noqa: PLC0415

    preset = cfg.replace(presets.get_preset("tiny"), train=cfg.replace(presets.get_preset("tiny").train, out_dir=str(tmp_path)))
    with pytest.raises(ValueError, match=r"--run-id '\.\./up' is not a plain name"):
        preflight.start_run(preset, cli.RunOptions(run_id="../up"))
    assert list(tmp_path.iterdir()) == []
