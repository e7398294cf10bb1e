"""jaxgpt_tools.fusion.roofline: kernels computed by hand, and the committed results' roofline
totals against a second path: the committed program texts (artifacts/fusion/) re-parsed, their
GEMM FLOPs read from the dots and extern GEMM calls by this file's own regular expressions and
their bytes from the texts' kernels, not from results.json's lists. Reads files only."""

from __future__ import annotations

import json
import math
import re

import pytest

from jaxgpt_tools.fusion import byte_model, roofline
from jaxgpt_tools.fusion.inductor import read_code
from jaxgpt_tools.fusion.report import REPO_ROOT, load_results
from jaxgpt_tools.fusion.xla import kernel_rows

ARTIFACTS = REPO_ROOT / "artifacts" / "fusion"
XLA_H100 = {"compiler": "xla", "device": "h100-compile-only"}


def test_a_merged_gemm_by_hand():
    """XLA's merged forward GEMM at the record's shape: h (65,536 x 768) bf16 times the f32 (2,304 x 768)
    weight cast in its prologue, a bf16 (65,536 x 2,304) result."""
    kernel = {"name": "gemm_fusion_dot", "gemm": True, "operands": ["bf16[65536,768]", "f32[2304,768]"],
              "result": "bf16[65536,2304]", "read": 65536 * 768 * 2 + 2304 * 768 * 4, "written": 65536 * 2304 * 2}
    bound = roofline.kernel_bound(XLA_H100, kernel)
    assert bound.flops == 231_928_233_984  # 2 * 65,536 * 2,304 * 768
    assert bound.bytes == 409_731_072  # 100,663,296 + 7,077,888 read, 301,989,888 written
    assert bound.intensity == pytest.approx(566.05, abs=0.01)
    assert bound.compute_s == pytest.approx(234.508e-6, rel=1e-5)  # / 989e12
    assert bound.memory_s == pytest.approx(122.308e-6, rel=1e-5)  # / 3.35e12
    assert bound.limit == "compute" and bound.bound_s == bound.compute_s and bound.group == "GEMMs"


def test_a_norm_kernel_by_hand():
    """XLA's QK norm kernel: 6 arithmetic ops (add, multiply x3, reduce, rsqrt; convert is not one) on its
    largest array, the (65,536 x 2,304) input: an estimate far under the vector ridge, bound by its bytes."""
    kernel = {"name": "triton_softmax.2", "gemm": False, "functions": ["norm"],
              "ops": {"add": 1, "convert": 1, "multiply": 3, "reduce": 1, "rsqrt": 1},
              "operands": ["bf16[65536,2304]"], "result": "f32[1,65536,6,128]", "read": 100663296.0, "written": 201326592}
    bound = roofline.kernel_bound(XLA_H100, kernel)
    assert bound.flops == 6 * 65536 * 2304
    assert bound.intensity == pytest.approx(3.0) and bound.intensity < roofline.H100.vector_ridge
    assert bound.limit == "memory" and bound.bound_s == pytest.approx(301989888 / 3.35e12)
    assert bound.group == "norm, rotary, value mix"


@pytest.mark.parametrize(("operands", "result", "flops"), [
    # split-K weight gradient: K = 65,536 in 2 slices, an f32 partial product per slice
    (["bf16[2304,2,32768]", "bf16[2,32768,768]"], "f32[2,2304,768]", 2 * 2304 * 768 * 65536),
    # XLA's dot merger: h and the three separate weights concatenated inside the fusion
    (["bf16[256,128]", "bf16[128,128]", "bf16[128,128]", "bf16[128,128]"], "bf16[256,384]", 2 * 256 * 384 * 128),
    # split-K with K = 256 in 4 slices of 64, where element counts alone also fit K = 128
    (["bf16[384,4,64]", "bf16[4,64,128]"], "f32[4,384,128]", 2 * 384 * 128 * 256),
    # a residual taken by the epilogue is not one of the dot's operands
    (["bf16[65536,768]", "bf16[768,768]", "bf16[65536,768]"], "bf16[65536,768]", 2 * 65536 * 768 * 768),
])
def test_xla_gemm_flops_from_shapes(operands, result, flops):
    assert roofline.xla_gemm_flops({"name": "g", "operands": operands, "result": result}) == flops


def test_inductor_gemm_flops_and_a_kernel_that_fits_no_product():
    mm = {"name": "mm", "reads": [[50331648, "bfloat16"], [1769472, "bfloat16"]], "writes": [[150994944, "bfloat16"]]}
    assert roofline.inductor_gemm_flops(mm) == 2 * 65536 * 2304 * 768
    with pytest.raises(ValueError, match="no split"):
        roofline.xla_gemm_flops({"name": "g", "operands": ["bf16[3,5]", "bf16[7,11]"], "result": "bf16[13,17]"})


# ---------------------------------------------------------------------------------------------
# Second path: the committed program texts, re-parsed here.

def _numel(dims: str) -> int:
    return math.prod(int(d) for d in re.findall(r"\d+", dims)) if dims.strip() else 1


def hlo_dot_flops(hlo: str) -> float:
    """2 * result elements * contracted size of every dot in an HLO text (fusion bodies included)."""
    shapes = dict(re.findall(r"%([\w.\-]+) = \w+\[([\d,]*)\]", hlo))
    total = 0.0
    for result, lhs, contracting in re.findall(
            r"= \w+\[([\d,]*)\]\S* dot\(%([\w.\-]+), %[\w.\-]+\).*?lhs_contracting_dims=\{([\d,]*)\}", hlo):
        lhs_dims = [int(d) for d in shapes[lhs].split(",") if d]
        total += 2.0 * _numel(result) * math.prod(lhs_dims[int(i)] for i in contracting.split(","))
    return total


def inductor_mm_flops(code: str) -> float:
    """2 * M * N * K of every extern mm in an Inductor output code: M x N from its out buffer's
    allocation, K the last size of its first argument (a view's size, or its allocation or check)."""
    sizes = dict(re.findall(r"(\w+) = empty_strided_\w+\(\(([\d, ]*)\)", code))
    sizes.update(re.findall(r"assert_size_stride\((\w+), \(([\d, ]*)\)", code))
    sizes.update(re.findall(r"(\w+) = rand_strided\(\(([\d, ]*)\)", code))
    sizes.update(re.findall(r"(\w+) = reinterpret_tensor\(\w+, \(([\d, ]*)\)", code))  # a view as a new name
    for name, reused in re.findall(r"(\w+) = (\w+); del \2\s+# reuse", code):  # in order: a reuse of a reuse
        sizes[name] = sizes[reused]
    total = 0.0
    for first, out in re.findall(r"extern_kernels\.mm\((reinterpret_tensor\(\w+, \([\d, ]*\)|\w+).*out=(\w+)\)", code):
        view = re.match(r"reinterpret_tensor\(\w+, \(([\d, ]*)\)", first)
        k = int((view.group(1) if view else sizes[first]).split(",")[-1])
        total += 2.0 * _numel(sizes[out]) * k
    return total


@pytest.fixture(scope="module")
def committed():
    return load_results([ARTIFACTS / "results.json"])["records"]


def kept_programs(records):
    """The QKV programs whose texts are committed, default flags (the ones the page's roofline shows)."""
    return [r for r in records if r.get("files") and r["part"] == "qkv" and r.get("variant", "default") == "default"]


def test_gemm_flops_equal_the_texts_and_the_model(committed):
    kept = kept_programs(committed)
    assert {(r["compiler"], r["device"]) for r in kept} == {("xla", "cpu"), ("xla", "h100-compile-only"), ("inductor", "cpu"),
                                                          ("inductor", "h100-compile-only")}
    for record in kept:
        texts = [(ARTIFACTS / name).read_text() for name in record["files"]]
        parsed = sum(hlo_dot_flops(t) if record["compiler"] == "xla" else inductor_mm_flops(t) for t in texts)
        bound = roofline.program_bound(record)
        shape = record["shape"]
        assert parsed > 0 and bound.gemm_flops == pytest.approx(parsed, rel=1e-12), record["files"]
        assert bound.gemm_flops == roofline.model_gemm_flops(record["mode"], shape["seq_len"], shape["model_dim"])


def test_bytes_and_bounds_equal_the_reparsed_texts(committed):
    """The roofline's totals from results.json's kernel lists against the same roofline over the
    kernels re-read from the committed texts (a list that drifted from its text fails here)."""
    for record in kept_programs(committed):
        texts = [(ARTIFACTS / name).read_text() for name in record["files"]]
        if record["compiler"] == "xla":
            table = kernel_rows(texts[0])
        else:
            table = [row for text in texts for row in read_code(text)["launches"]]
        reparsed = roofline.program_bound(byte_model.apply_to_record({**record, "kernel_table": table}))
        stored = roofline.program_bound(record)
        assert len(reparsed.kernels) == len(stored.kernels), record["files"]
        assert reparsed.bytes == pytest.approx(stored.bytes, rel=1e-12)
        assert reparsed.bound_s == pytest.approx(stored.bound_s, rel=1e-12)
        assert reparsed.group_bytes("norm, rotary, value mix") == pytest.approx(stored.group_bytes("norm, rotary, value mix"))


def test_sweep_bounds_equal_the_records_where_both_exist(committed):
    """The sweep's T 65,536 programs are the records' programs: their dots carry the same GEMM FLOPs and
    their totals the same bytes, so the sweep's bound and the per-kernel bound agree within the bytes
    the sweep puts in the dots' operands (bf16 weights) rather than the GEMM kernels' (f32, cast in the prologue)."""
    sweep = json.loads((ARTIFACTS / "results.json").read_text())["sweep"]
    by_key = {(b.seq_len, b.mode, b.layout): b for b in roofline.sweep_bounds(sweep)}
    for p in roofline.qkv_programs(committed):
        b = by_key.get((p.seq_len, p.mode, p.layout))
        if p.device != "h100-compile-only" or p.compiler != "xla" or p.model_dim != 768 or b is None:
            continue
        assert b.flops == p.gemm_flops
        assert b.gemm_s + b.rest_s == pytest.approx(p.bound_s, rel=0.02)


def test_the_sentences_checks_catch_a_changed_kernel_list(committed):
    """The page's roofline sentences fail their checks when a record's kernels no longer add up: a GEMM
    dropped (its FLOPs short of the model's), or the stored byte total out of step with the kernels."""
    import copy

    from jaxgpt_tools.fusion import roofline_claims

    def claims(records):
        return {c.key: c for c in roofline_claims.roofline_claims(records, [])}

    assert all(c.check() for c in claims(committed).values())
    dropped = copy.deepcopy(committed)
    target = next(r for r in dropped if r["part"] == "qkv" and r["device"] == "h100-compile-only" and r["mode"] == "fwd"
                  and r["layout"] == "separate" and r["shape"]["seq_len"] == 65536 and r.get("variant", "default") == "default")
    target["kernel_table"] = [k for k in target["kernel_table"] if not k["gemm"]][:1] + \
        [k for k in target["kernel_table"] if k["gemm"]][1:] + [k for k in target["kernel_table"] if not k["gemm"]][1:]
    assert not claims(dropped)["roofline.method"].check()
    skewed = copy.deepcopy(committed)
    target = next(r for r in skewed if r["part"] == "qkv" and r["device"] == "h100-compile-only" and r["mode"] == "fwdbwd"
                  and r["layout"] == "merged" and r["shape"]["seq_len"] == 65536 and r.get("variant", "default") == "default")
    target["kernel_traffic_bytes"] *= 1.5
    assert not claims(skewed)["roofline.record"].check()


def gpu_timed(committed, merged_ms: float, separate_ms: float, shapes=("record_gpu",)) -> list[dict]:
    """The committed compile-only QKV programs as a GPU run's, timed (what `--device cuda` records)."""
    import copy

    made = []
    for r in committed:
        if (r["device"], r["part"], r.get("variant", "default")) == ("h100-compile-only", "qkv", "default") \
                and r["shape"]["name"] in shapes:
            timed = copy.deepcopy(r)
            median = merged_ms if r["layout"] == "merged" else separate_ms
            timed |= {"device": "h100", "time": {"min_ms": median * 0.98, "median_ms": median, "max_ms": median * 1.05}}
            made.append(timed)
    return made


def test_gpu_times_sit_beside_their_bounds(committed):
    from jaxgpt_tools.fusion.roofline_claims import measured_claim

    sweep = load_results([ARTIFACTS / "results.json"])["sweep"]
    assert measured_claim(committed, sweep) is None  # nothing timed on a GPU yet
    claim = measured_claim(committed + gpu_timed(committed, 2.0, 1.6), sweep)
    assert claim.key == "roofline.measured" and claim.check()
    # XLA's forward bounds at T 65,536 (886 and 705 µs): the measured times against them
    assert ("XLA H100 forward at T 65,536: merged 2,000 µs, separate 1,600 µs (separate -20%), against bounds of 886 and "
            "705 µs (-20%; measured 2.3x and 2.3x the bound)") in claim.text
    # A time under the model's GEMM FLOPs at the matrix peak (0.70 ms forward+backward) cannot be measured: the check fails.
    assert not measured_claim(committed + gpu_timed(committed, 0.6, 0.6), sweep).check()
    # Around the dot-merger switch only XLA's sweep has the program: XLA's times get its bound, Inductor's none.
    switch = [r | {"shape": r["shape"] | {"name": "record_t21504", "seq_len": 21_504}} for r in gpu_timed(committed, 0.9, 0.8)]
    text = measured_claim(committed + switch, sweep).text
    assert "XLA H100 forward at T 21,504: merged 900 µs, separate 800 µs (separate -11%), against bounds of" in text
    assert "Inductor H100 forward at T 21,504: merged 900 µs, separate 800 µs (separate -11%);" in text
