"""The committed fusion study's H100 legs and sweeps (artifacts/fusion/results.json) against the code
at HEAD, compiled again without a GPU in the legs' own venvs: XLA's and Inductor's small-shape QKV
forward must launch the committed kernels (names, kinds, bytes under the one byte model), and
XLA's dot-merger sweep at one T and its width sweep at one width must take the committed decisions
with the committed bytes. Skipped, with the reason, where a leg's venv is absent (`make gpu-aot`,
`make torch-cuda`) or holds other compiler versions than the committed run's."""

from __future__ import annotations

import pytest

from jaxgpt_tools.fusion import byte_model
from jaxgpt_tools.fusion import compile_only as fusion_compile_only
from jaxgpt_tools.fusion.records import find
from jaxgpt_tools.fusion.report import REPO_ROOT, load_results

ARTIFACTS = REPO_ROOT / "artifacts" / "fusion"
VENVS = {"xla": REPO_ROOT / ".venv-gpu-aot" / "bin" / "python", "inductor": REPO_ROOT / ".venv-torch-cuda" / "bin" / "python"}
PACKAGES = {"xla": ("jax", "jaxlib", "jax-cuda13-plugin"), "inductor": ("torch", "triton")}


@pytest.fixture(scope="module")
def committed():
    return load_results([ARTIFACTS / "results.json"])


def leg_python(committed, compiler: str) -> str:
    """The leg's venv python, or a skip saying why it cannot recompile the committed run."""
    python = VENVS[compiler]
    if not python.exists():
        pytest.skip(f"no venv at {python.relative_to(REPO_ROOT)}: the {compiler} H100 leg is not compiled here")
    recorded = next((run["environment"]["versions"] for run in committed["runs"]
                     if run["device"] == "h100-compile-only" and run.get("compiler") == compiler and run.get("environment")),
                    None)
    if recorded is None:
        pytest.skip(f"the committed study has no {compiler} H100 run")
    installed = fusion_compile_only.versions(str(python), PACKAGES[compiler])
    wanted = {p: recorded.get(p) for p in PACKAGES[compiler] if p in recorded}
    if {p: installed.get(p) for p in wanted} != wanted:
        pytest.skip(f"the committed study was made with {wanted}, the venv has {installed}")
    return str(python)


def comparable(record: dict) -> list[dict]:
    """A record's kernel table under the one byte model, without the graph names."""
    return [{k: v for k, v in row.items() if k != "graph"} for row in byte_model.apply_to_record(record)["kernel_table"]]


@pytest.mark.slow  # ~30 s a compiler: the small shape's QKV forward, both layouts, in the leg's venv
@pytest.mark.parametrize("compiler", ["xla", "inductor"])
def test_h100_small_shape_compiles_to_the_committed_kernels(compiler, committed, tmp_path):
    python = leg_python(committed, compiler)
    kwargs = {"shapes": ["small"], "parts": ["qkv"], "modes": ["fwd"]}
    done = fusion_compile_only.run_child(python, compiler, tmp_path, kwargs=kwargs, timeout_s=600, log=print, needs="-")
    assert "records" in done, done
    for now in done["records"]:
        record = find(committed["records"], compiler=compiler, device="h100-compile-only", part="qkv", mode="fwd",
                      layout=now["layout"], shape="small")
        assert record is not None, f"the committed study has no {compiler} H100 small {now['layout']} forward"
        assert comparable(now) == comparable(record), f"{compiler} H100 {now['layout']}: regenerate with make fusion"
        assert (now["kernels"], now["gemm_kernels"]) == (record["kernels"], record["gemm_kernels"])


@pytest.mark.slow  # ~40 s: the dot-merger sweep's forwards at one T and the width sweep's at one width
def test_sweeps_take_the_committed_decisions(committed, tmp_path):
    python = leg_python(committed, "xla")
    seq_len = 16384
    done = fusion_compile_only.run_child(python, "sweep", tmp_path / "sweep", kwargs={"seq_lens": [seq_len], "modes": ["fwd"]},
                                         timeout_s=600, log=print, needs="-")
    assert "records" in done, done
    keys = ("T", "mode", "layout", "threshold_mb")
    stored = {tuple(r[k] for k in keys): r for r in committed["sweep"]}
    assert done["records"]
    for now in done["records"]:
        was = stored[tuple(now[k] for k in keys)]
        assert (now["gemm_kernels"], now["kernels"], now["kernel_traffic_bytes"]) == (
            was["gemm_kernels"], was["kernels"], was["kernel_traffic_bytes"]), now
    if not committed.get("width_sweep"):
        pytest.skip("the committed study has no width sweep")
    from jaxgpt_tools.fusion import sweep as fusion_sweep

    widths = fusion_compile_only.run_child(python, "width_sweep", tmp_path / "widths", timeout_s=600, log=print, needs="-",
                                           kwargs={"widths": [1024], "head_dims": [128]})
    assert "records" in widths, widths
    keys = ("D", "head_dim", "T", "mode", "layout")
    stored = {tuple(r[k] for k in keys): r for r in committed["width_sweep"]}
    assert widths["records"] and {tuple(r[k] for k in keys) for r in widths["records"]} <= set(stored)
    for now in widths["records"]:
        was = stored[tuple(now[k] for k in keys)]
        assert (now["gemm_kernels"], now["kernel_traffic_bytes"]) == (was["gemm_kernels"], was["kernel_traffic_bytes"]), now
    same_width = [r for r in committed["width_sweep"] if (r["D"], r["head_dim"]) == (1024, 128)]
    assert fusion_sweep.width_decisions(widths["records"], 64) == fusion_sweep.width_decisions(same_width, 64)
