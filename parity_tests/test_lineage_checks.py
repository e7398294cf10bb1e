"""The lineage presets' checks of jaxgpt_tools.parity.checks.CHECKS (docs/PARITY.md's "Lineage"
rows): each preset's fp32 logits, loss and gradients and bf16 eval, and a short training run of
both trainers from one shared init. A file of their own, so that make test's workers (pytest-xdist
--dist loadfile) run them beside test_checks.py's record checks."""

from __future__ import annotations

import pytest

from jaxgpt_tools.parity.checks import CHECKS


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in CHECKS if name.startswith("lineage_")])
def test_lineage_parity_check(name):
    result = CHECKS[name]()
    assert result.passed, f"{result.name}: max abs {result.max_abs:.3e}, max rel {result.max_rel:.3e}; " \
                          f"asserted {result.tolerance}; {result.notes}"
