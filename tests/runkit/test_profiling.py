"""runkit.profiling: `--profile` names only the steps a run takes (each trainer's refusal before
its first step: tests/run/test_profiling.py, tests/torch_ref/run/test_profiling.py)."""

from __future__ import annotations

import pytest

from runkit.profiling import check_window


@pytest.mark.parametrize("window, start, total", [(None, 0, 4), ((1, 4), 0, 4), ((2, 2), 1, 4), ((5, 6), 4, 6)])
def test_a_window_inside_the_run_passes(window, start, total):
    check_window(window, start, total)


@pytest.mark.parametrize("window, start, total, logs", [((3, 5), 0, 4, "step:1 .. step:4"),
                                                        ((2, 3), 2, 10, "step:3 .. step:10")])
def test_a_window_beyond_the_run_or_before_its_start_is_refused(window, start, total, logs):
    with pytest.raises(ValueError, match=rf"--profile {window[0]}:{window[1]} names steps this run does not take "
                                         rf"\(it logs {logs}\)"):
        check_window(window, start, total)
