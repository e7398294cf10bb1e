"""jaxgpt_tools.upstream_record: the record's script out of its log, the listed changes, the run folder.

The record's code is never committed, so these tests patch a stand-in with the same setting names
(the `stand_in` fixture, tests/tools/conftest.py); the real script is patched too when it was
fetched into runs/upstream/ (ignored)."""

import ast

import pytest

from jaxgpt_tools import upstream_record as ur


def settings(source: str) -> dict[str, object]:
    """The Hyperparameters class attributes of a source, evaluated."""
    cls = next(node for node in ast.parse(source).body if isinstance(node, ast.ClassDef) and node.name == "Hyperparameters")
    return {node.targets[0].id: eval(compile(ast.Expression(node.value), "<setting>", "eval"))  # noqa: S307
            for node in cls.body if isinstance(node, ast.Assign)}


def test_script_from_log_takes_the_part_above_the_first_rule(stand_in):
    log = stand_in + "\n" + "=" * 100 + "\nRunning Python 3.12\n" + "=" * 100 + "\nstep:0/10 val_loss:10.8\n"
    assert ur.script_from_log(log) == stand_in
    with pytest.raises(ValueError, match="no line of '='"):
        ur.script_from_log("step:0/10 val_loss:10.8\n")
    with pytest.raises(ValueError, match="no source above it"):
        ur.script_from_log("\n" + "=" * 100 + "\n")


def test_patches_change_only_the_listed_settings_each_matching_once(stand_in):
    patched, applied = ur.patch_script(stand_in, ur.record_patches(ur.RecordRun(steps=30, val_tokens=65536)))
    assert settings(patched) == {"train_files": "shards/train/*.bin", "val_files": "shards/val/*.bin",
                                 "val_tokens": 65536, "batch_size": 65536, "num_iterations": 30,
                                 "val_loss_every": 125}
    assert "file_iter = itertools.cycle(files)" in patched and patched.startswith("import itertools\n")
    assert "local_batch_size = Hyperparameters.batch_size // 8" in patched  # a longer name is left alone
    assert "# a note" in patched and "# another note" in patched
    compile(patched, "patched", "exec")
    # Line numbers are the unpatched script's: the import goes in last.
    assert {a["name"]: a["line"] for a in applied}["num_iterations = 30"] == stand_in.splitlines().index(
        "    num_iterations = 1393") + 1
    assert all(a["reason"] for a in applied)


def test_validation_at_the_end_only_is_the_scripts_own_zero(stand_in):
    patched, applied = ur.patch_script(stand_in, ur.record_patches(ur.RecordRun(steps=30, val_loss_every=0)))
    assert settings(patched)["val_loss_every"] == 0 and "# a note" in patched
    assert "val_loss_every = 0" in [a["name"] for a in applied]


def test_a_patch_that_does_not_match_once_names_itself(stand_in):
    with pytest.raises(ValueError, match="'num_iterations = 30' matched 0 times"):
        ur.patch_script(stand_in.replace("num_iterations", "iterations"), ur.record_patches(ur.RecordRun(30)))
    doubled = stand_in.replace("    val_loss_every = 125", "    batch_size = 1")
    with pytest.raises(ValueError, match="'batch_size = 65536' matched 2 times"):
        ur.patch_script(doubled, ur.record_patches(ur.RecordRun(30)))


def real_record_script() -> str:
    """Where scripts/fetch_record.py writes it, else from the record's log beside the checkout
    (CI's .ci/run points $JAXGPT_UPSTREAM_LOGS at it), so that CI runs the test below too."""
    from jaxgpt_tools.parity import record_code, record_logs

    if ur.DEFAULT_SCRIPT.is_file():
        return ur.DEFAULT_SCRIPT.read_text()
    if (reason := record_logs.check_logs(["record"])) is not None:  # raises where the logs are required (CI)
        pytest.skip(f"the fetched script ({ur.DEFAULT_SCRIPT}) is not here and {reason}")
    return record_code.record_script("record")


def test_the_real_record_script_takes_every_patch():
    source = real_record_script()
    assert ur.sha256(source) == ur.SCRIPT_SHA256
    patched, applied = ur.patch_script(source, ur.record_patches(ur.RecordRun(steps=30)))
    compile(patched, "patched", "exec")
    hyper = settings(patched)
    assert (hyper["num_iterations"], hyper["batch_size"], hyper["val_tokens"]) == (30, 65536, 65536)
    assert hyper["seq_len"] == 65536 and hyper["val_loss_every"] == 125  # untouched
    assert len(applied) == len(ur.record_patches(ur.RecordRun(30)))
    # The device plan's run: validation after the last step only.
    patched, _ = ur.patch_script(source, ur.record_patches(ur.RecordRun(steps=30, val_loss_every=0)))
    assert settings(patched)["val_loss_every"] == 0


def test_fetch_from_a_local_log_checks_the_record_hash(tmp_path, stand_in):
    log = tmp_path / "log.txt"
    log.write_text(stand_in + "=" * 100 + "\n")
    with pytest.raises(ValueError, match="not the Sub3Min record's"):
        ur.fetch(tmp_path / "out" / "train_gpt.py", log=log)
    out = ur.fetch(tmp_path / "out" / "train_gpt.py", log=log, check=False)
    assert out.read_text() == stand_in and not list(out.parent.glob("*.partial"))


def test_prepare_run_lays_out_the_folder_and_the_one_process_environment(tmp_path, stand_in):
    script = tmp_path / "train_gpt.py"
    script.write_text(stand_in)
    for name in ("train_000.bin", "train_001.bin", "val_000.bin"):
        (tmp_path / name).write_bytes(b"")
    empty_path = tmp_path / "no_tools"
    empty_path.mkdir()
    run = ur.prepare_run(script, tmp_path / "run", ur.RecordRun(30), str(tmp_path / "train_*.bin"),
                         str(tmp_path / "val_*.bin"), python="python3", base_env={"PATH": str(empty_path)})
    assert run.command == ["python3", ur.PATCHED_NAME] and run.script.is_file()
    assert sorted(p.name for p in (run.folder / "shards" / "train").iterdir()) == ["train_000.bin", "train_001.bin"]
    assert (run.env["RANK"], run.env["WORLD_SIZE"], run.env["LOCAL_RANK"]) == ("0", "1", "0")
    assert int(run.env["MASTER_PORT"]) > 0
    # No nvidia-smi on that PATH: a stand-in goes first on it, and the report says so.
    assert (run.folder / "bin" / "nvidia-smi").is_file() and run.env["PATH"].startswith(str(run.folder / "bin"))
    assert any("nvidia-smi" in change for change in run.environment_changes)
    with pytest.raises(FileNotFoundError, match="no shards match"):
        ur.prepare_run(script, tmp_path / "run2", ur.RecordRun(30), str(tmp_path / "none_*.bin"),
                       str(tmp_path / "val_*.bin"))
    with pytest.raises(FileNotFoundError, match="fetch_record.py"):
        ur.prepare_run(tmp_path / "absent.py", tmp_path / "run3", ur.RecordRun(30), "", "")


def test_log_file_text_reads_past_the_source(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "abc-123.txt").write_text(
        "print('peak memory allocated: 1 MiB')\n" + "=" * 100 + "\nstep:1/2 train_time:5ms\npeak memory allocated: 37653 MiB\n")
    text = ur.log_file_text("logs/abc-123.txt\nstep:1/2 train_time:5ms\n", tmp_path)
    assert text.lstrip().startswith("step:1/2") and "37653" in text and "print(" not in text
    assert ur.log_file_text("no log line\n", tmp_path) == ""
