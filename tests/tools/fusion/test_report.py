"""jaxgpt_tools.fusion.report (scripts/fusion_report.py), its Inductor reader and its timing: the reader on
small hand-written output_code.py files, the interleaved timing on counters, and a tiny run of the whole report
on this CPU (the HLO reader: tests/tools/common/test_hlo.py)."""

from __future__ import annotations

import json

import pytest

from jaxgpt_tools.fusion.inductor import input_types, launch_table, read_output_code

OUTPUT_CODE = """
cpp_fused_add_mul_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
extern "C" void kernel(const float* in_ptr0, float* out_ptr0) { out_ptr0[0] = in_ptr0[0] * 2; }
''')

cpp_fused_sum_1 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
extern "C" void kernel(const float* in_ptr0, float* out_ptr0) { float tmp_acc0 = 0; }
''')


class Runner:
    def call(self, args):
        primals_1, primals_2 = args
        args.clear()
        buf0 = empty_strided_cpu((4, 8), (8, 1), torch.float32)
        cpp_fused_add_mul_0(primals_1, buf0)
        buf1 = empty_strided_cpu((4, 8), (8, 1), torch.bfloat16)
        extern_kernels.mm(buf0, primals_2, out=buf1)
        buf2 = buf0; del buf0  # reuse
        cpp_fused_sum_1(buf1, buf2)
        buf3 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(buf2, buf2, buf2)
        return (buf2, )
"""


def test_read_output_code_counts_launches_and_traffic():
    counts = read_output_code(OUTPUT_CODE, {"primals_1": (32, 4, "float32"), "primals_2": (64, 4, "float32")})
    assert counts["generated_kernels"] == 2
    assert counts["generated_by_kind"] == {"pointwise": 1, "reduction": 1}
    assert counts["extern_kernels"] == {"mm": 1} and counts["gemm_kernels"] == 1
    assert counts["aten_fallbacks"] == {"aten._scaled_dot_product_flash_attention_for_cpu.default": 1}
    assert counts["kernels"] == 4
    # add_mul 128 + 128; mm 128 + 256 + 64; sum 64 + 128 (buf2 reuses buf0); sdpa reads buf2 (128).
    assert counts["kernel_traffic_bytes"] == 256 + 448 + 192 + 128


TRITON_CODE = """
triton_red_fused_mean_rsqrt_0 = async_compile.triton('triton_red_fused_mean_rsqrt_0', '''
@triton.jit
def triton_red_fused_mean_rsqrt_0(in_out_ptr0, in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    pass
''', device_str='cuda')


class Runner:
    def call(self, args):
        primals_1, primals_2 = args
        buf0 = empty_strided_cuda((4, 8), (8, 1), torch.float32)
        buf1 = reinterpret_tensor(buf0, (4, 4), (8, 1), 0)  # alias
        buf2 = empty_strided_cuda((4, ), (1, ), torch.float32)
        triton_red_fused_mean_rsqrt_0.run(buf1, primals_1, buf2, 4, 8, stream=stream0)
        return (buf0, )


def get_args():
    from torch._dynamo.testing import rand_strided
    primals_1 = rand_strided((4, 8), (8, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_2 = rand_strided((2, ), (1, ), device='cuda:0', dtype=torch.float32)
"""


def test_launch_table_reads_and_writes_by_pointer_names():
    assert input_types(TRITON_CODE) == {"primals_1": (32, 2, "bfloat16"), "primals_2": (2, 4, "float32")}
    (launch,) = launch_table(TRITON_CODE, input_types(TRITON_CODE))
    # in_out_ptr0 is the 4x4 fp32 view (64 B) read and written; in_ptr0 the bf16 input (64 B);
    # out_ptr0 the (4,) fp32 result (16 B); the sizes after them are not buffers.
    assert launch == {"name": "triton_red_fused_mean_rsqrt_0", "kind": "reduction", "gemm": False,
                      "read": 64 + 64, "written": 64 + 16, "reads": [[16, "float32"], [32, "bfloat16"]],
                      "writes": [[16, "float32"], [4, "float32"]]}


def test_frozen_parameters_are_sized_from_their_comment():
    code = "_frozen_param13 = None  # device(type='cpu') torch.bfloat16 (384, 128) (1, 0) 7fcccff90d20\n"
    assert input_types(code) == {"_frozen_param13": (384 * 128, 2, "bfloat16")}


def test_measure_interleaves_the_programs_it_compares():
    from jaxgpt_tools.fusion.xla import Timing, measure

    calls = []
    timings = measure([lambda: calls.append("merged"), lambda: calls.append("separate")],
                      Timing(target_s=0.0, min_repeats=3, max_repeats=3))
    # one warm call each, then rounds of one call each: a load change falls on both alike
    assert calls == ["merged", "separate"] * 4
    for timing in timings:
        assert timing["repeats"] == 3 and timing["interleaved_with"] == 1
        assert timing["min_ms"] <= timing["p25_ms"] <= timing["median_ms"] <= timing["p75_ms"] <= timing["max_ms"]
        assert len(timing["load_1m"]) == 2


@pytest.mark.slow  # ~30-60 s: Inductor's first compile in a process dominates
def test_fusion_report_tiny_run(tmp_path, capsys):
    from scripts import fusion_report

    docs, artifacts = tmp_path / "docs", tmp_path / "artifacts"
    assert fusion_report.main(["--shapes", "tiny", "--no-gpu-aot", "--parts", "qkv", "--modes", "fwd", "--time-s", "0.01",
                               "--idle-wait-s", "0",
                               "--out", str(tmp_path / "runs"), "--write-docs", "--docs-dir", str(docs),
                               "--artifacts-dir", str(artifacts)]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    # Inductor's merge passes are compiled beside the defaults, separate layout, untimed; on a
    # (T, D) input batch_linear_lhs merges the three projections, on the path's (1, T, D) it does not.
    ablation = {r["variant"]: r for r in rows if r["variant"] != "default"}
    assert set(ablation) == {"batch_linear_lhs", "batch_linear_lhs_2d", "freezing_concat_linear"}
    assert all(r["compiler"] == "inductor" and r["time"] is None and r["layout"] == "separate" for r in ablation.values())
    assert (ablation["batch_linear_lhs"]["gemm_kernels"], ablation["batch_linear_lhs_2d"]["gemm_kernels"]) == (3, 1)
    assert ablation["freezing_concat_linear"]["gemm_kernels"] == 1
    rows = [r for r in rows if r["variant"] == "default"]
    assert {(r["compiler"], r["layout"]) for r in rows} == {(c, l) for c in ("xla", "inductor") for l in ("merged", "separate")}
    for row in rows:
        # Merged: one projection GEMM; separate: three, unless the compiler merges them (none does on a CPU).
        assert row["gemm_kernels"] == (1 if row["layout"] == "merged" else 3) and row["kernels"] > row["gemm_kernels"]
        assert row["time"] > 0
        # Reading the arguments and writing the results once is the least any schedule moves.
        assert row["bytes"] >= row["min_bytes"] > 0
    assert (tmp_path / "runs" / "cpu" / "xla" / "qkv_fwd_merged_tiny.hlo.txt").exists()
    assert list((tmp_path / "runs" / "cpu" / "inductor" / "qkv_fwd_separate_tiny").rglob("output_code.py"))
    results = json.loads((artifacts / "results.json").read_text())
    assert {name for r in results["records"] for name in r.get("files", [])} == {
        "xla_cpu/qkv_fwd_merged_tiny.hlo.txt", "xla_cpu/qkv_fwd_separate_tiny.hlo.txt",
        "inductor_cpu/qkv_fwd_merged_tiny.inference.output_code.py", "inductor_cpu/qkv_fwd_separate_tiny.inference.output_code.py",
        "inductor_cpu/qkv_fwd_separate_tiny_batch_linear_lhs_2d.inference.output_code.py",
        "inductor_cpu/qkv_fwd_separate_tiny_freezing_concat_linear.inference.output_code.py"}
    assert {c["compiler"]: c["equal"] for c in results["equality"]} == {"xla": True, "inductor": True}
    page = (docs / "FUSION.md").read_text()
    assert "| XLA CPU | QKV path forward | merged |" in page and page.split("\n\n")[1].startswith("| target |")
    assert (artifacts / "fusion.png").stat().st_size > 0
    # The page regenerates from the curated results alone.
    assert fusion_report.main(["--from-results", str(artifacts), "--docs-dir", str(tmp_path / "again"),
                               "--artifacts-dir", str(tmp_path / "again-artifacts")]) == 0


def test_unknown_names_are_refused_by_name(capsys):
    from jaxgpt_tools.fusion.report import unknown_names
    from scripts import fusion_report

    assert unknown_names(["small", "huge"], ["xla", "tvm"], ["qkv"], ["fwd"]) == ["huge", "tvm"]
    for argv, message in ((["--shapes", "huge", "--no-gpu-aot"], "unknown shape, compiler, part or mode: huge"),
                          (["--quick", "--threads", "4096", "--no-gpu-aot"], "--threads 4096 but this process may use only")):
        with pytest.raises(SystemExit) as usage:  # a usage error: argparse's exit 2 and its line
            fusion_report.main(argv)
        assert usage.value.code == 2 and f": error: {message}" in capsys.readouterr().err
