"""The records' logs required or not (jaxgpt_tools.parity.record_logs): without
JAXGPT_REQUIRE_UPSTREAM_LOGS a clone without the logs skips the tests that need them, its
record's-code column says "not run" and the report leaves those rows out; with it (.ci/run) each of
these is an error naming every missing log and how to get it. An empty logs folder; no model runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.parity import record_code_columns, record_logs
from jaxgpt_tools.parity import report as parity_report
from jaxgpt_tools.parity.measures import Result

PASSED = Result("a row", 1e-3, 2e-3, "<= 1e-2", "bf16 ulp", True, "note")


@pytest.fixture
def no_logs(monkeypatch, tmp_path):
    """An empty logs folder, the switch unset."""
    monkeypatch.setenv(record_logs.LOGS_ENV, str(tmp_path))
    monkeypatch.delenv(record_logs.REQUIRE_ENV, raising=False)
    return tmp_path


def _write_logs(root, names) -> None:
    for name in names:
        log = record_logs.RECORD_LOGS[name]
        (root / log.folder).mkdir(parents=True)
        (root / log.folder / log.file).write_text(f"script of {name}\n")


def _missing_log():
    return record_logs.log_path("record")  # FileNotFoundError: the folder is empty


def test_the_switch_is_read_in_one_place_and_a_misspelt_value_is_refused(monkeypatch):
    for value, required in (("", False), ("0", False), ("1", True), (" 1 ", True)):
        monkeypatch.setenv(record_logs.REQUIRE_ENV, value)
        assert record_logs.logs_required() is required
    monkeypatch.delenv(record_logs.REQUIRE_ENV)
    assert record_logs.logs_required() is False
    monkeypatch.setenv(record_logs.REQUIRE_ENV, "yes")
    with pytest.raises(ValueError, match="JAXGPT_REQUIRE_UPSTREAM_LOGS='yes': set it to 1"):
        record_logs.logs_required()


def test_without_the_switch_a_missing_log_is_a_reason_to_skip(no_logs):
    reason = record_logs.check_logs()
    for log in record_logs.RECORD_LOGS.values():
        assert f"#{log.number} " in reason and log.file in reason
    assert str(no_logs) in reason and record_logs.FETCH_HINT in reason
    assert record_logs.check_logs(["softcap"]).startswith("the log of record #18 softcap (2025-01-04_SoftCap/")
    _write_logs(no_logs, ["softcap"])
    assert record_logs.check_logs(["softcap"]) is None and "#18" not in record_logs.check_logs()
    with pytest.raises(ValueError, match="unknown records \\['sub4min'\\]"):
        record_logs.check_logs(["sub4min"])


def test_with_the_switch_a_missing_log_is_an_error_naming_every_one(no_logs, monkeypatch):
    _write_logs(no_logs, ["untie-embed", "record"])
    monkeypatch.setenv(record_logs.REQUIRE_ENV, "1")
    with pytest.raises(record_logs.RequiredLogsMissing) as raised:
        record_logs.check_logs()
    message = str(raised.value)
    assert all(f"#{n} " in message for n in (9, 15, 18)) and "#8 " not in message and "#20 " not in message
    assert record_logs.FETCH_HINT in message and "JAXGPT_REQUIRE_UPSTREAM_LOGS=1" in message
    assert record_logs.check_logs(["untie-embed", "record"]) is None  # present: no error
    _write_logs(no_logs, ["shortcuts", "unet-value-embeds", "softcap"])
    assert record_logs.check_logs() is None


def test_the_up_front_check_exits_1_naming_the_missing_logs(no_logs):
    command = [sys.executable, "-m", "jaxgpt_tools.parity.record_logs"]
    env = {"PATH": "/usr/bin:/bin", record_logs.LOGS_ENV: str(no_logs)}
    missing = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "#8 untie-embed" in missing.stderr and "#20 record" in missing.stderr
    assert "scripts/fetch_record.py --lineage-logs" in missing.stderr
    _write_logs(no_logs, record_logs.RECORD_LOGS)
    present = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert present.returncode == 0 and "the five records' logs are under" in present.stdout


def test_the_record_code_column_says_not_run_or_raises(no_logs, monkeypatch):
    text, ok = record_code_columns.column(_missing_log)
    assert ok and text.startswith("not run: no log of record #20") and record_logs.FETCH_HINT in text
    monkeypatch.setenv(record_logs.REQUIRE_ENV, "1")
    with pytest.raises(record_logs.RequiredLogsMissing, match=r"logs of records #8 untie-embed .* #20 record"):
        record_code_columns.column(_missing_log)
    _write_logs(no_logs, record_logs.RECORD_LOGS)  # every log there: another missing file is not a log's

    def other_file():
        raise FileNotFoundError("no such shard")

    with pytest.raises(FileNotFoundError, match="no such shard"):
        record_code_columns.column(other_file)


def test_the_report_leaves_rows_out_or_stops_before_its_first_check(no_logs, monkeypatch, tmp_path):
    ran = []

    def needs_a_log():
        ran.append("needs_a_log")
        _missing_log()

    monkeypatch.setitem(parity_report.CHECKS, "passes", lambda: PASSED)
    monkeypatch.setitem(parity_report.CHECKS, "needs_a_log", needs_a_log)
    out = tmp_path / "PARITY.md"
    assert parity_report.run_report(["passes", "needs_a_log"], out) is True  # the row is left out
    assert "a row" in out.read_text() and ran == ["needs_a_log"]
    out.unlink()
    monkeypatch.setenv(record_logs.REQUIRE_ENV, "1")
    with pytest.raises(record_logs.RequiredLogsMissing, match=r"not under .*scripts/fetch_record\.py"):
        parity_report.run_report(["passes", "needs_a_log"], out)
    assert ran == ["needs_a_log"] and not out.exists()  # nothing ran, nothing written
