"""torch_ref.run.checkpoint: step files kept and read, the --resume and --init-from files (a missing,
foreign or unfinished file is one clear line), a resumed run's config compared field by field.
Each run case calls `torch_ref.train.main` as a user's command line would (conftest.small_run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from torch_ref.run import checkpoint as ckpt
from torch_ref.run import cli, convert, preflight

pytestmark = pytest.mark.usefixtures("one_thread")


def test_save_step_keeps_the_newest(tmp_path):
    for step in (2, 4, 6, 8):
        ckpt.save_step(tmp_path, step, {"model": {}, "step": step}, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["6.pt", "8.pt"]


def test_resume_refuses_a_config_change(small_run, tmp_path, fails):
    state = torch.load(small_run.root / "init.pt", weights_only=True)["model"]  # the smoke model
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


def test_a_failed_save_stops_the_run_and_keeps_the_previous_checkpoint(small_run, tmp_path, fails, monkeypatch):
    """The writer of step 3's file raises ENOSPC (a test hook in torch.save): exit 1 naming the
    step, the path and the OS error; 2.pt (the only one kept) is intact and loads; no partial
    file keeps a step name."""
    import errno  # noqa: PLC0415
    import os  # noqa: PLC0415

    real_save = ckpt.torch.save

    def full_disk_at_step_3(payload, path):
        if Path(path).name.startswith(".3.pt"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_save(payload, path)

    monkeypatch.setattr(ckpt.torch, "save", full_disk_at_step_3)
    out = tmp_path / "out"
    err = fails(small_run.args(out, "--run-id", "f", "--checkpoint-every", "1", "--keep-checkpoints", "1"))
    folder = out / "checkpoints" / "f"
    assert (f"error: saving the checkpoint of step 3 to {folder / '3.pt'} failed (OSError: [Errno 28] No space left on "
            f"device: '{folder}/.3.pt.tmp-{os.getpid()}'). The newest complete checkpoint is step 2 in {folder}") in err, err
    assert sorted(p.name for p in folder.iterdir()) == ["2.pt"]
    assert convert.read_checkpoint(folder / "2.pt")["step"] == 2


def test_a_saved_config_holds_a_dict_only_as_a_sections_lineage():
    """Each section's `lineage` is a dict of plain switches; any other dict-valued field, or a
    lineage switch that is not plain, is named as not a number, a name, a switch or a list."""
    import torch

    from torch_ref import config as torch_cfg
    from torch_ref.run import saved_state

    def payload(config):
        return {"model": {}, "step": 2, "optimizers": [], "schedulers": [],
                "data_position": {"shard_index": 0, "pos": 0}, "config": config}

    config = ckpt.config_dict(torch_cfg.get_preset("softcap"))
    assert saved_state.resume_problem(payload(config)) is None
    odd = {**config, "model": {**config["model"], "vocab_size": {"rows": 50257}}}
    assert "model.vocab_size is not a number" in saved_state.resume_problem(payload(odd))
    odd = {**config, "train": {**config["train"], "lineage": {**config["train"]["lineage"], "data_ranks": torch.ones(1)}}}
    assert "train.lineage is not a number" in saved_state.resume_problem(payload(odd))
