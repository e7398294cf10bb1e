"""torch_ref.checkpoint: step files kept and read, the --resume and --init-from files (a missing,
foreign or unfinished file is one clear line), a resumed run's config compared field by field.
Each run case calls `torch_ref.train.main` as a user's command line would (conftest.small_run)."""

from __future__ import annotations

import pytest

from torch_ref import checkpoint as ckpt
from torch_ref import cli, preflight
from torch_ref.model import GPT

pytestmark = pytest.mark.usefixtures("one_thread")


def test_save_step_keeps_the_newest(tmp_path):
    for step in (2, 4, 6, 8):
        ckpt.save_step(tmp_path, step, {"model": {}, "step": step}, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["6.pt", "8.pt"]


def test_resume_refuses_a_config_change(small_run, tmp_path, fails):
    state = GPT(small_run.vocab, 12, 1, 64).state_dict()
    preset, options = cli.parse_args(small_run.args(tmp_path / "out"))
    preset = preflight.run_preset(preset, options, state, None, None)
    saved = {"model": state, "step": 2, "optimizers": [], "schedulers": [],
             "data_position": {"shard_index": 0, "pos": 2 * small_run.seq_len}, "config": ckpt.config_dict(preset)}
    ckpt.write_atomically(saved, tmp_path / "2.pt")
    err = fails(small_run.args(tmp_path / "out", "--resume", str(tmp_path), "--steps", "5"))
    assert f"cannot resume from {tmp_path / '2.pt'}" in err and "train.steps: 4 -> 5" in err


def test_resume_from_a_non_torch_file_is_one_line(small_run, tmp_path, fails):
    (tmp_path / "3.pt").write_text("not a checkpoint\n")
    err = fails(small_run.args(tmp_path / "out", "--resume", str(tmp_path)))
    assert f"--resume checkpoint {tmp_path / '3.pt'} is not a readable torch checkpoint" in err
    assert len(err.strip().splitlines()) == 1


def test_a_leftover_tmp_file_is_reported_and_never_read(small_run, tmp_path, fails):
    (tmp_path / "2.pt").write_text("damaged\n")
    (tmp_path / f".5.pt{ckpt.TMP_MARKER}1234").write_text("half written")
    assert ckpt.resume_file(tmp_path) == tmp_path / "2.pt"
    err = fails(small_run.args(tmp_path / "out", "--resume", str(tmp_path)))
    assert "2.pt is not a readable torch checkpoint" in err  # the newest finished file, not the tmp one


def test_missing_init_checkpoint_is_refused(small_run, tmp_path, fails):
    argv = small_run.args(tmp_path / "out", "--steps", "1")
    argv[argv.index("--init-from") + 1] = str(tmp_path / "absent.pt")
    assert "--init-from checkpoint not found" in fails(argv)


def test_a_non_torch_init_file_is_one_line(small_run, tmp_path, fails):
    (tmp_path / "notes.pt").write_text("not a checkpoint\n")
    argv = small_run.args(tmp_path / "out")
    argv[argv.index("--init-from") + 1] = str(tmp_path / "notes.pt")
    err = fails(argv)
    assert f"--init-from checkpoint {tmp_path / 'notes.pt'} is not a readable torch checkpoint" in err
    assert len(err.strip().splitlines()) == 1
