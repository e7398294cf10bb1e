"""docs/FUSION.md against the committed results (artifacts/fusion/): the page is exactly what
its generator makes from them, every sentence's check holds, and the committed programs
reproduce the per-kernel tables the sentences are made from. Reads files only (no compiling)."""

from __future__ import annotations

import json

import pytest

from jaxgpt_tools.common.hlo import hlo_counts
from jaxgpt_tools.fusion import byte_model
from jaxgpt_tools.fusion import claims as fusion_claims
from jaxgpt_tools.fusion import docs as fusion_docs
from jaxgpt_tools.fusion.inductor import read_code
from jaxgpt_tools.fusion.records import find
from jaxgpt_tools.fusion.report import REPO_ROOT, load_results
from jaxgpt_tools.fusion.xla import kernel_rows

ARTIFACTS = REPO_ROOT / "artifacts" / "fusion"
PAGE = REPO_ROOT / "docs" / "FUSION.md"


@pytest.fixture(scope="module")
def committed():
    study = load_results([ARTIFACTS / "results.json"])
    command = json.loads((ARTIFACTS / "results.json").read_text())["command"]
    return study, command


def test_page_is_generated_from_the_committed_results(committed):
    study, command = committed
    expected = fusion_docs.page(study, command=command, artifacts_dir=ARTIFACTS, docs_dir=PAGE.parent)
    assert PAGE.read_text() == expected, "docs/FUSION.md differs from its generator's output: regenerate it with " \
        "python scripts/fusion_report.py --from-results artifacts/fusion --write-docs"


def test_every_sentence_is_checked_and_on_the_page(committed):
    study, _ = committed
    page = PAGE.read_text()
    made = fusion_docs.page_claims(study)
    assert {c.key.split(".")[0] for c in made} >= {"answer", "method", "why", "ablation", "block", "sweep"}
    for claim in made:
        assert claim.check(), f"the check behind {claim.key} fails on the committed results: {claim.text}"
        assert claim.text in page, f"{claim.key} is not on the page"
    # The page opens with the answer: its table, then at most five sentences.
    answer = [c.text for c in made if c.key.startswith("answer")]
    assert 1 <= len(answer) <= 5
    first, second = page.split("\n\n")[1:3]
    assert first.startswith("| target | layout |") and second == " ".join(answer)
    assert "needs a GPU to be generated" not in page and "generated only on a GPU" not in page
    # Every compile-only target is labelled so wherever it is named.
    assert "H100 (compile only)" not in page


def test_answer_table_has_every_target(committed):
    study, _ = committed
    targets = set(fusion_claims.answer_programs(study["records"]))
    assert targets == {("xla", "cpu"), ("inductor", "cpu"), ("xla", "h100-compile-only"), ("inductor", "h100-compile-only")}


def test_committed_programs_reproduce_their_records(committed):
    study, _ = committed
    records = study["records"]
    kept = [r for r in records if r.get("files")]
    assert {(r["compiler"], r["device"]) for r in kept} >= {("xla", "cpu"), ("xla", "h100-compile-only"), ("inductor", "cpu"),
                                                          ("inductor", "h100-compile-only")}
    for record in kept:
        texts = [(ARTIFACTS / name).read_text() for name in record["files"]]
        if record["compiler"] == "xla":
            (hlo,) = texts
            # the text's rows under the study's one byte model (the compiler's own count kept as own_*)
            assert byte_model.apply_to_record({**record, "kernel_table": kernel_rows(hlo)})["kernel_table"] == \
                record["kernel_table"], record["files"]
            assert hlo_counts(hlo)["kernels"] == record["kernels"]
        else:
            launches = [row for text in texts for row in read_code(text)["launches"]]
            assert byte_model.apply_to_record({**record, "kernel_table": launches})["kernel_table"] == \
                [{k: v for k, v in row.items() if k != "graph"} for row in record["kernel_table"]]
        # merged beside separate: the other layout's program is kept too
        twin = find(kept, **{k: record[k] for k in ("compiler", "device", "part", "mode", "shape", "variant")
                                           if k in record}, layout="separate" if record["layout"] == "merged" else "merged")
        assert twin is not None or record.get("variant", "default") != "default", record["files"]


def test_an_empty_time_panel_says_why_it_is_empty():
    """fusion.png's panels without bars: CPU programs timed on a loaded machine are not 'compiled
    without a GPU' (the label they once had); only the H100 columns are."""
    from jaxgpt_tools.fusion.docs import empty_panel_text

    loaded_cpu = {"device": "cpu", "time": {"idle": False, "median_ms": 1.0}}
    compiled_only = {"device": "h100-compile-only", "time": None}
    assert empty_panel_text([loaded_cpu, compiled_only]) == "timed, not shown: the machine was not idle"
    assert empty_panel_text([compiled_only]) == "not timed: compiled without a GPU"
    assert empty_panel_text([{"device": "cpu", "time": None}]) == "not timed"


# The sentences the study's question (does merging Q, K and V change what each compiler fuses?)
# cannot do without: each target's answer, how it was measured, each compiler's reasons forward and
# backward, the dot merger's rule. A regeneration that loses one fails here, not silently.
NEEDED_CLAIMS = (
    "answer.gemms", "answer.bytes", "answer.time", "answer.inductor_merge",
    "method.programs", "method.equal_xla", "method.equal_inductor",
    "method.run_h100-compile-only_xla", "method.run_h100-compile-only_inductor", "method.provenance",
    "why.xla_cpu_ynn", "why.xla_h100_prologue", "why.xla_h100_norm", "why.backward_xla_cpu",
    "why.backward_xla_h100-compile-only", "why.inductor_cpu", "why.inductor_h100-compile-only",
    "why.inductor_backward_cpu", "why.inductor_backward_h100-compile-only", "sweep.rule", "sweep.backward",
    "sweep.threshold", "sweep.widths",
    "roofline.method", "roofline.record", "roofline.gemms", "roofline.path", "roofline.across_t", "related.work",
)


def test_the_sentences_the_question_needs_are_made_and_on_the_page(committed):
    study, _ = committed
    page = PAGE.read_text()
    made = {claim.key: claim for claim in fusion_docs.page_claims(study)}
    missing = [key for key in NEEDED_CLAIMS if key not in made]
    # The CPU programs' run: one of both compilers, or one of each.
    assert "method.run_cpu_both" in made or {"method.run_cpu_xla", "method.run_cpu_inductor"} <= set(made)
    assert not missing, f"the generator no longer makes {missing}"
    assert all(made[key].text in page for key in NEEDED_CLAIMS)
    # The prologue sentence covers the backward too, where the weights' bf16 copies are written.
    assert "forward+backward" in made["why.xla_h100_prologue"].text
