"""runkit.names: a run id is a plain name, and what makes one not (each trainer refuses it at
parse time: tests/run/test_names.py, tests/torch_ref/run/test_lock.py)."""

from __future__ import annotations

import pytest

from runkit import names

BAD_NAMES = {
    "../../escape": "a path separator",
    "a/b": "a path separator",
    "a\\b": "a path separator",
    "..": "starts with a dot (a parent folder)",
    ".": "starts with a dot",
    ".hidden": "starts with a dot",
    "": "empty",
    "tab\there": "a control character",
    "new\nline": "a control character",
    "nul\x00": "a control character",
    "bell\x07": "a control character",
    "x" * 201: "201 bytes long",
}


@pytest.mark.parametrize("text", sorted(BAD_NAMES))
def test_a_name_that_is_not_plain_is_refused_saying_why(text):
    with pytest.raises(ValueError, match="is not a plain name: it (is|holds|starts with) ") as refused:
        names.plain_name(text)
    assert BAD_NAMES[text] in str(refused.value)


@pytest.mark.parametrize("text", ["same", "run-2026.11.27_a", "résumé", "x" * 200, "a..b", "trailing."])
def test_plain_names_pass(text):
    assert names.plain_name(text) == text
