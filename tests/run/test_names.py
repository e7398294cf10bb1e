"""jaxgpt.run.names: a run id is a plain name, refused at parse time otherwise (exit 2)."""

from __future__ import annotations

import pytest

from jaxgpt.run import cli, names
from jaxgpt import train as train_lib

BAD_NAMES = {
    "../../escape": "a path separator",
    "a/b": "a path separator",
    "a\\b": "a path separator",
    "..": "starts with a dot (a parent folder)",
    ".": "starts with a dot",
    ".hidden": "starts with a dot",
    "": "empty",
    "tab\there": "a control character",
    "new\nline": "a control character",
    "nul\x00": "a control character",
    "bell\x07": "a control character",
    "x" * 201: "201 bytes long",
}


@pytest.mark.parametrize("text", sorted(BAD_NAMES))
def test_a_name_that_is_not_plain_is_refused_saying_why(text):
    with pytest.raises(ValueError, match="is not a plain name: it (is|holds|starts with) ") as refused:
        names.plain_name(text)
    assert BAD_NAMES[text] in str(refused.value)


@pytest.mark.parametrize("text", ["same", "run-2026.11.27_a", "résumé", "x" * 200, "a..b", "trailing."])
def test_plain_names_pass(text):
    assert names.plain_name(text) == text


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
    from jaxgpt.run import preflight  # noqa: PLC0415

    preset = cfg.replace(cfg.get_preset("tiny"), train=cfg.replace(cfg.get_preset("tiny").train, out_dir=str(tmp_path)))
    with pytest.raises(ValueError, match=r"--run-id '\.\./up' is not a plain name"):
        preflight.start_run(preset, cli.RunOptions(run_id="../up"))
    assert list(tmp_path.iterdir()) == []
