"""scripts/refusal_time.py's flags. Its measurement (a trainer started, a second refused, ~30 s
here) is run by hand: the figures are docs/RELIABILITY.md's; the refusal itself is tested in
tests/run/test_lock.py and tests/torch_ref/run/test_lock.py."""

from __future__ import annotations

import pytest

from scripts import refusal_time as script


def test_repeats_must_be_positive(capsys):
    with pytest.raises(SystemExit) as usage:  # a usage error: argparse's exit 2 and its line
        script.main(["--repeats", "0"])
    assert usage.value.code == 2 and "error: --repeats must be >= 1" in capsys.readouterr().err
