"""jaxgpt.run.lock.run_places / torch_ref.run.lock.run_places: the two trainers lock the same files.

Both take their locks with runkit.lock, so a jaxgpt run and a torch_ref run on one --out-dir and
run id (or on one --resume folder) exclude each other as long as each names the same places for
the same run: the same lock files, described alike, with the same remedies."""

from __future__ import annotations

import pytest

from jaxgpt.run import lock as jax_lock
from runkit import lock
from torch_ref.run import lock as torch_lock


def test_a_fresh_run_locks_the_same_places_in_both_trainers(tmp_path):
    out, tensorboard = tmp_path / "out", str(tmp_path / "tb")
    jax_places = jax_lock.run_places(str(out), "r", resume=None, saves=True, tensorboard=tensorboard)
    torch_places = torch_lock.run_places(out / "logs", "r", out / "checkpoints" / "r", resume=None,
                                         tensorboard=tensorboard)
    assert jax_places == torch_places and len(jax_places) == 3
    held = lock.RunLock(jax_places).acquire()
    with pytest.raises(lock.FolderInUseError, match=f"the logs of run 'r' in {out / 'logs'} is in use"):
        lock.RunLock(torch_places).acquire()
    held.release()


def test_a_resume_locks_the_same_checkpoint_folder_in_both_trainers(tmp_path):
    out, folder = tmp_path / "out", tmp_path / "out" / "checkpoints" / "r"
    folder.mkdir(parents=True)
    jax_places = jax_lock.run_places(str(out), "s", resume=str(folder), saves=True)
    torch_places = torch_lock.run_places(out / "logs", "s", folder, resume=str(folder))
    assert jax_places == torch_places
    assert jax_places[1].remedy == "resume from it once that run has ended"
    held = lock.RunLock(torch_places[1:]).acquire()
    with pytest.raises(lock.FolderInUseError, match=f"the checkpoint folder {folder} is in use"):
        lock.RunLock(jax_places[1:]).acquire()
    held.release()
