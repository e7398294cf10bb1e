"""jaxgpt_tools.gpu.step_progress: where a running or killed step stood, from its log lines and
its compile caches."""

from __future__ import annotations

from jaxgpt_tools.gpu import step_progress


def test_the_phase_follows_the_records_log_lines():
    assert step_progress.phase("") == "starting: no output yet (imports)"
    assert step_progress.phase("nvidia-smi output\n").startswith("step 1: setting up, compiling")
    val0 = "step:0/30 val_loss:10.8258 train_time:0ms step_avg:nanms\n"
    assert step_progress.phase(val0).startswith("step 1: compiling and running (after the step-0 validation)")
    one = val0 + "step:1/30 train_time:61234ms step_avg:nanms\n"
    assert step_progress.phase(one) == "step 2 of 30: compiling and running (1 logged)"
    many = one + "".join(f"step:{s}/30 train_time:{s * 100}ms step_avg:nanms\n" for s in range(2, 13))
    assert step_progress.phase(many) == "step 13 of 30: running (12 logged)"
    trained = many + "".join(f"step:{s}/30 train_time:{s * 100}ms step_avg:1ms\n" for s in range(13, 31))
    assert step_progress.phase(trained) == "final validation: all 30 steps trained"
    assert step_progress.phase(trained + "step:30/30 val_loss:4.1 train_time:3000ms\n").startswith("done")


def test_read_gives_the_phase_the_last_line_and_the_caches_counts(tmp_path):
    log = tmp_path / "record.log"
    log.write_text("step:0/30 val_loss:10.8258 train_time:0ms step_avg:nanms\n\n")
    (tmp_path / "caches" / "triton" / "abc").mkdir(parents=True)
    (tmp_path / "caches" / "triton" / "abc" / "k.cubin").write_bytes(b"\0")
    progress = step_progress.read(log, 12.34, tmp_path / "caches")
    assert progress["elapsed_s"] == 12.3 and progress["last_line"].startswith("step:0/30 val_loss")
    assert "after the step-0 validation" in progress["phase"] and progress["caches"]["triton_kernels"] == 1
    assert step_progress.read(tmp_path / "absent.log", 1, None) == {
        "elapsed_s": 1, "phase": "starting: no output yet (imports)", "last_line": ""}
