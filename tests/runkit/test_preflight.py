"""runkit.preflight: an output folder is made and proven writable before the first step (each
trainer's refusals of its own places: tests/run/test_preflight.py, tests/torch_ref/run/test_preflight.py,
tests/test_failures.py)."""

from __future__ import annotations

import pytest

from runkit.preflight import check_writable


def test_a_missing_folder_is_made_and_no_probe_is_left(tmp_path):
    folder = tmp_path / "a" / "b"
    check_writable(folder, "--out-dir")
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_a_file_where_the_folder_should_be_is_refused_naming_the_flag(tmp_path):
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ValueError, match=rf"^--tensorboard {tmp_path / 'a_file'} is not writable: "):
        check_writable(tmp_path / "a_file", "--tensorboard")
