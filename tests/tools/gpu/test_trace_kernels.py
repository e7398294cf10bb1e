"""jaxgpt_tools.gpu.trace_kernels: kernels ranked from real jax.profiler and torch.profiler traces
written here on the CPU, and the rules on hand-made events (GPU tracks, nesting)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
import torch

from jaxgpt_tools.gpu import trace_kernels
from scripts import trace_kernels as command


def test_jax_cpu_trace_ranks_xla_ops_without_counting_a_loop_twice(tmp_path):
    def body(_, x):
        return jnp.tanh(x @ x) * 0.5

    step = jax.jit(lambda x: jax.lax.fori_loop(0, 3, body, x).sum())
    x = jnp.ones((128, 128), jnp.float32) * 0.01
    step(x).block_until_ready()
    jax.profiler.start_trace(str(tmp_path), create_perfetto_trace=True)
    for _ in range(2):
        step(x).block_until_ready()
    jax.profiler.stop_trace()

    ranking = trace_kernels.rank(tmp_path)
    assert ranking.trace.name == "perfetto_trace.json.gz"
    assert ranking.kind == "xla:cpu"
    by_name = {kernel.name: kernel for kernel in ranking.kernels}
    loops = [kernel for name, kernel in by_name.items() if name.startswith("while")]
    # The loop ran twice (once per call) and keeps only its own overhead: its body's 6 matmuls
    # each count once, under their own names.
    assert [loop.calls for loop in loops] == [2]
    assert loops[0].total_ms < max(kernel.total_ms for kernel in ranking.kernels if kernel is not loops[0])
    assert any(kernel.calls == 6 for kernel in ranking.kernels), by_name
    assert ranking.kernels == sorted(ranking.kernels, key=lambda kernel: -kernel.total_ms)


def test_torch_cpu_trace_ranks_innermost_operators(tmp_path, capsys):
    # 256 x 256: the matmul takes ~400 us a call against linear's own ~2 us, a margin that a
    # preemption inside linear's few microseconds does not undo (at 8 x 64 it was 27 us against
    # linear's 94 us once in a loaded make test: a flaky ordering).
    layer = torch.nn.Linear(256, 256)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        for _ in range(3):
            layer(torch.ones(256, 256)).relu()
    profiler.export_chrome_trace(str(tmp_path / "trace_rank0.json"))

    ranking = trace_kernels.rank(tmp_path / "trace_rank0.json")
    assert ranking.kind == "torch:cpu"
    calls = {kernel.name: kernel.calls for kernel in ranking.kernels}
    assert calls.get("aten::addmm", 0) + calls.get("aten::mm", 0) >= 3, calls
    by_name = {kernel.name: kernel for kernel in ranking.kernels}
    # aten::linear encloses the matmul, which takes most of its time under its own name.
    assert by_name["aten::linear"].total_ms < by_name.get("aten::addmm", by_name.get("aten::mm")).total_ms
    assert command.main([str(tmp_path), "--top", "3", "--steps", "3"]) == 0
    printed = capsys.readouterr().out
    assert "PyTorch CPU operators" in printed and "ms/step" in printed and len(printed.splitlines()) == 6


def _write(path: Path, events: list[dict]) -> Path:
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return path


def test_gpu_device_tracks_are_preferred_and_nesting_counts_once(tmp_path):
    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 900, "name": "fusion.host", "args": {"hlo_op": "fusion.host"}},
        {"ph": "X", "pid": 7, "tid": 2, "ts": 0, "dur": 1000, "name": "outer"},
        {"ph": "X", "pid": 7, "tid": 2, "ts": 100, "dur": 300, "name": "gemm"},
        {"ph": "X", "pid": 7, "tid": 2, "ts": 500, "dur": 200, "name": "gemm"},
        {"ph": "X", "pid": 7, "tid": 3, "ts": 100, "dur": 50, "name": "copy"},  # another stream, same time
        {"ph": "X", "pid": 7, "tid": 2, "ts": 2000, "dur": 400, "name": "attention"},
    ]
    ranking = trace_kernels.rank(_write(tmp_path / "t.json.gz", events))
    assert ranking.kind == "gpu"
    # outer's own time is its 1000 us less the 500 us of the gemms it holds.
    assert [(k.name, k.total_ms, k.calls) for k in ranking.kernels] == [
        ("gemm", 0.5, 2), ("outer", 0.5, 1), ("attention", 0.4, 1), ("copy", 0.05, 1)]


def test_unusable_inputs_are_named(tmp_path, capsys):
    with pytest.raises(ValueError, match="no kernel events"):
        trace_kernels.rank(_write(tmp_path / "empty.json.gz", [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "name": "python"}]))
    (tmp_path / "bad.json").write_text("not json")
    with pytest.raises(ValueError, match="is not a JSON trace"):
        trace_kernels.rank(tmp_path / "bad.json")
    assert command.main([str(tmp_path / "missing")]) == 1
    assert "no trace file or folder" in capsys.readouterr().err


def test_kernel_classes_by_name_on_names_seen_on_an_h100():
    from jaxgpt_tools.gpu.trace_kernels import KernelTime, Ranking, class_totals, kernel_class

    names = {"block_sparse_attention_dkdv": "attention", "triton_tem_fused_flex_attention_0": "attention",
             "nvjet_sm90_tst_128x160_64x5_2x1_v_bz_TNT": "gemm", "gemm_fusion_dot_general_51": "gemm",
             "sm90_xmma_gemm_e4m3bf16_bf16f32": "fp8 head", "memcpy128": "copy",
             "input_reduce_fusion": "reduction", "loop_multiply_fusion": "elementwise/other"}
    assert {name: kernel_class(name) for name in names} == names
    ranking = Ranking(Path("t.json"), "gpu", [KernelTime(name, 2.0, 1) for name in names])
    totals = class_totals(ranking, steps=2)
    assert totals["attention"] == 2.0 and totals["gemm"] == 2.0 and sum(totals.values()) == 8.0
