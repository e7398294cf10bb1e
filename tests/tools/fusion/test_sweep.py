"""jaxgpt_tools.fusion.sweep (XLA's dot-merger sweep) and fusion_compile_only (the H100 legs'
child processes): the dot sizes read from HLO, the pass's rule fitted and applied to records,
and the legs' skips where their venvs are absent. The H100 legs themselves run in `make fusion`;
test_inductor_h100_leg runs the Inductor one where `make torch-cuda`'s venv exists."""

from __future__ import annotations

import json
import sys

import pytest

from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.fusion import compile_only as fusion_compile_only
from jaxgpt_tools.fusion import sweep as fusion_sweep

HLO = """HloModule m

ENTRY %main (p0: bf16[256,128], p1: bf16[128,128]) -> bf16[256,128] {
  %p0 = bf16[256,128]{1,0} parameter(0)
  %p1 = bf16[128,128]{1,0} parameter(1)
  ROOT %dot.1 = bf16[256,128]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_dot_sizes_are_result_plus_operands():
    (dot,) = fusion_sweep.dot_sizes(HLO)
    assert dot["result"] == "bf16[256,128]" and dot["operands"] == ["bf16[256,128]", "bf16[128,128]"]
    assert dot["bytes"] == 2 * (256 * 128 * 2 + 128 * 128)


def record(seq_len, threshold, gemms, dims=None, mode="fwd", layout="separate"):
    dot_bytes = 3072 * seq_len + 1_179_648
    dots = [{"result": dims or f"bf16[768,{seq_len}]", "bytes": dot_bytes}] * 3
    return {"T": seq_len, "D": 768, "mode": mode, "layout": layout, "threshold_mb": threshold, "gemm_kernels": gemms,
            "dots": dots}


def test_the_rule_is_fitted_and_predicts_the_switch():
    sweep = [record(t, 0, 3) for t in (8192, 16384, 32768)] + [record(t, None, g) for t, g in ((8192, 1), (16384, 1), (32768, 3))]
    fit = fusion_sweep.dot_bytes_fit(sweep)
    assert (fit["bytes_per_token"], fit["fixed_bytes"], fit["on_line"]) == (3072, 1_179_648, True)
    assert fusion_sweep.predicted_gemms(fit, 10496, 32) == 1 and fusion_sweep.predicted_gemms(fit, 10624, 32) == 3
    point = fusion_sweep.switch_point(sweep, None)
    assert (point["last_merged"], point["first_unmerged"]) == (16384, 32768)
    # 16,384 tokens weigh 51.5 MB and 32,768 101.8 MB: every whole MiB between could be the default.
    assert fusion_sweep.default_threshold(sweep) == list(range(50, 98))
    assert fusion_sweep.switch_point(sweep + [record(8192, 32, 1)], 32)["crossing_T"] == pytest.approx(10538.7, abs=0.1)


def test_the_fit_refuses_too_few_unmerged_programs():
    with pytest.raises(ValueError, match="two T at least"):
        fusion_sweep.dot_bytes_fit([record(256, 0, 3)])


def test_a_missing_venv_is_a_skip_with_its_reason(tmp_path):
    for leg, run in (("xla", lambda: fusion_compile_only.xla_leg(str(tmp_path / "none"), ["small"], ["qkv"], ["fwd"], tmp_path,
                                                                   sweep=True, log=print)),
                     ("inductor", lambda: fusion_compile_only.inductor_leg(str(tmp_path / "none"), ["small"], ["fwd"], tmp_path,
                                                                          ablation=True, log=print))):
        done = run()
        assert set(done) == {"skipped"} and "make " in done["skipped"], (leg, done)


def test_a_leg_whose_child_fails_is_a_skip_with_its_exit_status_and_error(tmp_path):
    # The leg's child runs fusion.child.run_leg through common.child; an unknown shape fails it at once.
    logged: list[str] = []
    done = fusion_compile_only.run_child(sys.executable, "sweep", tmp_path, kwargs={"shapes": ["no_such_shape"]},
                                         timeout_s=120, log=logged.append, needs="-")
    assert set(done) == {"skipped"} and done["skipped"].startswith("sweep child failed (rc 1): "), done
    assert "no_such_shape" in done["skipped"] and not logged
    # A variant's leg (Inductor's max_autotune) keeps such a failure as its result: the variant not compiled, and why.
    done = fusion_compile_only.run_child(sys.executable, "sweep", tmp_path, kwargs={"shapes": ["no_such_shape"]},
                                         timeout_s=120, log=logged.append, needs="-", failure_of="max_autotune")
    assert done["records"] == [] and set(done["not_compiled"]) == {"max_autotune"}, done
    assert "no_such_shape" in done["not_compiled"]["max_autotune"] and "\n" not in done["not_compiled"]["max_autotune"]


def test_fake_cuda_refuses_a_cpu_torch():
    torch = pytest.importorskip("torch")
    from jaxgpt_tools.fusion import fake_cuda as fusion_fake_cuda

    assert fusion_fake_cuda.torch_cuda_version() == torch.version.cuda  # read without importing torch
    if torch.version.cuda is not None:
        pytest.skip("this torch has CUDA support")
    with pytest.raises(ValueError, match="no CUDA support"):
        fusion_fake_cuda.install()


def test_child_options_are_json_values():
    from jaxgpt_tools.fusion.child import option

    assert option("xla_gpu_dot_merger_threshold_mb=256") == ("xla_gpu_dot_merger_threshold_mb", 256)
    assert option('pre_grad_fusion_options={"batch_linear_lhs": {"min_fuse_set_size": 3}}')[1] == {
        "batch_linear_lhs": {"min_fuse_set_size": 3}}


TORCH_CUDA = REPO_ROOT / ".venv-torch-cuda" / "bin" / "python"


@pytest.mark.slow  # ~40 s: one Inductor compile per program for the compile-only H100
def test_inductor_h100_leg(tmp_path):
    if not TORCH_CUDA.exists():
        pytest.skip("no CUDA-torch venv (make torch-cuda builds it): Inductor's H100 leg is not compiled here")
    done = fusion_compile_only.inductor_leg(str(TORCH_CUDA), ["tiny"], ["fwd"], tmp_path, ablation=False, log=print)
    assert "records" in done, done
    merged, separate = sorted(done["records"], key=lambda r: r["layout"])
    assert merged["device"] == "h100-compile-only" and merged["compile_config"]["max_autotune"] is False
    # cuBLAS GEMMs (extern mm): one merged, three separate; Triton kernels around them
    assert (merged["gemm_kernels"], separate["gemm_kernels"]) == (1, 3)
    assert all(k["kind"] == "extern" for r in (merged, separate) for k in r["kernel_table"] if k["gemm"])
    assert any(k["name"].startswith("triton_") for k in merged["kernel_table"])
    assert json.dumps(done["versions"]).count("torch") == 1
