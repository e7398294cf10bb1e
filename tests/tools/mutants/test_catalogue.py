"""The catalogue: large enough, both modes, unique ids, every snippet applies once to HEAD."""

from pathlib import Path

import pytest

from jaxgpt_tools.mutants.apply import check_mutants, export_tracked
from jaxgpt_tools.mutants.catalogue import CATALOGUE, select

REPO = Path(__file__).resolve().parents[3]


def test_the_catalogue_holds_40_mutants_in_both_modes():
    assert len(CATALOGUE) >= 40
    assert {m.mode for m in CATALOGUE} == {"jaxgpt", "both"}
    assert len({m.id for m in CATALOGUE}) == len(CATALOGUE)
    assert all(m.meaning and m.targets for m in CATALOGUE)


def test_every_mutant_applies_to_head(tmp_path):
    check_mutants(export_tracked(REPO, tmp_path / "head"), CATALOGUE)


def test_select_keeps_catalogue_order_and_refuses_unknown_ids():
    first, second = CATALOGUE[0].id, CATALOGUE[1].id
    assert [m.id for m in select(f"{second},{first}")] == [first, second]
    assert select("") == CATALOGUE
    with pytest.raises(ValueError, match="unknown mutant ids"):
        select("no-such-mutant")
