"""jaxgpt_tools.fusion_report (scripts/fusion_report.py) and its Inductor reader: the reader on a small
hand-written output_code.py, and a tiny run of the whole report on this CPU (the HLO reader: tests/test_hlo.py)."""

from __future__ import annotations

import json

import pytest

from jaxgpt_tools.fusion_inductor import read_output_code

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
    counts = read_output_code(OUTPUT_CODE, {"primals_1": 128, "primals_2": 256})
    assert counts["generated_kernels"] == 2
    assert counts["generated_by_kind"] == {"pointwise": 1, "reduction": 1}
    assert counts["extern_kernels"] == {"mm": 1} and counts["gemm_kernels"] == 1
    assert counts["aten_fallbacks"] == {"aten._scaled_dot_product_flash_attention_for_cpu.default": 1}
    assert counts["kernels"] == 4
    # add_mul 128 + 128; mm 128 + 256 + 64; sum 64 + 128 (buf2 reuses buf0); sdpa reads buf2 (128).
    assert counts["kernel_traffic_bytes"] == 256 + 448 + 192 + 128


@pytest.mark.slow  # ~15-20 s: Inductor's first compile in a process dominates
def test_fusion_report_tiny_run(tmp_path, capsys):
    from scripts import fusion_report

    docs = tmp_path / "docs"
    assert fusion_report.main(["--shapes", "tiny", "--no-gpu", "--parts", "attn", "--modes", "fwd", "--repeats", "1",
                               "--out", str(tmp_path), "--write-docs", "--docs-dir", str(docs)]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = result["rows"]
    assert {(r["compiler"], r["layout"]) for r in rows} == {(c, l) for c in ("xla", "inductor") for l in ("merged", "separate")}
    for row in rows:
        # Both layouts of the attention layer run at least the QKV projection and c_proj as GEMMs.
        assert row["gemm_kernels"] >= 2 and row["kernels"] > row["gemm_kernels"]
        assert row["median_ms"] > 0 and row["flops"] > 0
        # Reading the arguments and writing the result once is the least any schedule moves.
        assert row["kernel_traffic_bytes"] >= row["min_bytes"] > 0
    assert (tmp_path / "cpu" / "xla" / "attn_fwd_merged_tiny.hlo.txt").exists()
    assert list((tmp_path / "cpu" / "inductor" / "attn_fwd_separate_tiny").rglob("output_code.py"))
    assert json.loads((tmp_path / "cpu" / "results.json").read_text())["rows"] == rows
    page = (docs / "FUSION.md").read_text()
    assert "| attention layer fwd | " in page and "compiled without a GPU, no autotuning" in page
    assert (docs / "fusion" / "fusion.png").stat().st_size > 0
    assert (docs / "fusion" / "xla_cpu_attn_fwd_separate_tiny.hlo.txt").exists()
