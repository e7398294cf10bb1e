"""The GEMM choices compiling without a GPU cannot make, bounded (fusion/gemm_choice.py and the
legs of fusion/compile_only.py): the committed programs' sentences and their checks, checks that
fail on skewed data, a cuBLAS call's workspace left out of the byte model, a child's failure in
one line, and the merge of a GEMM-choice leg's run and of a CPU column made again by another torch."""

from __future__ import annotations

import copy
import json

import pytest

from jaxgpt_tools.fusion import byte_model, gemm_choice, report
from jaxgpt_tools.fusion.artifacts import unchanged_ablation
from jaxgpt_tools.fusion.compile_only import failure_line
from jaxgpt_tools.fusion.records import find
from jaxgpt_tools.fusion.report import REPO_ROOT, load_results

ARTIFACTS = REPO_ROOT / "artifacts" / "fusion"


@pytest.fixture(scope="module")
def committed():
    return load_results([ARTIFACTS / "results.json"])


def claims_by_key(study) -> dict:
    return {c.key: c for c in gemm_choice.gemm_choice_claims(study["records"], study["runs"])}


def test_the_committed_gemm_choices_are_stated_and_checked(committed):
    made = claims_by_key(committed)
    assert set(made) == {"gemm_choice.calls", "gemm_choice.kernels", "gemm_choice.bound", "gemm_choice.autotune",
                         "gemm_choice.inductor"}
    assert all(claim.check() for claim in made.values())
    # Measured on jaxlib 0.10.2 compiled without a GPU: Triton GEMMs off is cuBLASLt, whatever its flag.
    assert "every one a `__cublas$lt$matmul` custom call (cuBLASLt), none `__cublas$gemm`" in made["gemm_choice.calls"].text
    assert "the 4 programs are the same kernel for kernel" in made["gemm_choice.calls"].text
    assert "forward merged 0 → 1, separate 0 → 3" in made["gemm_choice.kernels"].text  # the cast's own kernels
    assert "CUDA driver version is insufficient" in made["gemm_choice.inductor"].text
    programs = gemm_choice.gemm_programs(committed["records"])
    assert len(programs) == 4 and all(set(p) == {"default", "triton_gemm_off", "triton_gemm_off_cublaslt_off"}
                                      for p in programs.values())


def test_the_checks_fail_on_skewed_programs(committed):
    skewed = copy.deepcopy(committed)
    cublas = next(r for r in skewed["records"] if r.get("variant") == "triton_gemm_off" and r["mode"] == "fwd")
    cublas["custom_calls"] = {}  # XLA's own count no longer holds the library calls the table shows
    assert not claims_by_key(skewed)["gemm_choice.calls"].check()
    skewed = copy.deepcopy(committed)
    cublas = next(r for r in skewed["records"] if r.get("variant") == "triton_gemm_off" and r["mode"] == "fwdbwd")
    cublas["kernel_traffic_bytes"] *= 1.5  # a byte total the per-kernel table does not add up to
    assert not claims_by_key(skewed)["gemm_choice.bound"].check()
    skewed = copy.deepcopy(committed)
    small = find(skewed["records"], compiler="inductor", device="h100-compile-only", part="qkv", mode="fwd", layout="merged",
                 shape="small")
    skewed["records"].append({**small, "variant": "max_autotune"})  # a program the leg says it could not compile
    assert not claims_by_key(skewed)["gemm_choice.inductor"].check()


def test_a_cublas_workspace_is_no_bytes_moved():
    call = {"name": "custom-call.1", "kind": "__cublas$lt$matmul", "operands": ["bf16[4,2]", "bf16[2,6]"],
            "result": "(bf16[4,6], s8[4194304])"}
    assert byte_model.kernel_read_written("xla", call) == (16.0 + 24.0, 48.0)
    # Any other tuple keeps its every array, an s8 one included.
    assert byte_model.kernel_read_written("xla", {**call, "kind": "kLoop"})[1] == 48.0 + 4194304


def test_failure_line_names_the_error_and_the_frames_that_raised_it():
    stderr = ("Traceback (most recent call last):\n"
              '  File "/x/torch/_inductor/select_algorithm.py", line 1, in benchmark\n    a()\n'
              '  File "/x/torch/_inductor/select_algorithm.py", line 2, in <dictcomp>\n    b()\n'
              '  File "/x/torch/_dynamo/testing.py", line 3, in rand_strided\n    c()\n'
              "torch._inductor.exc.InductorError: AcceleratorError: CUDA error: no driver\nsome note\n")
    assert failure_line(stderr) == ("torch._inductor.exc.InductorError: AcceleratorError: CUDA error: no driver "
                                    "(in select_algorithm.py benchmark > testing.py rand_strided)")
    assert failure_line("just a line\n") == "just a line"


def test_a_gemm_choice_leg_never_supersedes_a_column():
    column = {"device": "h100-compile-only", "compiler": "xla", "command": "a"}
    leg = {"device": "h100-compile-only", "compiler": "xla", "leg": "xla_gemm", "variants": ["triton_gemm_off"], "command": "b"}
    assert report.merge_runs([column, leg]) == [column, leg]
    assert report.merge_runs([column, leg, dict(column, command="c")]) == [leg, dict(column, command="c")]


def test_a_column_made_again_records_whether_its_kernels_are_the_same(tmp_path):
    row = {"name": "cpp_fused_0", "kind": "cpp", "reads": [[4, "float32"]], "writes": [[4, "bfloat16"]], "read": 16.0,
           "written": 8.0}
    record = {"compiler": "inductor", "device": "cpu", "part": "qkv", "mode": "fwd", "layout": "merged",
              "shape": {"name": "tiny"}, "kernels": 1, "gemm_kernels": 0, "kernel_table": [row]}

    def results(folder, torch, rows):
        path = tmp_path / folder / "results.json"
        path.parent.mkdir()
        run = {"device": "cpu", "compilers": ["inductor"], "environment": {"versions": {"torch": torch}}}
        path.write_text(json.dumps({"runs": [run], "records": [{**record, "kernel_table": rows}]}))
        return path.parent

    old = results("old", "2.13.0+cpu", [row])
    same = load_results([old, results("same", "2.14.1", [{**row, "read": 1.0}])])  # byte totals are not the kernel
    assert same["runs"] == [{**same["runs"][0], "kernels_as_before": {"versions": {"torch": "2.13.0+cpu"}, "programs": 1,
                                                                      "same": 1}}]
    other = load_results([old, results("other", "2.14.1", [{**row, "name": "cpp_fused_1"}])])
    assert other["runs"][0]["kernels_as_before"]["same"] == 0


def test_an_ablation_equal_to_an_earlier_one_keeps_no_text_of_its_own():
    base = {"compiler": "xla", "device": "d", "part": "qkv", "mode": "fwd", "layout": "merged", "shape": {"name": "s"},
            "variant": "default", "kernel_table": [{"name": "a"}]}
    first = {**base, "variant": "triton_gemm_off", "kernel_table": [{"name": "b"}]}
    second = {**first, "variant": "triton_gemm_off_cublaslt_off"}
    records = [base, first, second]
    assert not unchanged_ablation(records, first) and unchanged_ablation(records, second)


def test_a_curated_text_is_kept_over_a_newer_run_of_the_same_name(tmp_path):
    """A leg made again (another torch) writes its output code under the same run path as the
    curated record names: curating the curated set again keeps the curated text."""
    from jaxgpt_tools.fusion.artifacts import curate

    source = tmp_path / "runs" / "output_code.py"
    source.parent.mkdir()
    source.write_text("# another run's program\n")
    curated = tmp_path / "curated"
    name = "inductor_cpu/qkv_fwd_merged_s.inference.output_code.py"
    (curated / name).parent.mkdir(parents=True)
    (curated / name).write_text("# the curated program\n")
    record = {"compiler": "inductor", "device": "cpu", "part": "qkv", "mode": "fwd", "layout": "merged",
              "shape": {"name": "s", "seq_len": 8}, "graphs": [{"graph": "inference", "output_code": str(source)}],
              "files": [name], "files_from": str(curated)}
    dest = tmp_path / "dest"
    curate({"records": [record]}, dest, "cmd")
    assert (dest / name).read_text() == "# the curated program\n"
    fresh = {**record, "files": []}
    fresh.pop("files_from", None)
    curate({"records": [fresh]}, dest, "cmd")  # a run's own record: its run's text
    assert (dest / name).read_text() == "# another run's program\n"
