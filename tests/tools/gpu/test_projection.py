"""jaxgpt_tools.gpu.hlo_schedule and .projection, and scripts/project_8gpu.py: the 8-GPU projection's arithmetic."""

import json
from pathlib import Path

import pytest

from jaxgpt_tools.gpu import hlo_schedule, projection
from jaxgpt_tools.gpu.compile_plan import PEAKS

ROOT = Path(__file__).resolve().parents[3]

# A scheduled module in XLA:GPU's text form: an async all-reduce with one GEMM fusion between its
# start and done, then a while loop of 4 trips around an elementwise fusion, then an all-gather
# whose start has a tuple type (operand, result) and nothing between start and done.
HLO = """HloModule step, is_scheduled=true

%fused_dot (p0: bf16[64,32], p1: bf16[32,16]) -> bf16[64,16] {
  %p0 = bf16[64,32]{1,0} parameter(0)
  %p1 = bf16[32,16]{1,0} parameter(1)
  ROOT %dot = bf16[64,16]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%negate (q: f32[256]) -> f32[256] {
  %q = f32[256]{0} parameter(0)
  ROOT %n = f32[256]{0} negate(%q)
}

%body (t: (s32[], f32[256])) -> (s32[], f32[256]) {
  %t = (s32[], f32[256]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[256]{0} get-tuple-element(%t), index=1
  %y = f32[256]{0} fusion(%x), kind=kLoop, calls=%negate
  ROOT %r = (s32[], f32[256]{0}) tuple(%i, %y)
}

ENTRY %main (a: bf16[64,32], b: bf16[32,16], g: f32[1024], w: (s32[], f32[256])) -> f32[1024] {
  %a = bf16[64,32]{1,0} parameter(0)
  %b = bf16[32,16]{1,0} parameter(1)
  %g = f32[1024]{0} parameter(2)
  %w = (s32[], f32[256]{0}) parameter(3)
  %ars = f32[1024]{0} all-reduce-start(%g), channel_id=1, replica_groups={{0,1}}, to_apply=%add
  %gemm = bf16[64,16]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused_dot
  %ard = f32[1024]{0} all-reduce-done(%ars)
  %loop = (s32[], f32[256]{0}) while(%w), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"4"}}
  %out = f32[1024]{0} copy(%ard)
  %ags = (bf16[1,16]{1,0}, bf16[8,16]{1,0}) all-gather-start(%gemm), dimensions={0}
  ROOT %agd = bf16[8,16]{1,0} all-gather-done(%ags)
}
"""


def roofline_ms(flops: float, moved: int) -> float:
    flop_rate, byte_rate = PEAKS["h100"]
    return 1e3 * max(flops / flop_rate, moved / byte_rate)


def test_schedule_places_each_collective_among_the_compute():
    schedule = hlo_schedule.collective_schedule(HLO)
    gemm = roofline_ms(2 * 64 * 16 * 32, 2 * (64 * 32 + 32 * 16 + 64 * 16))
    loop = 4 * roofline_ms(0, 2 * 4 * 256)  # body: one fusion reading and writing f32[256], 4 trips
    copy = roofline_ms(0, 2 * 4 * 1024)
    assert schedule["compute_ms"] == pytest.approx(gemm + loop + copy, rel=1e-3)
    reduce, gather = schedule["collectives"]
    assert (reduce["kind"], reduce["bytes"], reduce["asynchronous"]) == ("all-reduce", 4096, True)
    assert reduce["compute_before_ms"] == 0
    assert reduce["compute_between_ms"] == pytest.approx(gemm, rel=1e-3)
    assert reduce["compute_after_ms"] == pytest.approx(loop + copy, rel=1e-3)
    assert (gather["name"], gather["kind"], gather["bytes"]) == ("ags", "all-gather", 2 * 8 * 16)  # the done's result
    assert gather["compute_between_ms"] == 0 and gather["compute_before_ms"] == pytest.approx(gemm + loop + copy, rel=1e-3)


def schedules(between_ms: float):
    one = {"compute_ms": 60.0, "collectives": []}
    eight = {"compute_ms": 58.0, "collectives": [
        {"name": "ar", "kind": "all-reduce", "bytes": 100 * 2**20, "asynchronous": True,
         "compute_before_ms": 50.0, "compute_between_ms": between_ms, "compute_after_ms": 8.0},
        {"name": "ag", "kind": "all-gather", "bytes": 40 * 2**20, "asynchronous": True,
         "compute_before_ms": 55.0, "compute_between_ms": 0.0, "compute_after_ms": 3.0}]}
    return one, eight


def test_projection_counts_link_time_split_saving_and_the_hidden_part():
    a = projection.Assumptions(link_gb_per_s_per_direction=400.0, link_efficiency=0.5, latency_us=10.0)
    rate = 400e9 * 0.5
    ar = 0.01 + 1e3 * (2 * 7 / 8 * 100 * 2**20) / rate  # ring all-reduce: 2(n-1)/n of the bytes
    ag = 0.01 + 1e3 * (7 / 8 * 40 * 2**20) / rate
    result = projection.project(*schedules(between_ms=0.2), measured_step_ms=195.0, assumptions=a)
    assert result["split_saving_ms"] == 2.0
    assert result["communication_ms"] == pytest.approx(ar + ag, abs=0.01)
    assert result["exposed_communication_ms"] == pytest.approx(ar - 0.2 + ag, abs=0.01)
    assert result["step_ms"] == pytest.approx(193.0 + ar - 0.2 + ag, abs=0.05)
    assert result["run_minutes"] == pytest.approx(result["step_ms"] * 1383 / 60000, abs=0.01)
    assert result["step_ms_no_overlap"] == pytest.approx(193.0 + ar + ag, abs=0.05)
    assert "projection" in result["label"] and result["assumptions"]["link_efficiency"] == 0.5
    # A long enough compute window hides the whole all-reduce; NVLS sends an all-reduce's bytes once.
    hidden = projection.project(*schedules(between_ms=100.0), measured_step_ms=195.0, assumptions=a)
    assert hidden["exposed_communication_ms"] == pytest.approx(ag, abs=0.01)
    nvls = projection.wire_bytes("all-reduce", 800, projection.Assumptions(algorithm="nvls"))
    assert nvls == 800 and projection.wire_bytes("all-reduce", 800, projection.Assumptions()) == 1400
    with pytest.raises(ValueError, match="no collectives"):
        projection.project(schedules(0)[0], schedules(0)[0], 195.0)


def test_the_newest_non_dry_run_gpu_check_gives_the_measured_step(tmp_path):
    def report(name, started, step, dry=False):
        (tmp_path / name).write_text(json.dumps({"started": started, "dry_run": dry, "train": {"jax_step_ms": step}}))

    report("a.json", "2026-11-23 11:03:47 UTC", 195)
    report("b.json", "2026-12-01 09:00:00 UTC", 180)
    report("c.json", "2026-12-02 09:00:00 UTC", 9999, dry=True)
    assert projection.newest_measured_step([str(tmp_path / "*.json")]) == (180.0, str(tmp_path / "b.json"))
    step, source = projection.newest_measured_step([str(tmp_path / "none*.json")])
    assert step == projection.LAST_MEASURED_STEP_MS and "LAST_MEASURED_STEP_MS" in source


def test_project_8gpu_prints_the_projection_from_the_committed_plans(capsys):
    from scripts import project_8gpu

    assert project_8gpu.main(["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    source = ROOT / result["measured_step_source"]
    measured = json.loads(source.read_text())["train"]["jax_step_ms"] if source.is_file() else projection.LAST_MEASURED_STEP_MS
    assert result["measured_one_device_step_ms"] == measured
    assert result["step_ms"] > 0 and result["run_minutes"] == pytest.approx(result["step_ms"] * 1383 / 60000, abs=0.01)
    assert result["record_step_ms"] == 129.7 and result["assumptions"]["algorithm"] == "ring"
    assert {row["kind"] for row in result["collectives"]} == {"all-reduce", "all-gather"}


def test_the_newest_gpu_report_gives_the_measured_step_device_plans_included(tmp_path):
    from jaxgpt_tools.gpu import projection

    reports = {"old_gpu_check.json": {"started": "2026-11-23 10:00:00", "train": {"jax_step_ms": 195}},
               "plan_summary.json": {"started_utc": "2026-11-28 09:00:00", "jax_step_ms": 150.5},
               "cpu_summary.json": {"started_utc": "2026-11-29 09:00:00", "jax_step_ms": 2400, "cpu_stand_ins": True},
               "dry_gpu_check.json": {"started": "2026-11-30", "dry_run": True, "train": {"jax_step_ms": 9}},
               "h200_summary.json": {"started_utc": "2026-12-01 09:00:00", "jax_step_ms": 139.0,
                                     "steps": {"preflight": {"results": {"gpu": "NVIDIA H200"}}}}}
    for name, report in reports.items():
        (tmp_path / name).write_text(json.dumps(report))
    step, source = projection.newest_measured_step([str(tmp_path / "*.json")])
    assert step == 150.5 and source.endswith("plan_summary.json")
