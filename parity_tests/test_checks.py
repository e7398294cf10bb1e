"""Every check of parity_tests.checks.CHECKS as a test: the same list the report runs."""

from __future__ import annotations

import pytest

from parity_tests.checks import CHECKS


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CHECKS))
def test_parity_check(name):
    result = CHECKS[name]()
    assert result.passed, f"{result.name}: max abs {result.max_abs:.3e}, max rel {result.max_rel:.3e}; " \
                          f"asserted {result.tolerance}; {result.notes}"
