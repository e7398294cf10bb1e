"""jaxgpt_tools.bench.suites through scripts/bench.py: the JSON it prints, and the O(T * W) vs O(T^2)
memory claim it measures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxgpt_tools.bench import suites as bench

REPO_ROOT = Path(__file__).resolve().parents[3]
BENCH = REPO_ROOT / "scripts" / "bench.py"


def _run_bench(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *flags], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)


def test_unknown_suite_is_refused_with_its_name():
    done = _run_bench("--json", "--only", "attention,nonsense")
    assert done.returncode != 0
    assert "nonsense" in done.stderr
    assert done.stdout == ""  # no half-written JSON


def test_parse_suites_accepts_known_names():
    assert bench.parse_suites("attention, train_step") == ["attention", "train_step"]
    with pytest.raises(ValueError, match="nonsense"):
        bench.parse_suites("nonsense")


@pytest.mark.slow  # ~15-20 s on 2 CPU cores: compiles 8 attention programs
def test_quick_attention_json_and_memory_scaling():
    done = _run_bench("--json", "--quick", "--only", "attention", "--dtypes", "fp32", "--repeats", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)  # stdout must be exactly one JSON object
    assert result["machine"]["cpu_count"] >= 1
    assert result["machine"]["jax"] and result["machine"]["devices"]
    assert list(result["suites"]) == ["attention"]
    rows = result["suites"]["attention"]["rows"]
    assert {(r["backend"], r["window_cap"]) for r in rows} == {
        (backend, cap) for backend in ("dense", "blocked") for cap in (14, 4)
    }
    for row in rows:
        assert row["temp_mib"] > 0 and row["argument_mib"] > 0 and row["compile_s"] > 0
        if row["backend"] == "blocked" or row["seq_len"] == 1024:
            assert row["median_ms"] > 0
        else:
            assert row["timed"] is False and "median_ms" not in row

    def temp(backend: str, seq_len: int, cap: int) -> float:
        (row,) = [r for r in rows if (r["backend"], r["seq_len"], r["window_cap"]) == (backend, seq_len, cap)]
        return row["temp_mib"]

    largest = max(r["seq_len"] for r in rows)
    smallest = min(r["seq_len"] for r in rows)
    for cap in (14, 4):
        assert temp("blocked", largest, cap) < temp("dense", largest, cap)
    # Growing T by a factor f grows dense scratch ~f^2 and blocked scratch at most ~f (plus a
    # constant): check the measured ratios against those bounds with slack.
    factor = largest / smallest
    assert temp("dense", largest, 4) / temp("dense", smallest, 4) > 0.5 * factor**2
    assert temp("blocked", largest, 4) / temp("blocked", smallest, 4) < 1.5 * factor


def test_newton_schulz_split_runs_in_a_child_with_its_own_virtual_devices():
    result = bench.bench_ns_suite(scale=32, repeats=1, split_devices=2)
    assert result["single"]["devices"] == 1 and result["split"]["devices"] == 2
    assert result["split"]["split_s"] > 0
