"""`--profile START:STOP`: the flag's parsing and checks, and the trace a short run writes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from jaxgpt import config as cfg
from jaxgpt import data
from jaxgpt import train as train_lib
from jaxgpt.run.cli import parse_args
from jaxgpt.testing import small_model_config, synthetic_tokens
from jaxgpt_tools.gpu import trace_kernels


def small_preset(folder: Path, steps: int) -> cfg.Preset:
    data.write_shard(folder / "prof_train_000001.bin", synthetic_tokens(4_000, seed=31))
    train = cfg.TrainConfig(
        train_files=str(folder / "prof_train_*.bin"), val_files=str(folder / "prof_val_*.bin"), steps=steps,
        batch_tokens=2 * 256, seq_len=256, val_tokens=0, window_max_tokens=512, devices=1, out_dir=str(folder / "out"),
    )
    return cfg.Preset(model=small_model_config(), optim=cfg.OptimConfig(), train=train)


def test_window_is_parsed_in_train_line_numbers():
    assert parse_args(["--profile", "2:3"])[1].profile == (2, 3)
    assert parse_args(["--profile", "5"])[1].profile == (5, 5)
    assert parse_args([])[1].profile is None


@pytest.mark.parametrize("text", ["3:2", "0:1", "a:b", "2-3"])
def test_bad_window_is_a_usage_error(text, capsys):
    with pytest.raises(SystemExit) as stopped:
        train_lib.main(["--profile", text])
    assert stopped.value.code == 2
    assert "--profile" in capsys.readouterr().err


def test_window_beyond_the_run_is_refused_before_compiling(tmp_path):
    with pytest.raises(ValueError, match=r"--profile 3:5 names steps this run does not take \(it logs step:1 .. step:4\)"):
        train_lib.train(small_preset(tmp_path, steps=4), train_lib.RunOptions(run_id="p", progress=False, profile=(3, 5)))


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("profile")
    result = train_lib.train(small_preset(folder, steps=3),
                             train_lib.RunOptions(run_id="traced", progress=False, profile=(2, 3)))
    return folder, result


@pytest.mark.slow
def test_trace_of_the_chosen_steps_is_written_under_the_run_folder(traced_run):
    folder, result = traced_run
    traces = list((folder / "out" / "profile" / "traced").glob("plugins/profile/*/perfetto_trace.json.gz"))
    assert len(traces) == 1
    assert list(traces[0].parent.glob("*.xplane.pb")), "no XProf/TensorBoard file"
    events = json.loads(gzip.decompress(traces[0].read_bytes()))["traceEvents"]
    # The train step ran exactly twice inside the trace (steps 2 and 3), the eval step never.
    runs = {e["args"]["run_id"] for e in events if e.get("args", {}).get("hlo_module") == "jit_local_train_step_with_stop"}
    assert len(runs) == 2
    assert "profile of steps 2..3:" in result.log_path.read_text()


@pytest.mark.slow
def test_kernel_ranking_reads_the_run_trace(traced_run):
    folder, _ = traced_run
    ranking = trace_kernels.rank(folder / "out" / "profile" / "traced")
    assert ranking.kind == "xla:cpu"
    assert len(ranking.kernels) > 10 and ranking.kernels[0].total_ms > 0
    assert any("fusion" in kernel.name for kernel in ranking.kernels[:10])
