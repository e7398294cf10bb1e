"""The two trainers lock the same places for the same command line.

Both list a run's places with runkit.places.run_places and take them with runkit.lock, so a
jaxgpt run and a torch_ref run on one --out-dir and run id (or one --resume folder) exclude each
other as long as each trainer, from the same flags, names the same places: the same lock files,
described alike, with the same remedies. This checks each trainer's own path from its flags to
its places (jaxgpt.run.claim.places_of, torch_ref.run.claim.places_of)."""

from __future__ import annotations

import pytest

from jaxgpt.run import claim as jax_claim
from jaxgpt.run import cli as jax_cli
from runkit import lock
from torch_ref.run import claim as torch_claim
from torch_ref.run import cli as torch_cli


def places_of_both(argv: list[str]) -> tuple[list[lock.Place], list[lock.Place]]:
    jax_preset, jax_options = jax_cli.parse_args(argv)
    torch_preset, torch_options = torch_cli.parse_args([*argv, "--device", "cpu"])
    return (jax_claim.places_of(jax_preset, jax_options, jax_options.run_id),
            torch_claim.places_of(torch_preset, torch_options))


@pytest.mark.parametrize("extra", [["--checkpoint-every", "2"], ["--save-checkpoint"]])
def test_a_fresh_run_locks_the_same_places_in_both_trainers(tmp_path, extra):
    out, tensorboard = tmp_path / "out", str(tmp_path / "tb")
    jax_places, torch_places = places_of_both(["--preset", "tiny", "--out-dir", str(out), "--run-id", "r",
                                               "--tensorboard", tensorboard, "--export-torch", str(tmp_path / "m.pt"),
                                               *extra])
    assert jax_places == torch_places and len(jax_places) == 4  # logs, checkpoint folder, export, TensorBoard
    held = lock.RunLock(jax_places).acquire()
    with pytest.raises(lock.FolderInUseError, match=f"the logs of run 'r' in {out / 'logs'} is in use"):
        lock.RunLock(torch_places).acquire()
    held.release()


def test_a_run_that_saves_nothing_locks_no_checkpoint_folder(tmp_path):
    jax_places, torch_places = places_of_both(["--preset", "tiny", "--out-dir", str(tmp_path), "--run-id", "n"])
    assert jax_places == torch_places and len(jax_places) == 1  # its logs only


def test_a_resume_locks_the_same_checkpoint_folder_in_both_trainers(tmp_path):
    out, folder = tmp_path / "out", tmp_path / "out" / "checkpoints" / "r"
    folder.mkdir(parents=True)
    jax_places, torch_places = places_of_both(["--preset", "tiny", "--out-dir", str(out), "--run-id", "s",
                                               "--resume", str(folder)])
    assert jax_places == torch_places
    assert jax_places[1].remedy == "resume from it once that run has ended"
    held = lock.RunLock(torch_places[1:]).acquire()
    with pytest.raises(lock.FolderInUseError, match=f"the checkpoint folder {folder} is in use"):
        lock.RunLock(jax_places[1:]).acquire()
    held.release()
