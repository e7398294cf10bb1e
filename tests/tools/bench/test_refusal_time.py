"""scripts/refusal_time.py's flags. Its measurement (a trainer started, a second refused, ~30 s
here) is run by hand: the figures are docs/RELIABILITY.md's; the refusal itself is tested in
tests/test_lock.py and tests/torch_ref/test_lock.py."""

from __future__ import annotations

from scripts import refusal_time as script


def test_repeats_must_be_positive(capsys):
    assert script.main(["--repeats", "0"]) == 2
    assert "--repeats must be >= 1" in capsys.readouterr().err
