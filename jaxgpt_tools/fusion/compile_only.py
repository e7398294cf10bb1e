"""The fusion study's H100 legs, compiled without a GPU, no autotuning: each a child process
(`fusion.child.run_leg` through `common.child`) of the venv that can compile it, or a skip with
the reason where that venv is absent.

  XLA:      the jax CUDA plugin's venv (`make gpu-aot`, .venv-gpu-aot): the programs at
            `shapes`, the separate QKV path with the dot merger's threshold at 256 MiB, the
            dot-merger sweep over T and over D and head dims (fusion_sweep), and the DebugOptions
            XLA compiled with, read from its dump;
  Inductor: the CUDA-torch venv (`make torch-cuda`, .venv-torch-cuda): the QKV path at `shapes`
            and Inductor's own merge passes (INDUCTOR_GPU_ABLATIONS).

Two legs bound what compiling without a GPU cannot see, the GEMM choices an H100 makes by timing
candidates: `xla_gemm_leg` compiles XLA's QKV path with its Triton GEMMs off (XLA_GEMM_CHOICES:
every GEMM a cuBLAS call, the other extreme of what XLA's autotuner picks from), and
`inductor_max_autotune_leg` tries Inductor's `max_autotune`, recording why it cannot compile
without a GPU where it cannot (its measured error, `failure_line`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jaxgpt_tools.common import child
from jaxgpt_tools.common.artifacts import REPO_ROOT, repo_relative_paths

DOT_MERGER_FLAG = "xla_gpu_dot_merger_threshold_mb"
XLA_ABLATIONS = {"dot_merger_256": {DOT_MERGER_FLAG: 256}}
# Inductor's batch_linear_lhs pre-grad pass (off by default: pre_grad_fusion_options is empty)
# concatenates linears that share an input, in groups of at least min_fuse_set_size (5 by
# default: the QKV path has 3), and only for a 2-D input (group_batch_fusion.py,
# is_linear_node_can_be_fused): tried on the path as it is, (1, T, D), and flattened to (T, D).
BATCH_LINEAR = {"pre_grad_fusion_options": {"batch_linear_lhs": {"min_fuse_set_size": 3}}}
# variant: (Inductor config, flattened input, modes)
INDUCTOR_GPU_ABLATIONS: dict[str, tuple[dict[str, Any], bool, tuple[str, ...]]] = {
    "batch_linear_lhs": (BATCH_LINEAR, False, ("fwd", "fwdbwd")),
    "batch_linear_lhs_2d": (BATCH_LINEAR, True, ("fwd", "fwdbwd"))}
# On the CPU also the concat-linear pattern of freezing (inference only): it folds the frozen
# weights' concatenation, i.e. runs on the parameters' values, which a compile-only H100 does not
# have: on the H100 it needs a GPU.
INDUCTOR_CPU_ABLATIONS: dict[str, tuple[dict[str, Any], bool, tuple[str, ...]]] = {**INDUCTOR_GPU_ABLATIONS,
                          "freezing_concat_linear": ({"freezing": True, "cpp.enable_concat_linear": True}, False, ("fwd",))}
FREEZING_ON_GPU = "freezing constant-folds the weights' values on the device: needs a GPU"
# XLA's GEMM backends: Triton GEMM fusions (the default, with XLA's default tiles when nothing is
# autotuned) or, with Triton GEMMs off, library calls. Whether cuBLASLt needs its own flag is
# measured by the second variant (its programs equal the first's where the flag changes nothing).
TRITON_GEMM_FLAG = "xla_gpu_enable_triton_gemm"
CUBLASLT_FLAG = "xla_gpu_enable_cublaslt"
XLA_GEMM_CHOICES: dict[str, dict[str, Any]] = {
    "triton_gemm_off": {TRITON_GEMM_FLAG: False},
    "triton_gemm_off_cublaslt_off": {TRITON_GEMM_FLAG: False, CUBLASLT_FLAG: False}}
# Inductor's autotuned GEMM templates, tried without a GPU on the smallest shape's merged forward.
MAX_AUTOTUNE = {"max_autotune": True}
MAX_AUTOTUNE_VARIANT = "max_autotune"
# The variants the GEMM-choice legs make: not merge ablations (their own section of the page).
GEMM_CHOICE_VARIANTS = frozenset({*XLA_GEMM_CHOICES, MAX_AUTOTUNE_VARIANT})


def shown(path: str) -> str:
    return os.path.relpath(path, REPO_ROOT) if Path(path).is_relative_to(REPO_ROOT) else repo_relative_paths(path)


def run_child(python: str, leg: str, out: Path, *, kwargs: dict[str, Any], timeout_s: float,
              log: Callable[[str], None], needs: str, failure_of: str | None = None) -> dict[str, Any]:
    """{"records": the leg's JSON list} or {"skipped": why}: `fusion.child.run_leg(leg, out,
    **kwargs)` run by `python` through common.child; its progress lines passed to `log`; `needs`
    says what builds the venv. With `failure_of` (a variant's name), a child that fails or times
    out is a result, not a skip: {"records": [], "not_compiled": {failure_of: its one line}}."""
    if not Path(python).exists():
        return {"skipped": f"no venv at {shown(python)} ({needs})"}
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("XLA_FLAGS", None)  # the CPU device count of a test harness means nothing there

    def progress(line: str) -> None:
        if line.startswith(("xla ", "inductor ", "sweep ")):
            log(line)

    try:
        records = child.call("jaxgpt_tools.fusion.child:run_leg", {"leg": leg, "out": str(out), **kwargs},
                             python=python, env=env, timeout_s=timeout_s, on_stderr_line=progress)
    except subprocess.TimeoutExpired:
        if failure_of:
            return {"records": [], "not_compiled": {failure_of: f"did not finish within {timeout_s:.0f} s"}}
        return {"skipped": f"{leg} compiles did not finish within {timeout_s:.0f} s"}
    except child.ChildFailed as failed:
        if failure_of:
            return {"records": [], "not_compiled": {failure_of: repo_relative_paths(failure_line(failed.stderr))}}
        return {"skipped": f"{leg} child failed (rc {failed.returncode}): {repo_relative_paths(failed.stderr[-800:])}"}
    return {"records": records}


def versions(python: str, packages: tuple[str, ...]) -> dict[str, str]:
    """The versions of `packages` installed in another venv (those it has)."""
    code = (f"import importlib.metadata as m, json; out = {{}}\nfor p in {packages!r}:\n try: out[p] = m.version(p)\n"
            " except m.PackageNotFoundError: pass\nprint(json.dumps(out))")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def xla_leg(python: str, shapes: list[str], parts: list[str], modes: list[str], out: Path, *, sweep: bool,
            log: Callable[[str], None], timeout_s: float = 3600) -> dict[str, Any]:
    """XLA's H100 programs, its dot-merger ablation at the last shape and (with `sweep`) the
    sweep: {"records", "sweep", "versions"} or {"skipped"}."""
    needs = "jax[cuda13] with the CUDA plugin; make gpu-aot builds it"
    done = run_child(python, "xla", out / "xla", kwargs={"shapes": shapes, "parts": parts, "modes": modes},
                     timeout_s=timeout_s, log=log, needs=needs)
    if "skipped" in done:
        return done
    records = done["records"]
    for variant, options in XLA_ABLATIONS.items():
        ablated = run_child(python, "xla", out / "xla", log=log, needs=needs, timeout_s=timeout_s,
                            kwargs={"shapes": [shapes[-1]], "parts": ["qkv"], "modes": modes, "variant": variant,
                                    "options": options})
        records += ablated.get("records", [])
    swept: dict[str, Any] = {}
    widths: dict[str, Any] = {}
    dumped: dict[str, Any] = {}
    if sweep:
        swept = run_child(python, "sweep", out / "sweep", kwargs={}, timeout_s=timeout_s, log=log, needs=needs)
        widths = run_child(python, "width_sweep", out / "width_sweep", kwargs={}, timeout_s=timeout_s, log=log, needs=needs)
        dumped = run_child(python, "debug_options", out / "debug_options", kwargs={}, timeout_s=timeout_s, log=log,
                           needs=needs)
    return {"records": records, "sweep": swept.get("records", []), "sweep_skipped": swept.get("skipped"),
            "width_sweep": widths.get("records", []), "width_sweep_skipped": widths.get("skipped"),
            "debug_options": (dumped.get("records") or [{}])[0], "debug_options_skipped": dumped.get("skipped"),
            "versions": versions(python, ("jax", "jaxlib", "jax-cuda13-plugin", "flax", "numpy"))}


def inductor_leg(python: str, shapes: list[str], modes: list[str], out: Path, *, ablation: bool,
                 log: Callable[[str], None], timeout_s: float = 3600) -> dict[str, Any]:
    """Inductor's H100 output code of the QKV path at `shapes` and (with `ablation`) its merge
    passes at the last shape: {"records", "versions"} or {"skipped"}."""
    needs = "a CUDA build of torch with triton; make torch-cuda builds it"
    done = run_child(python, "inductor", out / "inductor", log=log, needs=needs, timeout_s=timeout_s,
                     kwargs={"shapes": shapes, "parts": ["qkv"], "modes": modes})
    if "skipped" in done:
        return done
    records = done["records"]
    for variant, (options, flat, variant_modes) in (INDUCTOR_GPU_ABLATIONS.items() if ablation else ()):
        ablated = run_child(python, "inductor", out / "inductor", log=log, needs=needs, timeout_s=timeout_s,
                            kwargs={"shapes": [shapes[-1]], "parts": ["qkv"], "layouts": ["separate"], "variant": variant,
                                    "modes": [m for m in variant_modes if m in modes], "options": options, "flat": flat})
        records += ablated.get("records", [])
    return {"records": records, "versions": versions(python, ("torch", "triton", "numpy"))}


def failure_line(stderr: str, frames: int = 5) -> str:
    """One line of a child's failure: its last exception line and the innermost `frames` named
    frames of its traceback (file name and function; comprehensions and lambdas left out), e.g.
    "InductorError: ... (in select_algorithm.py get_inputs > ... > testing.py rand_strided)"."""
    lines = stderr.strip().splitlines()
    errors = [i for i, line in enumerate(lines) if re.match(r"^[\w.]+(Error|Exception)\b.*", line)]
    if not errors:
        return lines[-1].strip() if lines else "no stderr"
    last = errors[-1]
    found = [re.search(r'File "([^"]+)", line \d+, in (\S+)', line) for line in lines[:last]]
    chain = [f"{Path(m.group(1)).name} {m.group(2)}" for m in found if m and not m.group(2).startswith("<")][-frames:]
    return lines[last].strip() + (f" (in {' > '.join(chain)})" if chain else "")


def xla_gemm_leg(python: str, shape: str, modes: list[str], out: Path, *, log: Callable[[str], None],
                 timeout_s: float = 3600) -> dict[str, Any]:
    """XLA's QKV path at `shape`, both layouts, under each of XLA_GEMM_CHOICES: {"records",
    "versions", "variants"} or {"skipped"}."""
    needs = "jax[cuda13] with the CUDA plugin; make gpu-aot builds it"
    records: list[dict[str, Any]] = []
    for variant, options in XLA_GEMM_CHOICES.items():
        done = run_child(python, "xla", out / "xla", log=log, needs=needs, timeout_s=timeout_s,
                         kwargs={"shapes": [shape], "parts": ["qkv"], "modes": modes, "variant": variant, "options": options})
        if "skipped" in done:
            return done
        records += done["records"]
    return {"records": records, "variants": list(XLA_GEMM_CHOICES),
            "versions": versions(python, ("jax", "jaxlib", "jax-cuda13-plugin", "flax", "numpy"))}


def inductor_max_autotune_leg(python: str, shape: str, out: Path, *, log: Callable[[str], None],
                              timeout_s: float = 3600) -> dict[str, Any]:
    """Inductor's QKV forward, merged, at `shape` with MAX_AUTOTUNE: {"records", "versions",
    "variants"} where it compiles, else {"records": [], "not_compiled": {variant: failure_line},
    ...}; {"skipped"} without the venv."""
    kwargs = {"shapes": [shape], "parts": ["qkv"], "modes": ["fwd"], "layouts": ["merged"], "variant": MAX_AUTOTUNE_VARIANT,
              "options": MAX_AUTOTUNE}
    done = run_child(python, "inductor", out / "inductor", kwargs=kwargs, timeout_s=timeout_s, log=log,
                     needs="a CUDA build of torch with triton; make torch-cuda builds it", failure_of=MAX_AUTOTUNE_VARIANT)
    if "skipped" in done:
        return done
    return {"variants": [MAX_AUTOTUNE_VARIANT], "versions": versions(python, ("torch", "triton", "numpy")), **done}
