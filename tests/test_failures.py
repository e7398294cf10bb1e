"""Failure modes of `python -m jaxgpt.train` as a user meets them (docs/RELIABILITY.md).

Each case asserts the exit code, a message naming the problem and what is left on disk. Most
fail before anything compiles and call `main` in this process; the interrupted run is a real
subprocess that receives SIGINT while its asynchronous save is in flight (a test hook sends the
signal right after the save of step 2 is started, so no timing luck is involved); the faults of
section 11 (a diverging loss, a NaN state, a failed save) run the real loop, with the train step
replaced where the fault is not provoked for real.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from jaxgpt import config, config_json, data, presets
from jaxgpt import step as step_lib
from jaxgpt import train as train_lib
from jaxgpt.run import checkpoint, cli, interrupt
from jaxgpt.run.cli import PROG
from jaxgpt.shards import META_FILE, IncompleteShardsError, check_token_ids, list_shards

REPO = Path(__file__).resolve().parents[1]
VOCAB = 1024  # with the smoke preset: the runs below compile in seconds


def write_shards(folder: Path, *, train_lengths=(20_000,), val_length=5_000, largest: int = VOCAB - 1,
                 marked: bool = True) -> tuple[str, str]:
    """Train and val shards in `folder`, marked complete as make_shards marks its folders."""
    rng = np.random.default_rng(0)
    if marked:
        (folder / data.COMPLETE_MARKER).write_text("")
    for index, length in enumerate(train_lengths, start=1):
        data.write_shard(folder / f"t_train_{index:06d}.bin", rng.integers(0, VOCAB, length))
    val = rng.integers(0, VOCAB, val_length)
    val[-1] = largest
    data.write_shard(folder / "t_val_000000.bin", val)
    return str(folder / "t_train_*.bin"), str(folder / "t_val_*.bin")


def run_args(shards: tuple[str, str], out: Path, *extra: str) -> list[str]:
    train_files, val_files = shards
    return [
        "--preset", "smoke", "--train-files", train_files, "--val-files", val_files, "--vocab-size", str(VOCAB),
        "--eot-id", "0", "--seq-len", "256", "--batch-tokens", "1024", "--val-tokens", "1024",
        "--window-max-tokens", "256", "--steps", "4", "--val-every", "100", "--devices", "1",
        "--out-dir", str(out), "--no-progress", *extra,
    ]


def failed(capsys, args: list[str], code: int = 1) -> str:
    """main(args) returns `code` with one `error: ...` message and no traceback; returns stderr."""
    assert train_lib.main(args) == code
    err = capsys.readouterr().err
    assert "error: " in err and "Traceback" not in err, err
    return err


def tmp_dirs(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if "tmp" in path.name]


# 1. token ids outside the vocabulary --------------------------------------------------------


def test_train_token_ids_beyond_the_vocabulary_are_refused_before_compiling(capsys, tmp_path):
    shards = write_shards(tmp_path)
    rng = np.random.default_rng(1)
    bad = rng.integers(0, VOCAB, 20_000)
    bad[12_345] = 60_000  # as a shard made with another tokenizer
    data.write_shard(tmp_path / "t_train_000002.bin", bad)
    err = failed(capsys, run_args(shards, tmp_path / "out"))
    assert "t_train_000002.bin" in err and "token id 60000" in err and f"vocabulary of {VOCAB}" in err


def test_val_token_ids_beyond_the_vocabulary_are_refused(capsys, tmp_path):
    shards = write_shards(tmp_path, largest=VOCAB)
    err = failed(capsys, run_args(shards, tmp_path / "out"))
    assert "t_val_000000.bin" in err and f"token id {VOCAB} " in err


def test_token_check_is_one_vectorised_max():
    tokens = np.zeros(10, dtype=np.uint16)
    check_token_ids("x.bin", tokens, 1)  # all below the vocabulary: fine
    tokens[3] = 1
    with pytest.raises(ValueError, match="x.bin: token id 1 is outside the model's vocabulary of 1"):
        check_token_ids("x.bin", tokens, 1)


# 2. SIGINT while an asynchronous save is in flight ------------------------------------------


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path, list[str]]:
    """A 6-step run with checkpoints every 2 steps, sent SIGINT right after the save of step 2."""
    folder = tmp_path_factory.mktemp("sigint")
    shards = write_shards(folder, train_lengths=(20_000,))
    args = run_args(shards, folder / "out", "--steps", "6", "--checkpoint-every", "2", "--run-id", "r")
    env = {**os.environ, "PYTHONPATH": str(REPO), interrupt.TEST_INTERRUPT_AFTER_SAVE: "2"}
    result = subprocess.run([sys.executable, "-m", "jaxgpt.train", *args], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=240)
    return result, folder / "out" / "checkpoints" / "r", args


@pytest.mark.slow
def test_sigint_saves_the_last_completed_step_and_exits_130(interrupted_run):
    result, directory, _ = interrupted_run
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr
    # The signal arrives before step 2 is dispatched, so step 2 carries it to every device; the
    # loop reads it with step 2's loss (after dispatching step 3) and stops at the top of step 4.
    assert re.search(r"interrupted by SIGINT at step 4; the state after step 4 is in \S*checkpoints/r", result.stderr)
    assert sorted(int(p.name) for p in directory.iterdir()) == [2, 4]
    assert not tmp_dirs(directory.parent.parent)


@pytest.mark.slow
def test_the_checkpoint_of_an_interrupted_run_restores(interrupted_run):
    _, directory, _ = interrupted_run
    params, meta = checkpoint.restore_params(directory)
    assert meta["step"] == 4 and meta["data_position"] == {"shard_index": 0, "pos": 4 * 1024, "batches": 4}
    assert all(np.isfinite(np.asarray(value, dtype=np.float32)).all() for value in params.values())


def hold_the_save_of_step_2(monkeypatch, out: Path, at_batch_of_step_2) -> list[Path]:
    """Make the save of step 2 provably in flight when the batch of step 2 is fetched: orbax's
    finalisation (the rename out of `*-tmp`) waits on an event that is set only after
    `at_batch_of_step_2()` ran there. The train step is replaced by one that returns its inputs,
    so no train step compiles (the save path is what is tested). Returns the tmp
    folders seen at that moment (the proof the save was unfinished)."""
    import threading  # noqa: PLC0415 - only these tests need it

    import orbax.checkpoint as ocp  # noqa: PLC0415

    released, seen_unfinished, batches = threading.Event(), [], []
    finalize, real_to_global = ocp.CheckpointManager._finalize_checkpoint, data.to_global_arrays

    def held_finalize(self, step):
        released.wait(timeout=60)
        return finalize(self, step)

    def to_global_arrays(batch, sharding):
        batches.append(1)
        if len(batches) == 3:  # the batch of step 2, fetched after the save of step 2 started
            seen_unfinished.extend(tmp_dirs(out))
            try:
                at_batch_of_step_2()
            finally:
                released.set()
        return real_to_global(batch, sharding)

    monkeypatch.setattr(ocp.CheckpointManager, "_finalize_checkpoint", held_finalize)
    replace_train_step(monkeypatch, lambda params, loss=np.float32(0): (params, loss))
    monkeypatch.setattr(data, "to_global_arrays", to_global_arrays)
    return seen_unfinished


def replace_train_step(monkeypatch, update) -> None:
    """Replace the compiled train step by `update(params) -> (params, loss)` (plain host code), so
    no train step compiles: the loop, its checks and the saves are what such a test exercises.
    The stop flags' maximum is returned as the real step returns it."""
    real_compile = step_lib.compile_steps

    def compile_without_training(*args, **kwargs):
        def step(params, opt_state, inputs, targets, window, flags):
            params, loss = update(params)
            return params, opt_state, loss, np.asarray(flags).max()

        step._cache_size = lambda: 1  # as a jitted function reports its compilations
        return dataclasses.replace(real_compile(*args, **kwargs), train_with_stop=step)

    monkeypatch.setattr(step_lib, "compile_steps", compile_without_training)


def test_a_data_error_during_an_async_save_leaves_the_last_checkpoint_whole(capsys, monkeypatch, tmp_path):
    """A data error while the save of step 2 is unfinished: the error path waits for that save,
    leaves no *-tmp folder, and the checkpoint of step 2 restores."""

    def data_error():
        raise ValueError("t_train_000001.bin: a data error raised by the test")

    seen_unfinished = hold_the_save_of_step_2(monkeypatch, tmp_path / "out", data_error)
    args = run_args(write_shards(tmp_path), tmp_path / "out", "--val-tokens", "0", "--checkpoint-every", "2",
                    "--run-id", "e")
    err = failed(capsys, args)
    assert "a data error raised by the test" in err
    assert seen_unfinished, "the save of step 2 was not in flight when the error was raised"
    assert not tmp_dirs(tmp_path / "out")
    params, meta = checkpoint.restore_params(tmp_path / "out" / "checkpoints" / "e")
    assert meta["step"] == 2 and meta["data_position"] == {"shard_index": 0, "pos": 2 * 1024, "batches": 2}
    assert all(np.isfinite(np.asarray(value, dtype=np.float32)).all() for value in params.values())


def test_sigint_while_a_save_is_provably_in_flight(capsys, monkeypatch, tmp_path):
    """SIGINT arrives while the save of step 2 is unfinished (held, not timed): step 2 completes,
    step 2 carries the stop flag, the run stops at the top of step 4, saves it, waits for both
    saves and exits 130."""
    seen_unfinished = hold_the_save_of_step_2(monkeypatch, tmp_path / "out", lambda: os.kill(os.getpid(), signal.SIGINT))
    args = run_args(write_shards(tmp_path), tmp_path / "out", "--val-tokens", "0", "--checkpoint-every", "2",
                    "--steps", "6", "--run-id", "s")
    assert train_lib.main(args) == 130
    err = capsys.readouterr().err
    assert seen_unfinished, "the save of step 2 was not in flight when SIGINT arrived"
    assert "interrupted by SIGINT at step 4; the state after step 4 is in" in err and "Traceback" not in err
    directory = tmp_path / "out" / "checkpoints" / "s"
    assert sorted(int(p.name) for p in directory.iterdir()) == [2, 4] and not tmp_dirs(tmp_path / "out")
    assert checkpoint.restore_params(directory)[1]["data_position"] == {"shard_index": 0, "pos": 4 * 1024, "batches": 4}


# 3. --resume keeps the cadence; a run without checkpoints says so -----------------------------


def test_resume_keeps_the_saved_checkpoint_cadence():
    preset, options = cli.parse_args(["--preset", "tiny"])
    saved = {"config": config_json.config_to_json(config.Preset(
        preset.model, preset.optim, config.replace(preset.train, checkpoint_every=7, keep_checkpoints=2)))}
    kept = checkpoint.keep_saved_cadence(preset, saved, options.overridden)
    assert (kept.train.checkpoint_every, kept.train.keep_checkpoints) == (7, 2)
    _, options = cli.parse_args(["--preset", "tiny", "--checkpoint-every", "3"])
    told = checkpoint.keep_saved_cadence(preset, saved, options.overridden)
    assert (told.train.checkpoint_every, told.train.keep_checkpoints) == (0, 2)


def test_a_run_without_checkpoints_says_so_at_start(capsys, monkeypatch, tmp_path):
    def stop(*args, **kwargs):
        raise ValueError("stopped after the start-up checks")

    monkeypatch.setattr(step_lib, "build_model", stop)  # the note comes before the model is built
    err = failed(capsys, run_args(write_shards(tmp_path), tmp_path / "out"))
    assert err.startswith("note: this run writes no checkpoint") and "stopped after" in err
    err = failed(capsys, run_args(write_shards(tmp_path), tmp_path / "out", "--checkpoint-every", "2"))
    assert "writes no checkpoint" not in err and "stopped after" in err


# 4. output paths are checked before the first step --------------------------------------------


def test_export_torch_into_an_unwritable_place_fails_before_training(capsys, tmp_path):
    shards = write_shards(tmp_path)
    (tmp_path / "a_file").write_text("x")
    err = failed(capsys, run_args(shards, tmp_path / "out", "--export-torch", str(tmp_path / "a_file" / "m.pt")))
    assert "--export-torch folder" in err and "not writable" in err
    assert not (tmp_path / "out" / "logs").exists()  # nothing ran


def test_tensorboard_folder_that_is_a_file_fails_before_training(capsys, tmp_path):
    shards = write_shards(tmp_path)
    (tmp_path / "a_file").write_text("x")
    err = failed(capsys, run_args(shards, tmp_path / "out", "--tensorboard", str(tmp_path / "a_file")))
    assert "--tensorboard" in err and "not writable" in err


def test_out_dir_that_is_a_file_fails_before_training(capsys, tmp_path):
    shards = write_shards(tmp_path)
    (tmp_path / "out").write_text("x")
    assert "--out-dir" in failed(capsys, run_args(shards, tmp_path / "out"))


# 6. every shard is checked up front ------------------------------------------------------------


@pytest.mark.parametrize("middle_length", [0, 1025])
def test_a_short_shard_in_the_middle_fails_before_compiling(capsys, tmp_path, middle_length):
    shards = write_shards(tmp_path, train_lengths=(20_000, middle_length, 20_000))
    err = failed(capsys, run_args(shards, tmp_path / "out"))
    assert "t_train_000002.bin" in err and f"{middle_length} tokens cannot hold one batch of 1024" in err


# 7. unreadable files -------------------------------------------------------------------------


def test_a_non_torch_init_file_is_one_line(capsys, tmp_path):
    shards = write_shards(tmp_path)
    (tmp_path / "notes.pt").write_text("not a checkpoint\n")
    err = failed(capsys, run_args(shards, tmp_path / "out", "--init-from", str(tmp_path / "notes.pt")))
    assert "notes.pt is not a readable torch checkpoint" in err and "{'model': state_dict}" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow  # the interrupted_run fixture is a training subprocess
def test_a_corrupted_checkpoint_on_resume_is_one_line(capsys, tmp_path, interrupted_run):
    _, directory, args = interrupted_run
    import shutil

    copy = tmp_path / "ckpt"
    shutil.copytree(directory, copy)
    for path in (copy / "4").rglob("*"):
        if path.is_file():
            path.write_bytes(b"\0garbage")
    err = failed(capsys, [*args, "--resume", str(copy)])
    assert f"cannot read the checkpoint in {copy / '4'}" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow  # the interrupted_run fixture is a training subprocess
def test_a_leftover_tmp_dir_is_reported_and_never_restored(capsys, tmp_path, interrupted_run):
    _, directory, args = interrupted_run
    import shutil

    copy = tmp_path / "ckpt"
    shutil.copytree(directory, copy)
    (copy / "5.orbax-checkpoint-tmp-1234").mkdir()  # what a SIGKILL during a save leaves
    err = failed(capsys, [*args, "--resume", str(copy), "--muon-lr", "0.01"])  # refused before compiling
    assert "warning: ignoring" in err and "5.orbax-checkpoint-tmp-1234" in err
    assert checkpoint.Checkpointer(copy).latest_step() == 4


# 9. one convention for exit codes and edge cases -----------------------------------------------


def test_an_invalid_config_value_is_a_usage_error(capsys):
    err = failed(capsys, ["--preset", "tiny", "--steps", "-1"], code=2)
    assert "steps" in err
    err = failed(capsys, ["--preset", "tiny", "--val-every", "-1"], code=2)  # 0 is legal: after the last step only
    assert "`val_every`: must be >= 0" in err


def test_more_devices_than_exist_is_an_error(capsys, tmp_path):
    shards = write_shards(tmp_path)
    err = failed(capsys, run_args(shards, tmp_path / "out", "--devices", "99"))
    assert "--devices 99" in err


def test_help_lists_choices_without_none_defaults():
    text = cli.build_parser().format_help()
    assert "(default: None)" not in text
    assert "{none,block,block_dots}" in text and "--debug" in text


# 10. docs/DATA.md states the tiny preset's numbers ---------------------------------------------


def test_data_doc_gives_the_tiny_preset_numbers():
    tiny = presets.tiny_preset().train
    text = (REPO / "docs" / "DATA.md").read_text()
    assert f"({tiny.steps} steps x {tiny.batch_tokens:,} tokens)" in text
    assert f"evaluates the first {tiny.val_tokens:,}" in text
    assert "65,536" not in text


# 5. make_shards: staged, marked complete, never mixed with earlier shards ------------------------


def make_shards(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO / "scripts/make_shards.py"), *args, "--encoding", "gpt2-bytes", "--workers", "1"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_make_shards_refuses_earlier_shards_unless_overwrite(tmp_path):
    (tmp_path / "small.txt").write_text("a small corpus " * 10)
    out = tmp_path / "out"
    for stale in ("x_train_000001.bin", "x_train_000002.bin", "x_train_000003.bin"):  # an earlier, larger run
        data.write_shard(out / stale, np.zeros(10, dtype=np.uint16))
    refused = make_shards(str(tmp_path / "small.txt"), "--out", str(out), "--prefix", "x", "-s", "100")
    assert refused.returncode == 1 and "already holds 3 shard file(s)" in refused.stderr and "--overwrite" in refused.stderr
    done = make_shards(str(tmp_path / "small.txt"), "--out", str(out), "--prefix", "x", "-s", "100", "--overwrite")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [".complete", "meta.json", "x_train_000001.bin", "x_val_000000.bin"]
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []


def test_make_shards_names_a_file_that_is_not_utf8(tmp_path):
    source = tmp_path / "texts"
    source.mkdir()
    (source / "a.txt").write_text("fine text " * 20)
    (source / "b.txt").write_bytes(b"caf\xe9 latin-1\n")
    result = make_shards(str(source), "--out", str(tmp_path / "out"), "-s", "50")
    assert result.returncode == 1 and "b.txt: not UTF-8 text" in result.stderr
    assert not (tmp_path / "out").exists()  # nothing half-written looks complete
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []


def test_a_truncated_meta_json_names_the_file(tmp_path):
    from jaxgpt.corpus import stdlib_docs as sample_data  # noqa: PLC0415 - only this test needs them
    from jaxgpt.corpus import tokenizer

    (tmp_path / "meta.json").write_text('{"encoding": "gpt2-by')  # a write cut short
    with pytest.raises(ValueError, match=r"meta.json: not valid JSON"):
        tokenizer.tokenizer_from_meta(tmp_path / "meta.json")
    (tmp_path / sample_data.COMPLETE_MARKER).write_text("")  # a sample folder marked complete reads it too
    with pytest.raises(ValueError, match=r"meta.json: not valid JSON"):
        sample_data.is_up_to_date(tmp_path)


# 7. compare_checkpoint.py on a file that is not a torch checkpoint ---------------------------


def test_compare_checkpoint_on_a_non_torch_file_is_one_line(capsys, tmp_path):
    from scripts import compare_checkpoint as script  # noqa: PLC0415 - imports torch
    data.write_shard(tmp_path / "tokens.bin", np.zeros(300, dtype=np.uint16))
    (tmp_path / "notes.pt").write_text("not a checkpoint\n")
    assert script.main([str(tmp_path / "notes.pt"), "--tokens", str(tmp_path / "tokens.bin"), "--window-blocks", "1"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'notes.pt'} is not a readable torch checkpoint" in err and "{'model': state_dict}" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# 9. --steps 0: every start-up check and the step-0 validation, then exit 0; --val-every 0 ------


@pytest.mark.slow  # compiles the eval step (~10 s here)
def test_steps_0_validates_and_exits(capsys, tmp_path):
    shards = write_shards(tmp_path)
    assert train_lib.main(run_args(shards, tmp_path / "out", "--steps", "0", "--checkpoint-every", "1")) == 0
    captured = capsys.readouterr()
    step_lines = [line for line in captured.out.splitlines() if line.startswith("step:")]
    assert len(step_lines) == 1 and step_lines[0].startswith("step:0/0 val_loss:"), captured.out
    assert "writes no checkpoint" not in captured.err and "Traceback" not in captured.err
    assert not [p for p in (tmp_path / "out").rglob("*") if p.is_dir() and p.name.isdigit()]  # no step was saved


def test_val_every_0_validates_after_the_last_step_only(capsys, monkeypatch, tmp_path):
    """The record's val_loss_every 0 ("only at the end"): no step-0 validation (whose eval
    program a GPU lease would compile before the timed steps for nothing), one after the last
    step. The train step is replaced (nothing to learn here); the evaluation is the real one."""
    replace_train_step(monkeypatch, lambda params: (params, np.float32(1.0)))
    out = tmp_path / "out"
    assert train_lib.main(run_args(write_shards(tmp_path), out, "--steps", "2", "--val-every", "0", "--run-id", "z")) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step:")]
    assert [line.split(" ")[0] for line in lines if " val_loss:" in line] == ["step:2/2"], lines
    assert [line.split(" ")[0] for line in lines] == ["step:1/2", "step:2/2", "step:2/2"]  # train 1, train 2, val 2
    metrics = [json.loads(line) for line in (out / "logs" / "z.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if m["kind"] == "val"] == [2]


def test_steps_0_still_runs_the_start_up_checks(capsys, tmp_path):
    shards = write_shards(tmp_path, largest=VOCAB)
    err = failed(capsys, run_args(shards, tmp_path / "out", "--steps", "0"))
    assert "t_val_000000.bin" in err and f"token id {VOCAB} " in err


# 5. the loader and unfinished shard folders (docs/DATA.md "Complete shard folders") ------------


def test_a_folder_with_meta_json_but_no_marker_is_refused(capsys, tmp_path):
    shards = write_shards(tmp_path, marked=False)
    (tmp_path / META_FILE).write_text("{}")  # what make_shards leaves when it stops before .complete
    with pytest.raises(IncompleteShardsError, match=f"{tmp_path} holds meta.json but no .complete marker"):
        list_shards(shards[0])
    err = failed(capsys, run_args(shards, tmp_path / "out"))
    assert f"touch {tmp_path / data.COMPLETE_MARKER}" in err and "--overwrite" in err


def test_a_folder_with_neither_is_used_with_a_note(capsys, monkeypatch, tmp_path):
    def stop(*args, **kwargs):
        raise ValueError("stopped after the start-up checks")

    monkeypatch.setattr(step_lib, "build_model", stop)
    unmarked = tmp_path / "hand_made"
    unmarked.mkdir()
    err = failed(capsys, run_args(write_shards(unmarked, marked=False), tmp_path / "out"))
    notes = [line for line in err.splitlines() if "marker" in line]
    assert notes == [f"note: {unmarked} has no .complete marker (shards not written by make_shards); using them as they are"]
    marked = tmp_path / "marked"
    marked.mkdir()
    err = failed(capsys, run_args(write_shards(marked), tmp_path / "out"))
    assert "marker" not in err and "stopped after" in err


# 1 + --init-from: the vocabulary checked is the one of the model that will be trained ---------


def test_token_check_uses_the_init_checkpoint_vocabulary(capsys, tmp_path):
    """The smoke preset's vocabulary is 50257, the --init-from model's 1024: id 2000 is refused."""
    import torch  # noqa: PLC0415 - a record-format checkpoint, as the record's code writes one

    from torch_ref import config as torch_config  # noqa: PLC0415
    from torch_ref import presets as torch_presets  # noqa: PLC0415
    from torch_ref.model import GPT  # noqa: PLC0415

    torch.manual_seed(0)
    model = torch_config.replace(torch_presets.get_preset("smoke").model, vocab_size=VOCAB)
    torch.save({"model": GPT.from_config(model).state_dict()}, tmp_path / "init.pt")
    shards = write_shards(tmp_path)
    tokens = np.random.default_rng(2).integers(0, VOCAB, 20_000)
    tokens[4321] = 2000
    data.write_shard(tmp_path / "t_train_000001.bin", tokens)
    args = run_args(shards, tmp_path / "out")
    del args[args.index("--vocab-size"):args.index("--vocab-size") + 2]  # the preset's 50257
    err = failed(capsys, [*args, "--init-from", str(tmp_path / "init.pt")])
    assert f"t_train_000001.bin: token id 2000 is outside the model's vocabulary of {VOCAB}" in err


# 11. a diverging loss, a NaN state, a failed save ------------------------------------------------


def finite(directory: Path) -> tuple[int, bool]:
    """(step, whether every parameter is finite) of the newest checkpoint in `directory`."""
    params, meta = checkpoint.restore_params(directory)
    return meta["step"], all(np.isfinite(np.asarray(value, dtype=np.float32)).all() for value in params.values())


@pytest.mark.slow  # a real run (compile + 3 steps)
def test_a_diverging_train_loss_stops_the_run_before_any_later_save(capsys, tmp_path):
    """A scalar learning rate of 1e30 makes the train loss NaN at step 3 (its train line). The
    loop reads a loss one step late, but it reads every loss before a save: with a save due
    every step, step 3's state is never written; the run exits 1 naming the step and the value,
    and the newest checkpoint (step 2, kept alone) restores with finite parameters."""
    out = tmp_path / "out"
    args = run_args(write_shards(tmp_path), out, "--steps", "6", "--scalar-lr", "1e30", "--checkpoint-every", "1",
                    "--keep-checkpoints", "1", "--run-id", "nan")
    err = failed(capsys, args)
    directory = out / "checkpoints" / "nan"
    assert f"error: train loss is nan at step 3/6; the run stopped without saving any later state. The newest complete " \
           f"checkpoint is step 2 in {directory}" in err, err
    assert len(err.strip().splitlines()) == 1
    assert checkpoint.completed_steps(directory) == [2] and not tmp_dirs(out)
    assert finite(directory) == (2, True)
    assert "step:3/6" in (out / "logs" / "nan.txt").read_text()  # the NaN line is logged before the stop


def nan_params_from_update(number: int):
    """A replaced update that returns finite losses and, from its `number`-th call on, NaN
    parameters (what an overflowing gradient does to a real step)."""
    calls = []

    def update(params):
        calls.append(1)
        if len(calls) < number:
            return params, np.float32(1.0)
        return {name: value * np.nan for name, value in params.items()}, np.float32(1.0)

    return update


def test_a_nan_val_loss_stops_the_run_before_its_save(capsys, monkeypatch, tmp_path):
    """Validation after step 2 runs before step 2's save and before step 2's train loss exists:
    the state after the second update is NaN, the real evaluation's loss is NaN, the run stops
    with `val loss is nan at step 2/6` and step 1 stays the newest checkpoint."""
    replace_train_step(monkeypatch, nan_params_from_update(2))
    out = tmp_path / "out"
    err = failed(capsys, run_args(write_shards(tmp_path), out, "--steps", "6", "--checkpoint-every", "1",
                                  "--val-every", "2", "--run-id", "val"))
    assert "error: val loss is nan at step 2/6" in err and "The newest complete checkpoint is step 1" in err, err
    assert checkpoint.completed_steps(out / "checkpoints" / "val") == [1]


def test_a_nan_state_behind_a_finite_loss_is_never_saved(capsys, monkeypatch, tmp_path):
    """A finite loss does not prove finite gradients: a step that returns NaN parameters with a
    finite loss is caught at the next save, which is not written."""
    replace_train_step(monkeypatch, nan_params_from_update(2))
    out = tmp_path / "out"
    err = failed(capsys, run_args(write_shards(tmp_path), out, "--val-tokens", "0", "--checkpoint-every", "1",
                                  "--run-id", "s"))
    assert "error: the state after step 2 holds NaN or infinite values although every loss before it was finite" in err
    assert checkpoint.completed_steps(out / "checkpoints" / "s") == [1]


def test_allow_nonfinite_loss_trains_on(capsys, monkeypatch, tmp_path):
    replace_train_step(monkeypatch, lambda params: (params, np.float32(np.nan)))
    args = run_args(write_shards(tmp_path), tmp_path / "out", "--val-tokens", "0", "--checkpoint-every", "2",
                    "--run-id", "a", "--allow-nonfinite-loss")
    assert train_lib.main(args) == 0
    assert capsys.readouterr().out.count("train_loss:nan") == 4
    assert checkpoint.completed_steps(tmp_path / "out" / "checkpoints" / "a") == [2, 4]


def test_a_failed_save_stops_the_run_and_keeps_the_previous_checkpoint(capsys, monkeypatch, tmp_path):
    """The writer of the save of step 3 raises ENOSPC in orbax's background thread (a test
    hook in the file writer; a real full disk: the next test). The run stops at the next step with
    exit 1, naming the step, the folder and the full disk; step 2 (the only one kept) is intact
    and restores; the failed save's *-tmp folder is removed."""
    import errno  # noqa: PLC0415

    from orbax.checkpoint._src.handlers import json_checkpoint_handler  # noqa: PLC0415

    write_json = json_checkpoint_handler.JsonCheckpointHandler._save_fn

    async def full_disk_at_step_3(self, item, directory):
        if Path(directory).parent.name.startswith("3."):  # <dir>/3.orbax-checkpoint-tmp/meta...
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory / "metadata"))
        return await write_json(self, item, directory)

    monkeypatch.setattr(json_checkpoint_handler.JsonCheckpointHandler, "_save_fn", full_disk_at_step_3)
    replace_train_step(monkeypatch, lambda params: (params, np.float32(1.0)))
    out = tmp_path / "out"
    assert train_lib.main(run_args(write_shards(tmp_path), out, "--steps", "6", "--val-tokens", "0", "--checkpoint-every",
                                   "1", "--keep-checkpoints", "1", "--run-id", "f")) == 1
    captured = capsys.readouterr()
    directory = out / "checkpoints" / "f"
    error = [line for line in captured.err.splitlines() if line.startswith(f"{PROG}: error: ")]
    size = sum(f.stat().st_size for f in (directory / "2").rglob("*") if f.is_file()) / 1e6
    assert error == [f"{PROG}: error: saving the checkpoint of step 3 into {directory} failed: no space left on device (one "
                     f"checkpoint there takes {size:.1f} MB: make room, then resume). Its partial folder "
                     f"3.orbax-checkpoint-tmp was removed. The newest complete checkpoint is step 2 in {directory} (continue "
                     f"with --resume {directory})."], captured.err
    assert "step:5/6" not in captured.out  # stopped at the top of step 4, not carried on without saves
    assert checkpoint.completed_steps(directory) == [2] and not tmp_dirs(out)
    assert finite(directory) == (2, True)


def metrics(path: Path) -> list[dict]:
    """A JSONL metrics file's records; every line whole (json.loads raises on half a record)."""
    text = path.read_text()
    assert text.endswith("\n"), text[-200:]
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.slow  # real training: one compile (~10 s here), then three runs from the compilation cache
def test_a_full_disk_during_a_save_stops_the_run_and_resume_continues_bit_exactly(capsys, tmp_path, small_disk):
    """A real full disk (a tmpfs, conftest.small_disk) in the middle of the save of step 4. The
    run's own checkpoint size is measured first by an uninterrupted run on the same disk; then a
    filler leaves room for 1.5 of them, so step 2's save fits and step 4's fills the disk part-way
    (tensorstore's RESOURCE_EXHAUSTED, orbax's ValueError). The run stops with exit 1 and one line
    saying the disk is full, naming the step and the folder; the *-tmp folder is removed, step 2
    restores, and once the filler is gone `--resume` ends where the uninterrupted run ended:
    the same train losses and the same final parameters, bitwise."""
    disk = small_disk(24 * 2**20)
    shards = write_shards(tmp_path)

    def args(name: str, *extra: str) -> list[str]:
        return run_args(shards, disk.folder / name, "--steps", "6", "--val-tokens", "0", "--attention-backend", "dense",
                        "--checkpoint-every", "2", "--keep-checkpoints", "1", "--run-id", name, *extra)

    free = disk.free()
    assert train_lib.main(args("straight")) == 0
    one_run = free - disk.free()  # one checkpoint (keep 1), the logs, the lock files gone
    capsys.readouterr()

    filler = disk.fill(leave=one_run * 3 // 2)
    directory = disk.folder / "full" / "checkpoints" / "full"
    err = failed(capsys, args("full"))
    error = [line for line in err.splitlines() if line.startswith(f"{PROG}: error: ")]
    assert len(err.strip().splitlines()) == 1 and len(error) == 1, err
    assert re.fullmatch(
        re.escape(f"{PROG}: error: saving the checkpoint of step 4 into {directory} failed: no space left on device "
                  "(one checkpoint there takes ") + r"\d+\.\d MB" + re.escape(": make room, then resume). Its partial folder ")
        + r"4\.orbax-checkpoint-tmp\S*" + re.escape(f" was removed. The newest complete checkpoint is step 2 in {directory} "
                                                     f"(continue with --resume {directory})."), error[0]), error[0]
    assert checkpoint.completed_steps(directory) == [2] and not tmp_dirs(disk.folder)
    assert finite(directory) == (2, True)
    assert [r["step"] for r in metrics(disk.folder / "full" / "logs" / "full.jsonl")][:4] == [1, 2, 3, 4]

    filler.unlink()  # the space is back
    assert train_lib.main(args("full", "--run-id", "resumed", "--resume", str(directory))) == 0
    resumed = capsys.readouterr()
    assert "warning" not in resumed.err and "error" not in resumed.err, resumed.err
    straight = {r["step"]: r["train_loss"] for r in metrics(disk.folder / "straight" / "logs" / "straight.jsonl")}
    after = {r["step"]: r["train_loss"] for r in metrics(disk.folder / "full" / "logs" / "resumed.jsonl")}
    assert sorted(after) == [3, 4, 5, 6] and all(after[step] == straight[step] for step in after), (after, straight)
    final, meta = checkpoint.restore_params(directory)
    expected, expected_meta = checkpoint.restore_params(disk.folder / "straight" / "checkpoints" / "straight")
    assert meta["step"] == expected_meta["step"] == 6 and meta["data_position"] == expected_meta["data_position"]
    for name, value in expected.items():
        np.testing.assert_array_equal(np.asarray(final[name]), np.asarray(value), err_msg=name)


def test_a_full_disk_during_a_log_line_stops_the_run_with_whole_lines(capsys, monkeypatch, tmp_path, small_disk):
    """The disk fills (a filler written by the replaced train step, once step 50's checkpoint is
    complete) while the run logs: the next line that needs a new page of the text log or the
    JSONL fails. The run stops with exit 1 and one line naming the file, the full disk and the
    newest checkpoint; both files end with a whole line (the kernel's partial write cut back)."""
    disk = small_disk(16 * 2**20)
    out = disk.folder / "out"
    directory = out / "checkpoints" / "w"
    calls = []

    def update(params):
        calls.append(1)
        if len(calls) == 52:  # step 50's save started before update 50: wait for it, then fill the disk
            while checkpoint.completed_steps(directory) != [50]:
                time.sleep(0.05)
            disk.fill(0)
        return params, np.float32(1.0)

    replace_train_step(monkeypatch, update)
    err = failed(capsys, run_args(write_shards(tmp_path), out, "--steps", "200", "--val-tokens", "0", "--checkpoint-every",
                                  "50", "--keep-checkpoints", "1", "--cycle-data", "--run-id", "w"))
    assert len(err.strip().splitlines()) == 1, err
    assert re.fullmatch(re.escape(f"{PROG}: error: writing the log {out / 'logs'}/w.") + r"(txt|jsonl)"
                        + re.escape(" failed: no space left on device; it ends at its last complete line. The newest "
                                    f"complete checkpoint is step 50 in {directory} (continue with --resume {directory})."),
                        err.strip()), err
    records = metrics(out / "logs" / "w.jsonl")
    assert [r["step"] for r in records] == list(range(1, len(records) + 1)) and 52 <= len(records) < 200
    assert (out / "logs" / "w.txt").read_text().endswith("\n")
    assert checkpoint.completed_steps(directory) == [50]
