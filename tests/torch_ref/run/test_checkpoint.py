"""torch_ref.run.checkpoint: step files kept and read, the --resume and --init-from files (a missing,
foreign or unfinished file is one clear line), a resumed run's config compared field by field.
Each run case calls `torch_ref.train.main` as a user's command line would (conftest.small_run)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from torch_ref import train as train_lib
from torch_ref.run import checkpoint as ckpt
from torch_ref.run import cli, convert, preflight
from torch_ref.run.cli import PROG

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

    real_save = ckpt.torch.save

    def full_disk_at_step_3(payload, file):
        if Path(file.name).name.startswith(".3.pt"):  # torch.save writes through a Python file object
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), file.name)
        return real_save(payload, file)

    monkeypatch.setattr(ckpt.torch, "save", full_disk_at_step_3)
    out = tmp_path / "out"
    err = fails(small_run.args(out, "--run-id", "f", "--checkpoint-every", "1", "--keep-checkpoints", "1"))
    folder = out / "checkpoints" / "f"
    size = (folder / "2.pt").stat().st_size / 1e6
    assert (f"error: saving the checkpoint of step 3 to {folder / '3.pt'} failed: no space left on device (one checkpoint "
            f"there takes {size:.1f} MB: make room, then resume). Its partial file .3.pt.tmp-{os.getpid()} was removed. "
            f"The newest complete checkpoint is step 2 in {folder}") in err, err
    assert sorted(p.name for p in folder.iterdir()) == ["2.pt"]
    assert convert.read_checkpoint(folder / "2.pt")["step"] == 2


@pytest.mark.slow  # three 6-update runs
def test_a_full_disk_during_a_save_stops_the_run_and_resume_continues_bit_exactly(small_run, tmp_path, fails, capsys,
                                                                                  small_disk, same_state):
    """A real full disk (a tmpfs, conftest.small_disk) in the middle of `4.pt`'s write. An
    uninterrupted run on the same disk measures what one run keeps there (one step file, the
    logs); a filler leaves room for 1.5 of that, so 2.pt fits and 4.pt fills the disk part-way
    (torch.save through a Python file object: the OSError ENOSPC behind torch's RuntimeError).
    Exit 1, one line saying the disk is full and naming the step and the file; the partial
    temporary file is removed, 2.pt loads, and once the filler is gone `--resume` ends where the
    uninterrupted run ended, bit for bit (model, optimizers, schedulers, data position)."""
    disk = small_disk(24 * 2**20)

    def args(name: str, *extra: str) -> list[str]:
        return small_run.args(disk.folder / name, "--steps", "6", "--checkpoint-every", "2", "--keep-checkpoints", "1",
                              "--run-id", name, *extra)

    free = disk.free()
    assert train_lib.main(args("straight")) == 0
    one_run = free - disk.free()
    capsys.readouterr()

    filler = disk.fill(leave=one_run * 3 // 2)
    folder = disk.folder / "full" / "checkpoints" / "full"
    err = fails(args("full"))
    size = (folder / "2.pt").stat().st_size / 1e6
    assert err.strip() == (
        f"{PROG}: error: saving the checkpoint of step 4 to {folder / '4.pt'} failed: no space left on device (one "
        f"checkpoint there takes {size:.1f} MB: make room, then resume). Its partial file .4.pt.tmp-{os.getpid()} was "
        f"removed. The newest complete checkpoint is step 2 in {folder} (continue with --resume {folder})."), err
    assert sorted(p.name for p in folder.iterdir()) == ["2.pt"]
    assert convert.read_checkpoint(folder / "2.pt")["step"] == 2
    jsonl = (disk.folder / "full" / "logs" / "full.jsonl").read_text()
    assert all(json.loads(line) for line in jsonl.splitlines()) and (not jsonl or jsonl.endswith("\n"))

    filler.unlink()  # the space is back
    assert train_lib.main(args("full", "--run-id", "resumed", "--resume", str(folder))) == 0
    resumed = capsys.readouterr()
    assert "warning" not in resumed.err and "error" not in resumed.err, resumed.err
    assert sorted(p.name for p in folder.iterdir()) == ["6.pt"]

    def losses(run: str, name: str) -> dict[int, float]:
        lines = (disk.folder / run / "logs" / f"{name}.jsonl").read_text().splitlines()
        return {r["step"]: r["train_loss"] for r in map(json.loads, lines) if r["kind"] == "train"}

    after, straight = losses("full", "resumed"), losses("straight", "straight")
    assert sorted(after) == [3, 4, 5, 6] and all(after[step] == straight[step] for step in after), (after, straight)
    same_state(convert.read_checkpoint(folder / "6.pt"),
               convert.read_checkpoint(disk.folder / "straight" / "checkpoints" / "straight" / "6.pt"))


def test_a_saved_config_holds_a_dict_only_as_a_sections_lineage():
    """Each section's `lineage` is a dict of plain switches; any other dict-valued field, or a
    lineage switch that is not plain, is named as not a number, a name, a switch or a list."""
    import torch

    from torch_ref import presets as torch_presets
    from torch_ref.run import saved_state

    def payload(config):
        return {"model": {}, "step": 2, "optimizers": [], "schedulers": [],
                "data_position": {"shard_index": 0, "pos": 0}, "config": config}

    config = ckpt.config_dict(torch_presets.get_preset("softcap"))
    assert saved_state.resume_problem(payload(config)) is None
    odd = {**config, "model": {**config["model"], "vocab_size": {"rows": 50257}}}
    assert "model.vocab_size is not a number" in saved_state.resume_problem(payload(odd))
    odd = {**config, "train": {**config["train"], "lineage": {**config["train"]["lineage"], "data_ranks": torch.ones(1)}}}
    assert "train.lineage is not a number" in saved_state.resume_problem(payload(odd))
