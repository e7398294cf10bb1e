"""Every check of parity_tests.checks.CHECKS as a test: the same list the report runs."""

from __future__ import annotations

import pytest

from parity_tests.checks import CHECKS


# Open (issue 11): with fp32 Newton-Schulz the frameworks still differ ~34x more than jaxgpt
# differs from itself on 1 vs 2 devices (loss 1.0e-2 vs 3.1e-4; matrices 0.34 vs 8e-3), so the
# bf16 NS is not what separates the trajectories. strict: the day it passes, this must be removed.
KNOWN_OPEN = {"trajectory_fp32_ns": "cross-framework gap well above the measured noise floor (not the bf16 NS)"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_OPEN[n])) if n in KNOWN_OPEN else n
             for n in CHECKS],
)
def test_parity_check(name):
    result = CHECKS[name]()
    assert result.passed, f"{result.name}: max abs {result.max_abs:.3e}, max rel {result.max_rel:.3e}; " \
                          f"asserted {result.tolerance}; {result.notes}"
