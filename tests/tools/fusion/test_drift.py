"""The committed fusion study (artifacts/fusion/results.json) against the code at HEAD: the small
shape's QKV path, forward, merged and separate, compiled by XLA and by Inductor on this CPU
(seconds), must launch the kernels the committed study holds (names, kinds, fused ops, operand
types, bytes). A model or compiler change that moves the fusions fails here until `make fusion`
regenerates the study; with other compiler versions than the committed run's (or than an earlier
run's that the study recorded as giving the same kernels) it is skipped."""

from __future__ import annotations

import importlib.metadata as metadata

import pytest

from jaxgpt_tools.fusion import byte_model
from jaxgpt_tools.fusion.records import find
from jaxgpt_tools.fusion.report import REPO_ROOT, load_results
from jaxgpt_tools.fusion.xla import SHAPES

ARTIFACTS = REPO_ROOT / "artifacts" / "fusion"
PACKAGES = {"xla": ("jax", "jaxlib"), "inductor": ("torch",)}


@pytest.fixture(scope="module")
def committed():
    return load_results([ARTIFACTS / "results.json"])


def cpu_versions(study, compiler: str) -> list[dict[str, str]]:
    """The versions of `compiler`'s packages its CPU column was made with, and those an earlier run
    made it with that gave the same kernels in every program (the run's `kernels_as_before`)."""
    run = next(run for run in reversed(study["runs"]) if run["device"] == "cpu" and "environment" in run
               and compiler in run.get("compilers", ["xla", "inductor"]))
    made = [{p: run["environment"]["versions"].get(p) for p in PACKAGES[compiler]}]
    before = run.get("kernels_as_before") or {}
    if before.get("programs") and before["same"] == before["programs"]:
        made.append({p: before["versions"].get(p) for p in PACKAGES[compiler]})
    return made


def comparable(record: dict) -> list[dict]:
    """The record's kernel table under the one byte model (a fresh record carries its compiler's own count)."""
    return [{k: v for k, v in row.items() if k != "graph"} for row in byte_model.apply_to_record(record)["kernel_table"]]


@pytest.mark.parametrize("compiler", ["xla", "inductor"])
def test_small_shape_compiles_to_the_committed_kernels(compiler, committed, tmp_path):
    installed = {}
    for package in PACKAGES[compiler]:
        try:
            installed[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pytest.skip(f"{package} is not installed here")
    recorded = cpu_versions(committed, compiler)
    if installed not in recorded:
        pytest.skip(f"the committed study was made with {' or '.join(map(str, recorded))}, this environment has {installed}")
    if compiler == "xla":
        from jaxgpt_tools.fusion.xla import compile_program

        compile_one = lambda layout: compile_program("qkv", "fwd", layout, SHAPES["small"], device=None,  # noqa: E731
                                                     out_dir=tmp_path)
    else:
        from jaxgpt_tools.fusion.inductor import compile_program

        compile_one = lambda layout: compile_program("qkv", "fwd", layout, SHAPES["small"], out_dir=tmp_path)  # noqa: E731
    for layout in ("merged", "separate"):
        record = find(committed["records"], compiler=compiler, device="cpu", part="qkv", mode="fwd", layout=layout,
                      shape="small")
        assert record is not None, f"the committed study has no {compiler} small {layout} forward: run make fusion"
        now = compile_one(layout).record
        assert comparable(now) == comparable(record), (
            f"{compiler} {layout}: the kernels differ from the committed study's: regenerate it with make fusion")
        assert (now["kernels"], now["gemm_kernels"]) == (record["kernels"], record["gemm_kernels"])
