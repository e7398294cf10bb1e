"""jaxgpt_tools.reports.lineage (scripts/lineage_report.py): the numbers it reads from the
specification, the study's table and the page it renders."""

from __future__ import annotations

import pytest

from jaxgpt_tools.reports import lineage as report


def test_record_facts_are_read_from_the_specification():
    facts = report.record_facts()
    assert sorted(facts) == [8, 9, 15, 18, 20]
    assert (facts[8].train_time_ms, facts[8].steps, facts[8].trajectory[-1]) == (648_063, 4578, (4578, 3.2762))
    assert (facts[15].minutes, facts[15].trajectory[1]) == (3.95, (125, 4.4041))
    assert facts[18].trajectory[-1] == (1390, 3.2785) and len(facts[18].trajectory) == 13
    assert facts[20].trajectory[0] == (0, 10.8258) and facts[20].trajectory[-1] == (1393, 3.2785)
    assert all(f.trajectory[0] == (0, 10.8258) for f in facts.values())  # ln(50304) in every log


def test_study_table_means_and_spreads():
    runs = [report.StudyRun("softcap", framework, seed, {0: 10.8, 4: final}, 1.0)
            for (framework, seed), final in {("jaxgpt", 0): 6.0, ("jaxgpt", 1): 6.5, ("torch_ref", 0): 6.25,
                                             ("torch_ref", 1): 6.75}.items()]
    row = report.study_table(runs, 4)["softcap"]
    assert row["jaxgpt"] == {"mean": 6.25, "spread": 0.5, "n": 2}
    assert row["all"]["mean"] == pytest.approx(6.375) and row["all"]["spread"] == 0.75


def test_render_has_a_row_per_preset_and_says_what_was_not_measured():
    facts = report.record_facts()
    results = {"machine": "m", "versions": "v", "facts": report.facts_json(facts),
               "parameters": {name: 1000 + i for i, name in enumerate(report.PRESETS)},
               "step_times": {"softcap": {"jaxgpt": 1.5, "torch_ref": 2.25}}}
    page = report.render(results, "python scripts/lineage_report.py")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows) == len(report.PRESETS)
    softcap = next(row for row in rows if row.startswith("| `softcap`"))
    assert "#18 SoftCap" in softcap and "1.50 s | 2.25 s" in softcap and "204,345 ms" in softcap
    assert "not measured" in rows[0]
    assert "python scripts/lineage_report.py" in page and "## A small lineage study" not in page
