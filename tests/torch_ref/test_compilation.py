"""torch_ref.compilation: torch_ref's GPU path compiles as the record's script does. The settings
are read back here on the CPU; where the records' logs are present, every Inductor and allocator
setting the Sub3Min script makes is checked to be one torch_ref makes too."""

from __future__ import annotations

import os
import re

import pytest
import torch
import torch._inductor.config as inductor_config

from jaxgpt_tools.parity import record_code, record_logs
from torch_ref import compilation

# The Sub3Min log where the parity suite finds it ($JAXGPT_UPSTREAM_LOGS, else ../shared/upstream).
RECORD_LOG = record_code.logs_root() / record_code.RECORD_LOGS["record"].folder / record_code.RECORD_LOGS["record"].file


def test_compile_model_sets_the_records_inductor_settings_and_compiles():
    with inductor_config.patch(coordinate_descent_tuning=False):
        compiled = compilation.compile_model(torch.nn.Linear(2, 2))
        assert inductor_config.coordinate_descent_tuning is True
    assert hasattr(compiled, "_orig_mod")  # torch.compile's wrapper: compiled on first call


def test_the_allocator_setting_leaves_a_users_own_value(monkeypatch):
    name, value = compilation.ALLOCATOR_SETTING
    monkeypatch.delenv(name, raising=False)
    compilation.set_allocator()
    assert os.environ[name] == value == "expandable_segments:True"
    monkeypatch.setenv(name, "max_split_size_mb:128")
    compilation.set_allocator()
    assert os.environ[name] == "max_split_size_mb:128"


def test_every_compile_setting_of_the_records_script_is_torch_refs():
    # Skipped without the log, with the reason; an error under JAXGPT_REQUIRE_UPSTREAM_LOGS=1 (.ci/run).
    if (reason := record_logs.check_logs(["record"])) is not None:
        pytest.skip(reason)
    source = RECORD_LOG.read_text().split("\n" + "=" * 100 + "\n")[0]
    inductor = dict(re.findall(r"^torch\._inductor\.config\.(\w+) = (\w+)", source, flags=re.MULTILINE))
    environment = dict(re.findall(r'^os\.environ\["(PYTORCH_\w+)"\] = "([^"]+)"', source, flags=re.MULTILINE))
    assert inductor == {name: str(value) for name, value in compilation.INDUCTOR_SETTINGS.items()}
    assert environment == dict([compilation.ALLOCATOR_SETTING])
