"""The fusion study's H100 legs, compiled without a GPU, no autotuning: each a child process
(`fusion.child.run_leg` through `common.child`) of the venv that can compile it, or a skip with
the reason where that venv is absent.

  XLA:      the jax CUDA plugin's venv (`make gpu-aot`, .venv-gpu-aot): the programs at
            `shapes`, the separate QKV path with the dot merger's threshold at 256 MiB, the
            dot-merger sweep over T and over D and head dims (fusion_sweep), and the DebugOptions
            XLA compiled with, read from its dump;
  Inductor: the CUDA-torch venv (`make torch-cuda`, .venv-torch-cuda): the QKV path at `shapes`
            and Inductor's own merge passes (INDUCTOR_GPU_ABLATIONS).
"""

from __future__ import annotations

import json
import os
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


def shown(path: str) -> str:
    return os.path.relpath(path, REPO_ROOT) if Path(path).is_relative_to(REPO_ROOT) else repo_relative_paths(path)


def run_child(python: str, leg: str, out: Path, *, kwargs: dict[str, Any], timeout_s: float,
              log: Callable[[str], None], needs: str) -> dict[str, Any]:
    """{"records": the leg's JSON list} or {"skipped": why}: `fusion.child.run_leg(leg, out,
    **kwargs)` run by `python` through common.child; its progress lines passed to `log`; `needs`
    says what builds the venv."""
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
        return {"skipped": f"{leg} compiles did not finish within {timeout_s:.0f} s"}
    except child.ChildFailed as failed:
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
