"""runkit.places: where a run's checkpoints go, its outputs proven writable, its places' locks."""

from __future__ import annotations

import pytest

from runkit import places


def test_the_checkpoint_folder_follows_resume_and_saving(tmp_path):
    folder = tmp_path / "old"
    folder.mkdir()
    (tmp_path / "one.pt").write_bytes(b"")
    own = tmp_path / "out" / "checkpoints" / "r"
    assert places.checkpoint_folder(tmp_path / "out", "r", resume=str(folder), saves=False) == folder
    assert places.checkpoint_folder(tmp_path / "out", "r", resume=None, saves=True) == own
    assert places.checkpoint_folder(tmp_path / "out", "r", resume=None, saves=False) is None
    assert places.checkpoint_folder(tmp_path / "out", "r", resume=str(tmp_path / "one.pt"), saves=True) == own
    assert places.checkpoint_folder(tmp_path / "out", "r", resume=str(tmp_path / "gone"), saves=True) is None


@pytest.mark.parametrize("case, said", [("export names a folder", "is a directory"),
                                        ("export under a file", "--export-torch folder"),
                                        ("out-dir is a file", "--out-dir"),
                                        ("tensorboard under a file", "--tensorboard")])
def test_an_output_that_takes_no_file_is_refused_naming_its_flag(tmp_path, case, said):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    kwargs = {"out_dir": tmp_path / "out", "resume": None, "export": None, "tensorboard": None}
    kwargs.update({"export names a folder": {"export": str(tmp_path)},
                   "export under a file": {"export": str(a_file / "m.pt")},
                   "out-dir is a file": {"out_dir": a_file},
                   "tensorboard under a file": {"tensorboard": str(a_file / "tb")}}[case])
    with pytest.raises(ValueError, match=said):
        places.check_outputs(**kwargs)


def test_the_places_are_the_logs_the_folder_the_export_and_tensorboard_in_order(tmp_path):
    listed = places.run_places(tmp_path, "r", resume=None, saves=True, export=str(tmp_path / "m.pt"),
                               tensorboard=str(tmp_path / "tb"))
    assert [place.what for place in listed] == [
        f"the logs of run 'r' in {tmp_path / 'logs'}", f"the checkpoint folder {tmp_path / 'checkpoints' / 'r'}",
        f"--export-torch {tmp_path / 'm.pt'}", f"the TensorBoard folder of run 'r' in {tmp_path / 'tb'}"]
    assert len(places.run_places(tmp_path, "r", resume=None, saves=False)) == 1
