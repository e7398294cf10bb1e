"""The console commands pyproject.toml declares (jaxgpt-train, jaxgpt-sample, torch-ref-train):
each names a main(argv) that exists and answers --help, as `python -m` does."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

SCRIPTS = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["scripts"]


def test_the_trainers_and_the_sampler_have_commands():
    assert SCRIPTS == {"jaxgpt-train": "jaxgpt.train:main", "jaxgpt-sample": "jaxgpt.sample:main",
                       "torch-ref-train": "torch_ref.train:main"}


@pytest.mark.parametrize("command", sorted(SCRIPTS))
def test_command_target_answers_help(command, capsys):
    module, function = SCRIPTS[command].split(":")
    main = getattr(importlib.import_module(module), function)
    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    assert stopped.value.code == 0
    assert "usage:" in capsys.readouterr().out
