"""One real, cheap mutant (Sub3Min's window schedule with floor for ceil) killed by one fast test;
the pytest output parsed for the killing test; a phase past its limit counts as a timeout."""

import sys
from pathlib import Path

from jaxgpt_tools.mutants.apply import export_tracked
from jaxgpt_tools.mutants.catalogue import select
from jaxgpt_tools.mutants.run import Limits, PhaseResult, first_failure, run_mutant, verdict

REPO = Path(__file__).resolve().parents[3]
FAST_TEST = "tests/test_schedules.py::test_window_blocks_every_record_step"


def test_a_real_mutant_is_killed_by_its_targeted_test(tmp_path):
    mutant = select("window-floor")[0]
    cheap = type(mutant)(mutant.id, mutant.meaning, mutant.mode, mutant.edits, (FAST_TEST,))
    base = export_tracked(REPO, tmp_path / "base")
    outcome = run_mutant(cheap, base, tmp_path / "work", Limits(targeted_s=240, run_suite=False))
    assert (outcome.status, outcome.killed_by, outcome.phase) == ("killed", FAST_TEST, "targeted")
    assert not (tmp_path / "work").exists()  # the copy is removed


def test_first_failure_reads_the_summary_line():
    output = "....F\n=== short test summary info ===\nFAILED tests/a.py::test_b[1] - assert 1 == 2\n"
    assert first_failure(output) == "tests/a.py::test_b[1]"
    assert first_failure("E   ImportError: x\nERROR tests/c.py\n") == "tests/c.py"
    assert first_failure("") == "no output"


def test_a_timeout_counts_as_surviving_and_a_stale_target_as_an_error():
    mutant = select("window-floor")[0]
    timed_out = verdict(mutant, PhaseResult(None, "timeout", ""), "suite", 5.0)
    assert timed_out is not None and timed_out.status == "timeout"
    stale = verdict(mutant, PhaseResult(5, "no tests ran", ""), "targeted", 1.0)
    assert stale is not None and stale.status == "error"
    assert verdict(mutant, PhaseResult(0, "", ""), "targeted", 1.0) is None
    assert sys.executable  # the runs use this interpreter
