"""jaxgpt_tools.fusion_report (scripts/fusion_report.py) and its readers (fusion_hlo, fusion_inductor): the text readers on
small hand-written programs, and a tiny run of the whole report on this CPU."""

from __future__ import annotations

import json

import pytest

from jaxgpt_tools.fusion_hlo import hlo_counts, parse_module, shape_bytes
from jaxgpt_tools.fusion_inductor import read_output_code

HLO = """HloModule jit_f, entry_computation_layout={(f32[4,8]{1,0}, f32[8,8]{1,0})->bf16[4,8]{1,0}}

%fused_gemm (p0: f32[4,8], p1: f32[8,8]) -> bf16[4,8] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[8,8]{1,0} parameter(1)
  %neg = f32[4,8]{1,0} negate(%p0)
  %dot.1 = f32[4,8]{1,0} dot(%neg, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT %cvt = bf16[4,8]{1,0} convert(%dot.1)
}

%fused_exp (p0.1: bf16[4,8]) -> bf16[4,8] {
  %p0.1 = bf16[4,8]{1,0} parameter(0)
  ROOT %e = bf16[4,8]{1,0} exponential(%p0.1)
}

ENTRY %main (x: f32[4,8], w: f32[8,8]) -> bf16[4,8] {
  %x = f32[4,8]{1,0} parameter(0)
  %w = f32[8,8]{1,0} parameter(1)
  %t = f32[8,8]{0,1} transpose(%w), dimensions={1,0}
  %g = bf16[4,8]{1,0} fusion(%x, %t), kind=kCustom, calls=%fused_gemm, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  %tuple = (bf16[4,8]{1,0}, f32[8,8]{0,1}) tuple(%g, %t)
  ROOT %out = bf16[4,8]{1,0} fusion(%g), kind=kLoop, calls=%fused_exp
}
"""


def test_shape_bytes():
    assert shape_bytes("bf16[2,3]{1,0}") == 12
    assert shape_bytes("(f32[2]{0}, s32[])") == 12
    assert shape_bytes("pred[]") == 1


def test_hlo_counts_on_a_hand_written_module():
    module = parse_module(HLO)
    assert module.entry == "main" and set(module.computations) == {"fused_gemm", "fused_exp", "main"}
    counts = hlo_counts(HLO)
    # transpose + GEMM fusion + loop fusion; parameters and the tuple launch nothing.
    assert counts["kernels"] == 3
    assert counts["fusions"] == {"triton_gemm": 1, "kLoop": 1}
    assert counts["gemm_kernels"] == 1 and counts["dots"] == 1 and counts["dot_shapes"] == ["f32[4,8]"]
    assert counts["transposes"] == 1 and counts["copies"] == 0
    assert counts["gemm_fusions"] == [{"fusion": "g", "kind": "triton_gemm", "runs": 1, "prologue": ["negate"], "epilogue": ["convert"]}]
    # Every kernel reads its operands and writes its result once: transpose 256 + 256, GEMM
    # 128 + 256 in and 64 out, exp 64 in and 64 out.
    assert counts["kernel_traffic_bytes"] == 512 + 448 + 128


LOOP_HLO = """HloModule loop

%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %v = f32[8]{0} get-tuple-element(%p), index=1
  %e = f32[8]{0} exponential(%v)
  ROOT %t = (s32[], f32[8]{0}) tuple(%i, %e)
}

%cond (p.1: (s32[], f32[8])) -> pred[] {
  %p.1 = (s32[], f32[8]{0}) parameter(0)
  ROOT %c = pred[] constant(true)
}

ENTRY %main (x: f32[8]) -> (s32[], f32[8]) {
  %x = f32[8]{0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8]{0}) tuple(%zero, %x)
  ROOT %w = (s32[], f32[8]{0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"3"}}
}
"""


def test_loop_bodies_count_once_per_trip():
    counts = hlo_counts(LOOP_HLO)
    assert counts["static_kernels"] == 1 and counts["kernels"] == 3 and counts["while_loops"] == 1
    assert counts["kernel_traffic_bytes"] == 3 * 64


SLICE_HLO = """HloModule slices

%fused_slice (i: s32[], buf: f32[64,8]) -> f32[1,8] {
  %buf = f32[64,8]{1,0} parameter(1)
  %flat = f32[64,8]{1,0} bitcast(%buf)
  %i = s32[] parameter(0)
  %zero = s32[] constant(0)
  ROOT %ds = f32[1,8]{1,0} dynamic-slice(%flat, %i, %zero), dynamic_slice_sizes={1,8}
}

%fused_update (i.1: s32[], buf.1: f32[64,8], new: f32[1,8]) -> f32[64,8] {
  %buf.1 = f32[64,8]{1,0} parameter(1)
  %new = f32[1,8]{1,0} parameter(2)
  %i.1 = s32[] parameter(0)
  %zero.1 = s32[] constant(0)
  %dus = f32[64,8]{1,0} dynamic-update-slice(%buf.1, %new, %i.1, %zero.1)
  ROOT %out = f32[64,8]{1,0} bitcast(%dus)
}

ENTRY %main (k: s32[], b: f32[64,8]) -> f32[64,8] {
  %k = s32[] parameter(0)
  %b = f32[64,8]{1,0} parameter(1)
  %row = f32[1,8]{1,0} fusion(%k, %b), kind=kLoop, calls=%fused_slice
  ROOT %put = f32[64,8]{1,0} fusion(%k, %b, %row), kind=kLoop, calls=%fused_update
}
"""


def test_sliced_reads_and_in_place_updates_move_only_their_slices():
    # slice: index 4 + one row 32 read, 32 written; update: index 4 + row 32 read, 32 written
    # in place (the 2 kB buffer is neither read nor rewritten whole).
    assert hlo_counts(SLICE_HLO)["kernel_traffic_bytes"] == (4 + 32 + 32) + (4 + 32 + 32)


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
