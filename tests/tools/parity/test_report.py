"""jaxgpt_tools.parity.report (scripts/parity_report.py): the page it writes from check results."""

from __future__ import annotations

from jaxgpt_tools.parity import report as parity_report
from jaxgpt_tools.parity.measures import Result

PASSED = Result("NS | bf16", 1e-3, 2e-3, "<= 1e-2", "bf16 ulp", True, "note")
FAILED = Result("loss", 0.5, 0.1, "<= 1e-5", "fp32 rounding", False, "a|b")


def test_render_writes_one_escaped_row_per_check_and_links_the_plot():
    page = parity_report.render({"a": PASSED, "b": FAILED}, "plot.png")
    rows = [line for line in page.splitlines() if line.startswith("| ") and not line.startswith("| check")]
    assert len(rows) == 2
    assert rows[0].startswith("| NS \\| bf16 | 1.000e-03 | 2.000e-03 |") and "| pass |" in rows[0]
    assert "| FAIL |" in rows[1] and rows[1].endswith("| a\\|b |  |")  # a bare | would end the cell; no record column
    assert "python scripts/parity_report.py" in page and page.rstrip().endswith("(plot.png)")


def test_run_report_writes_the_page_and_says_whether_every_check_passed(monkeypatch, tmp_path):
    monkeypatch.setitem(parity_report.CHECKS, "passes", lambda: PASSED)
    monkeypatch.setitem(parity_report.CHECKS, "fails", lambda: FAILED)
    out = tmp_path / "PARITY.md"
    assert parity_report.run_report(["passes"], out) is True
    assert "NS \\| bf16" in out.read_text() and not (tmp_path / "parity_trajectories.png").exists()
    assert parity_report.run_report(["passes", "fails"], out) is False


def test_the_mutation_score_section_survives_a_regeneration(monkeypatch, tmp_path):
    """`make mutants` writes its own marked section into PARITY.md; the parity report keeps it."""
    from jaxgpt_tools.mutants import matrix

    monkeypatch.setitem(parity_report.CHECKS, "passes", lambda: PASSED)
    out = tmp_path / "PARITY.md"
    section = f"{matrix.BEGIN}\n## Mutation score\n\nkilled 79 of 79\n{matrix.END}"
    out.write_text(f"old rows\n\n{section}\n")
    assert parity_report.run_report(["passes"], out) is True
    text = out.read_text()
    assert "old rows" not in text and "NS \\| bf16" in text and text.count(section) == 1
