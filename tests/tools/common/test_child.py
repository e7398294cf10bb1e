"""jaxgpt_tools.common.child: a library function in a fresh process, its JSON result back; its
failure and its time limit reported, only library functions accepted."""

from __future__ import annotations

import subprocess

import pytest

from jaxgpt_tools.common import child


def test_a_function_runs_in_a_child_and_returns_its_json_result():
    assert child.call("jaxgpt.config:next_multiple", {"value": 50257, "multiple": 128}) == 50304


def test_a_failing_child_raises_with_its_error_and_only_library_functions_run():
    with pytest.raises(child.ChildFailed, match="unknown preset 'nope'"):
        child.call("jaxgpt.presets:get_preset", {"name": "nope"})
    with pytest.raises(child.ChildFailed, match="expected 'jaxgpt_tools.<module>:<function>'"):
        child.call("os:system", {"command": "true"})
    with pytest.raises(ValueError, match="expected"):
        child.resolve("subprocess:run")


def test_a_failed_childs_exit_status_and_stderr_lines_reach_the_caller():
    lines: list[str] = []
    with pytest.raises(child.ChildFailed) as failed:
        child.call("jaxgpt.presets:get_preset", {"name": "nope"}, on_stderr_line=lines.append)
    assert failed.value.returncode == 1 and "unknown preset 'nope'" in failed.value.stderr
    assert lines == failed.value.stderr.splitlines()


def test_a_child_past_its_time_limit_is_stopped():
    with pytest.raises(subprocess.TimeoutExpired):
        child.call("jaxgpt_tools.gpu.device_plan:run_streamed", {}, timeout_s=0.01)
