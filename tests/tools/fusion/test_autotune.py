"""Inductor's max_autotune on the machine that times it (fusion/autotune.py, `fusion_report.py
--inductor-max-autotune`) and the run's deadline (`--deadline-s`, fusion.xla.Deadline): the page's
sentence and table from records shaped as a GPU run's (the committed CPU programs relabelled, one GEMM
made a Triton template), a check that fails on skewed counts, the deadline's cut on stand-in
programs, refused arguments, and a tiny real run on this CPU through to the page."""

from __future__ import annotations

import copy
import json

import pytest

from jaxgpt_tools.fusion import autotune, claims, docs
from jaxgpt_tools.fusion.compile_only import MAX_AUTOTUNE_VARIANT
from jaxgpt_tools.fusion.report import REPO_ROOT, load_results
from jaxgpt_tools.fusion.xla import SHAPES, Compiled, Deadline, run_programs

ARTIFACTS = REPO_ROOT / "artifacts" / "fusion"


def timing(median_ms: float) -> dict:
    return {"min_ms": median_ms * 0.9, "p25_ms": median_ms * 0.95, "median_ms": median_ms, "p75_ms": median_ms * 1.05,
            "max_ms": median_ms * 1.1, "repeats": 5, "idle": True, "load_1m": [0.1, 0.1], "interleaved_with": 1}


def as_template(record: dict) -> dict:
    """The record with its first extern GEMM made a Triton template (what an H100's autotuner may keep)."""
    record = copy.deepcopy(record)
    row = next(row for row in record["kernel_table"] if row["kind"] == "extern" and row["gemm"])
    row.update(name="triton_tem_fused_mm_0", kind="template")
    kinds = record["generated_by_kind"]
    kinds["template"] = kinds.get("template", 0) + 1
    return record


@pytest.fixture(scope="module")
def gpu_like():
    """The committed Inductor CPU programs at the small shape as a GPU run's, both variants, timed:
    default merged 2 ms / separate 2.4 ms; autotuned merged 1.5 ms (one template) / separate 2.4 ms."""
    committed = load_results([ARTIFACTS / "results.json"])
    base = [copy.deepcopy(r) for r in committed["records"] if (r["compiler"], r["device"], r["part"], r["shape"]["name"],
                                                               r.get("variant")) == ("inductor", "cpu", "qkv", "small", "default")]
    assert len(base) == 4
    records = []
    for r in base:
        r["device"] = "h100"
        default_ms = 2.0 if r["layout"] == "merged" else 2.4
        tuned = as_template(r) if r["layout"] == "merged" else copy.deepcopy(r)
        records += [{**r, "time": timing(default_ms)},
                    {**tuned, "variant": MAX_AUTOTUNE_VARIANT, "time": timing(1.5 if r["layout"] == "merged" else 2.4)}]
    return records


def test_the_sentence_and_table_say_what_autotuning_changed(gpu_like):
    (claim,) = autotune.autotune_claims(gpu_like)
    assert claim.key == "autotune.inductor_h100" and claim.check()
    assert ("QKV path forward at D 128, T 256: merged 2 ms -> 1.5 ms (1 of its 1 GEMM launches Triton templates), separate "
            "2.4 ms -> 2.4 ms (0 of its 3 GEMM launches Triton templates); separate against merged +20% by default, "
            "+60% autotuned") in claim.text
    table = autotune.autotune_table(gpu_like)
    assert any(line.startswith("| H100 | QKV path forward, T 256 | merged | max_autotune |") and "| 1 / 0 | 1.5 | -25% |"
               in line for line in table)
    # Not an ablation of Inductor's merge passes, and the page carries its section.
    assert not [c for c in claims.answer_claims(gpu_like, []) if c.key == "answer.inductor_merge"]
    section = docs.autotune_section(gpu_like, [claim])
    assert section[0] == "## Inductor with its GEMMs autotuned, where it ran" and f"- {claim.text}" in section


def test_the_check_fails_when_the_counts_disagree(gpu_like):
    skewed = copy.deepcopy(gpu_like)
    tuned = next(r for r in skewed if r.get("variant") == MAX_AUTOTUNE_VARIANT and r["layout"] == "merged")
    tuned["generated_by_kind"]["template"] = 0  # the output code's own count no longer says one template
    assert not autotune.autotune_claims(skewed)[0].check()
    # Without both variants of both layouts there is nothing to compare, so no sentence.
    assert autotune.autotune_claims([r for r in gpu_like if r["layout"] == "merged"]) == []


def test_a_passed_deadline_starts_no_new_pair():
    started = []

    def compile_one(part, mode, layout, shape):
        started.append((mode, layout))
        deadline.at = 0.0  # passes while the first pair compiles
        return Compiled({"compiler": "xla", "device": "cpu", "layout": layout, "kernels": 1, "gemm_kernels": 1,
                         "compile_s": 0.0}, None, None)

    deadline = Deadline.after(None)
    assert not deadline.passed()
    records = run_programs(compile_one, [SHAPES["tiny"]], parts=["qkv"], modes=["fwd", "fwdbwd"], log=lambda _: None,
                           deadline=deadline, variant=MAX_AUTOTUNE_VARIANT)
    assert started == [("fwd", "merged"), ("fwd", "separate")] and len(records) == 2  # a started pair finishes
    assert deadline.not_started == ["qkv_fwdbwd_merged_tiny_max_autotune", "qkv_fwdbwd_separate_tiny_max_autotune"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--compilers", "xla", "--inductor-max-autotune"], "--inductor-max-autotune compiles Inductor's programs again"),
    (["--deadline-s", "0"], "--deadline-s must be positive seconds, not 0")])
def test_refused_arguments_say_why(argv, message, capsys):
    from scripts import fusion_report

    with pytest.raises(SystemExit) as usage:
        fusion_report.main(["--no-gpu-aot", *argv])
    assert usage.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.slow  # ~1 min: both compilers at the tiny shape, Inductor's programs again with max_autotune, the ablations
def test_a_tiny_autotuned_run_reaches_the_page(tmp_path, capsys):
    from scripts import fusion_report

    out = tmp_path / "runs"
    assert fusion_report.main(["--shapes", "tiny", "--inductor-max-autotune", "--parts", "qkv",
                               "--no-gpu-aot", "--no-sweep", "--time-s", "0.01", "--idle-wait-s", "0",
                               "--profile-shapes", "none", "--deadline-s", "3600", "--out", str(out)]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    tuned = [r for r in rows if r["variant"] == MAX_AUTOTUNE_VARIANT]
    assert {(r["mode"], r["layout"]) for r in tuned} == {(m, la) for m in ("fwd", "fwdbwd") for la in ("merged", "separate")}
    assert all(r["time"] > 0 for r in tuned)
    (run,) = json.loads((out / "cpu" / "results.json").read_text())["runs"]
    assert run["inductor_variants"] == [MAX_AUTOTUNE_VARIANT] and run["not_started"] == [] and run["deadline_s"] == 3600
    study = load_results([out])
    (claim,) = autotune.autotune_claims(study["records"])
    assert claim.key == "autotune.inductor_cpu" and claim.check()
    assert fusion_report.main(["--from-results", str(out), "--docs-dir", str(tmp_path / "docs"),
                               "--artifacts-dir", str(tmp_path / "artifacts")]) == 0
    page = (tmp_path / "docs" / "FUSION.md").read_text()
    assert "## Inductor with its GEMMs autotuned, where it ran" in page and claim.text in page
    assert "also compiled with `max_autotune=True` (variant `max_autotune`)" in page


@pytest.mark.slow  # ~15 s: two tiny Inductor compiles, timed
def test_a_timed_variant_pair_is_not_compiled_again_when_timed(tmp_path):
    # Dynamo reset between a pair's layouts made its first program compile again at its first timed
    # call, outside the variant's config patch (so max_autotune's merged was timed as the default's).
    from torch._dynamo.utils import counters

    from jaxgpt_tools.fusion import inductor
    from jaxgpt_tools.fusion.compile_only import MAX_AUTOTUNE
    from jaxgpt_tools.fusion.xla import Timing

    counters.clear()
    records = inductor.run([SHAPES["tiny"]], out_dir=tmp_path, timing=Timing(target_s=0.0, min_repeats=2, max_repeats=2),
                           parts=["qkv"], modes=["fwd"], options=MAX_AUTOTUNE, variant=MAX_AUTOTUNE_VARIANT, log=lambda _: None)
    assert [r["time"]["repeats"] for r in records] == [2, 2]
    assert counters["stats"]["unique_graphs"] == 2  # one per layout, none made again
