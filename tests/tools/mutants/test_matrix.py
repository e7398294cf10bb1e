"""The kill matrix: rows, summary, results kept as JSON, and PARITY.md's own section replaced in place."""

from jaxgpt_tools.mutants.matrix import (
    BEGIN,
    END,
    RunInfo,
    load_results,
    matrix_rows,
    save_results,
    section,
    summary,
    write_section,
)
from jaxgpt_tools.mutants.mutant import both, jaxgpt_only
from jaxgpt_tools.mutants.run import Outcome

KILLED = jaxgpt_only("a", "scale | misread", "jaxgpt/x.py", "1", "2", ("tests",))
EQUIVALENT = jaxgpt_only("b", "same program", "jaxgpt/x.py", "3", "4", ("tests",), equivalent="x * 1 is x")
UNRUN = both("c", "shared", ("jaxgpt/x.py", "5", "6"), ("torch_ref/x.py", "5", "6"), ("tests",))
RESULTS = {"a": Outcome("a", "jaxgpt", "killed", "tests/test_x.py::test_y", "targeted", 12.4),
           "b": Outcome("b", "jaxgpt", "equivalent", "", "suite", 99.0)}


def test_rows_name_the_killer_the_equivalence_and_what_did_not_run():
    rows = matrix_rows([KILLED, EQUIVALENT, UNRUN], RESULTS)
    assert rows[2] == "| a | jaxgpt | scale \\| misread | killed | `tests/test_x.py::test_y` | targeted | 12 |"
    assert "equivalent: x * 1 is x" in rows[3]
    assert rows[4] == "| c | both | shared | not run |  |  |  |"


def test_summary_counts_by_status_and_mode():
    assert summary([KILLED, EQUIVALENT, UNRUN], RESULTS) == "3 mutants (both 1, jaxgpt 2): killed 1, equivalent 1, not run 1"


def test_results_round_trip(tmp_path):
    path = tmp_path / "r" / "results.json"
    save_results(path, RESULTS)
    assert load_results(path) == RESULTS
    assert load_results(tmp_path / "none.json") == {}


def test_the_section_replaces_only_its_own_text(tmp_path):
    doc = tmp_path / "PARITY.md"
    doc.write_text("# Parity\n\nother engineers' text\n")
    info = RunInfo("make mutants", "not slow", 111.0, "abc123", ("split in two runs",))
    write_section(doc, section([KILLED], RESULTS, info))
    first = doc.read_text()
    assert first.startswith("# Parity\n\nother engineers' text\n\n" + BEGIN)
    assert first.rstrip().endswith(END) and "`make mutants`" in first and "111 s" in first
    assert "\n- split in two runs\n" in first
    doc.write_text(first + "\n## A later section\n")
    write_section(doc, section([KILLED, UNRUN], RESULTS, info))
    second = doc.read_text()
    assert second.count(BEGIN) == 1 and "| c | both |" in second
    assert second.endswith("\n## A later section\n") and second.startswith("# Parity\n\nother engineers' text\n")
