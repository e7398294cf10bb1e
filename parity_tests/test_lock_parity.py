"""jaxgpt.run.lock / torch_ref.run.lock and jaxgpt.run.names / torch_ref.run.names: two statements of one rule.

The trainers lock the same files in the same way, so a jaxgpt run and a torch_ref run on one
folder exclude each other, and both read the other's holder; a name is plain or not alike."""

from __future__ import annotations

import pytest

from jaxgpt.run import lock as jax_lock
from jaxgpt.run import names as jax_names
from torch_ref.run import lock as torch_lock
from torch_ref.run import names as torch_names


@pytest.mark.parametrize("first, second", [(jax_lock, torch_lock), (torch_lock, jax_lock)])
def test_each_trainer_refuses_the_folders_the_other_holds(tmp_path, first, second):
    assert (first.FOLDER_LOCK, first.LOCK_SUFFIX) == (second.FOLDER_LOCK, second.LOCK_SUFFIX)
    held = first.RunLock([first.folder_place(tmp_path / "ckpt", "the checkpoint folder", "wait")]).acquire()
    with pytest.raises(second.FolderInUseError, match=f"pid {held.holder.pid} on host {held.holder.host}, started "):
        second.RunLock([second.folder_place(tmp_path / "ckpt", "the checkpoint folder", "wait")]).acquire()
    held.release()
    second.RunLock([second.folder_place(tmp_path / "ckpt", "the checkpoint folder", "wait")]).acquire().release()


@pytest.mark.parametrize("text", ["same", "../x", ".h", "..", "a/b", "a\\b", "a\x01", "a\u200b", "", "x" * 200,
                                  "x" * 201, "é" * 101, "a..b"])
def test_names_are_judged_alike(text):
    assert jax_names.name_problem(text) == torch_names.name_problem(text)
