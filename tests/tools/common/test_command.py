"""jaxgpt_tools.common.command: the exit statuses and the one-line error of every command."""

from __future__ import annotations

import argparse

import pytest

from jaxgpt_tools.common import command


def test_statuses_of_a_command(capsys, monkeypatch):
    monkeypatch.delenv("JAXGPT_DEBUG", raising=False)
    assert command.run("tool", lambda: None) == 0
    assert command.run("tool", lambda: {"printed": "result"}) == 0
    assert command.run("tool", lambda: 1) == 1

    def missing():
        raise FileNotFoundError("no shards match 'x/*.bin'\nlook in data/")

    assert command.run("tool", missing) == 1
    assert capsys.readouterr().err == "tool: error: no shards match 'x/*.bin' | look in data/\n"

    def interrupted():
        raise KeyboardInterrupt

    assert command.run("tool", interrupted) == 130


def test_the_traceback_only_with_jaxgpt_debug(monkeypatch):
    monkeypatch.setenv("JAXGPT_DEBUG", "1")

    def bad():
        raise ValueError("bad value")

    with pytest.raises(ValueError, match="bad value"):
        command.run("tool", bad)


def test_a_refused_flag_is_a_usage_error(capsys):
    parser = argparse.ArgumentParser(prog="tool")
    with pytest.raises(SystemExit) as exited:
        command.usage_error(parser, ValueError("unknown suite 'x'"))
    assert exited.value.code == 2 and "tool: error: unknown suite 'x'" in capsys.readouterr().err
