"""The fusion study: how XLA and TorchInductor compile the record's merged-QKV path, and what
merging buys (the library of `scripts/fusion_report.py`, which says how to run it).

Both frameworks, both qkv layouts, the QKV path alone and one block, forward and forward +
backward (fusion_xla.py, fusion_inductor.py), on this machine (CPU, or a CUDA GPU with
`device="cuda"`) and, for XLA, on a compile-only H100 with an ablation of the dot merger's
threshold. Full artifacts (optimized HLO, Inductor's debug traces, results.json) go to
OUT/<device>/; `write_docs` curates the QKV programs and the results into artifacts/fusion/
(fusion_artifacts.py) and writes docs/FUSION.md with its plot (fusion_docs.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from jaxgpt_tools.gpu.compile_plan import CAVEAT
from jaxgpt_tools.common.artifacts import REPO_ROOT, repo_relative_paths
from jaxgpt_tools.fusion.xla import COMPILE_ONLY, MODES, PARTS, SHAPES, Timing
from jaxgpt_tools.common.machine import torch_threads

# The ablation: XLA's dot merger merges dots sharing an operand only while one dot's operands and
# result fit in xla_gpu_dot_merger_threshold_mb (default 32); h alone is 96 MiB at T 65,536.
DOT_MERGER_FLAG = "xla_gpu_dot_merger_threshold_mb"
DOT_MERGER_ABLATION_MB = (256,)
# Inductor's pre-grad pass that concatenates linears sharing an input, off by default
# (pre_grad_fusion_options is empty): turned on for the separate layout's ablation.
INDUCTOR_ABLATION = ("batch_linear_lhs", {"pre_grad_fusion_options": {"batch_linear_lhs": {}}})


def log(message: str) -> None:
    print(f"[fusion] {message}", file=sys.stderr, flush=True)


def allowed_cores(threads: int) -> list[int]:
    """The first `threads` cores this process may use; ValueError when it may use fewer."""
    cores = sorted(os.sched_getaffinity(0))[:threads]
    if len(cores) < threads:
        raise ValueError(f"--threads {threads} but this process may use only {len(cores)} cores")
    return cores


def pin_threads(threads: int) -> list[int]:
    """Pin this process to its first `threads` allowed cores, before jax or torch start their
    pools: XLA:CPU sizes its thread pool by the cores it may use, torch is set to `threads`, so
    both compilers' programs run on the same cores. Returns the cores."""
    cores = allowed_cores(threads)
    os.sched_setaffinity(0, cores)
    return cores


@contextlib.contextmanager
def study_threads(threads: int, *, torch_too: bool) -> Iterator[list[int]]:
    """This process on `threads` cores (`pin_threads`) and, with `torch_too`, torch's intra-op
    threads set to as many, while the study runs; yields the cores. The caller's cores and torch
    threads come back afterwards (a test session that runs the study in-process keeps its own)."""
    previous_cores = os.sched_getaffinity(0)
    try:
        cores = pin_threads(threads)
        with torch_threads(threads) if torch_too else contextlib.nullcontext():
            yield cores
    finally:
        os.sched_setaffinity(0, previous_cores)


def unknown_names(shapes: list[str], compilers: list[str], parts: list[str], modes: list[str]) -> list[str]:
    """The names among these that the study does not know (empty when all are known)."""
    known = [(shapes, SHAPES), (compilers, ("xla", "inductor")), (parts, PARTS), (modes, MODES)]
    return [name for names, allowed in known for name in names if name not in allowed]


def check_request(shapes: list[str], compilers: list[str], parts: list[str], modes: list[str], threads: int) -> None:
    """ValueError naming what the study cannot do: unknown names, or more threads than cores."""
    unknown = unknown_names(shapes, compilers, parts, modes)
    if unknown:
        raise ValueError(f"unknown shape, compiler, part or mode: {', '.join(unknown)}")
    allowed_cores(threads)


def git_commit() -> str:
    """The checkout's commit, `+dirty` when tracked files differ from it ('unknown' outside git)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                               cwd=REPO_ROOT, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def environment() -> dict[str, Any]:
    """jaxgpt_tools.common.machine.describe (host, CPU, load, date, jax's devices, torch and its GPU)
    with the versions of every package that compiled the programs, the commit, and the cores
    this process may use."""
    import importlib.metadata as metadata

    from jaxgpt_tools.common.machine import describe

    versions = {}
    for package in ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "flax", "torch", "triton", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return {**describe(), "versions": versions, "commit": git_commit(), "cores_used": len(os.sched_getaffinity(0))}


def run_local(device: str, shapes: list[str], compilers: list[str], out: Path, timing: Timing | None,
              parts=PARTS, modes=MODES, profile_shapes: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Both compilers on this machine ("cpu", or "cuda": jax's GPU and torch's CUDA device),
    timed; the programs at `profile_shapes` also profiled per kernel."""
    records = []
    profile_dir = out / "profiles"
    for compiler in compilers:
        for name in shapes:
            profile = profile_dir if name in profile_shapes else None
            if compiler == "xla":
                from jaxgpt_tools.fusion import xla as fusion_xla

                records += fusion_xla.run([SHAPES[name]], device=None, out_dir=out / "xla", timing=timing, log=log,
                                          parts=parts, modes=modes, profile_dir=profile)
            else:
                from jaxgpt_tools.fusion import inductor as fusion_inductor

                records += fusion_inductor.run([SHAPES[name]], out_dir=out / "inductor", timing=timing, log=log,
                                               parts=parts, modes=modes, device=device, profile_dir=profile)
    return records


def run_gpu_aot(gpu_python: str, shapes: list[str], out: Path, timeout_s: float, parts=PARTS, modes=MODES,
                options: dict[str, Any] | None = None, variant: str = "default") -> dict[str, Any]:
    """XLA for an H100 through the compile-only devices, in a child process of the GPU venv."""
    if not Path(gpu_python).exists():
        shown = os.path.relpath(gpu_python, REPO_ROOT) if Path(gpu_python).is_relative_to(REPO_ROOT) else repo_relative_paths(gpu_python)
        return {"skipped": f"no GPU compile-only venv at {shown} (jax[cuda13] with the CUDA plugin; make gpu-plan builds it)"}
    command = [gpu_python, str(REPO_ROOT / "scripts" / "fusion_xla.py"), "--device", "h100", "--shapes", ",".join(shapes),
               "--parts", ",".join(parts), "--modes", ",".join(modes), "--out", str(out / "xla"), "--variant", variant]
    command += [arg for key, value in (options or {}).items() for arg in ("--xla-option", f"{key}={value}")]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "JAX_PLATFORMS": "cpu", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1"}
    env.pop("XLA_FLAGS", None)  # the CPU device count of the test harness means nothing there
    log(f"xla h100 (compile only, {variant}): {', '.join(shapes)}")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=REPO_ROOT, env=env)
    except subprocess.TimeoutExpired:
        return {"skipped": f"H100 compiles did not finish within {timeout_s:.0f} s"}
    for line in done.stderr.splitlines():
        if line.startswith("xla "):
            log(line)
    if done.returncode != 0:
        return {"skipped": f"child failed (rc {done.returncode}): {repo_relative_paths(done.stderr[-800:])}"}
    versions = subprocess.run([gpu_python, "-c", "import importlib.metadata as m, json; print(json.dumps("
                               "{p: m.version(p) for p in ('jax', 'jaxlib', 'jax-cuda13-plugin', 'flax')}))"],
                              capture_output=True, text=True, cwd=REPO_ROOT)
    return {"records": json.loads(done.stdout.strip().splitlines()[-1]),
            "versions": json.loads(versions.stdout) if versions.returncode == 0 else {}}


def write_results(out: Path, records: list[dict[str, Any]], run: dict[str, Any]) -> Path:
    """OUT/results.json: {"run": how the records were made, "records"}."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps({"run": run, "records": records}, indent=1))
    return path


def load_results(roots: list[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(runs, records) of every results.json under the given folders; a program (compiler,
    device, part, mode, layout, shape, variant) found twice keeps the later root's record."""
    programs: dict[tuple, dict[str, Any]] = {}
    runs = []
    for root in roots:
        paths = [root] if root.is_file() else sorted(root.rglob("results.json"))
        if not paths:
            raise ValueError(f"no results.json under {root}")
        for path in paths:
            result = json.loads(path.read_text())
            for run in result.get("runs", [result["run"]] if "run" in result else []):
                runs.append(run)
            for record in result["records"]:
                if record.get("files"):  # a curated set: its program texts lie beside it
                    record["files_from"] = str(path.parent)
                programs[record_key(record)] = record
    return runs, list(programs.values())


def record_key(record: dict[str, Any]) -> tuple:
    return (record["compiler"], record["device"], record["part"], record["mode"], record["layout"],
            record["shape"]["name"], record.get("variant", "default"))


def write_outputs(runs: list[dict[str, Any]], records: list[dict[str, Any]], *, docs_dir: Path, artifacts_dir: Path,
                  command: str, plot: bool = True) -> Path:
    """artifacts/fusion/ (curated programs, results.json, plot) and docs/FUSION.md."""
    from jaxgpt_tools.fusion import artifacts as fusion_artifacts, docs as fusion_docs

    runs, records = fusion_artifacts.curate(runs, records, artifacts_dir, command)
    if plot:
        fusion_docs.plot(records, artifacts_dir / "fusion.png")
    page = fusion_docs.page(runs, records, command=command, artifacts_dir=artifacts_dir, docs_dir=docs_dir)
    docs_dir.mkdir(parents=True, exist_ok=True)
    path = docs_dir / "FUSION.md"
    path.write_text(page)
    log(f"wrote {path} and {artifacts_dir}")
    return path


def run_study(*, device: str, shapes: list[str], compilers: list[str], parts: list[str], modes: list[str],
              timing: Timing | None, threads: int, cores: list[int], gpu: bool, gpu_python: str, gpu_shapes: list[str],
              ablation: bool, profile_shapes: tuple[str, ...], out: Path, write_docs: bool, docs_dir: Path,
              artifacts_dir: Path, command: str) -> dict[str, Any]:
    """Compile (and on this machine time) every program, write OUT/<device>/results.json per
    device and, with `write_docs`, the artifacts and docs; returns a summary."""
    from jaxgpt_tools.fusion.claims import summary

    start = time.perf_counter()  # the study's wall time, for the log
    command = repo_relative_paths(command)
    local = run_local(device, shapes, compilers, out / device, timing, parts, modes, profile_shapes)
    if ablation and "inductor" in compilers and "qkv" in parts:
        from jaxgpt_tools.fusion import inductor as fusion_inductor

        variant, options = INDUCTOR_ABLATION
        largest = max(shapes, key=lambda name: SHAPES[name].seq_len)
        local += fusion_inductor.run([SHAPES[largest]], out_dir=out / device / "inductor", timing=None, log=log,
                                     parts=["qkv"], modes=modes, device=device, options=options, variant=variant)
    runs, records = [], list(local)
    if local:
        label = local[0]["device"]
        runs.append({"device": label, "command": command, "environment": environment(), "threads": threads,
                     "cores": cores, "timing": asdict(timing) if timing else None})
        log(f"{label} results: {write_results(out / label, local, runs[-1])}")
    if gpu:
        gpu_out = out / COMPILE_ONLY
        gpu_records, gpu_versions, skipped = [], {}, None
        jobs = [({}, "default", parts)]
        if ablation:
            jobs += [({DOT_MERGER_FLAG: mb}, f"dot_merger_{mb}", ["qkv"]) for mb in DOT_MERGER_ABLATION_MB]
        for options, variant, job_parts in jobs:
            result = run_gpu_aot(gpu_python, gpu_shapes if variant == "default" else [gpu_shapes[-1]], gpu_out,
                                 timeout_s=3600, parts=job_parts, modes=modes, options=options, variant=variant)
            if "records" not in result:
                skipped = result["skipped"]
                log(f"h100 column skipped: {skipped}")
                break
            gpu_records += result["records"]
            gpu_versions = result["versions"]
        if gpu_records:
            gpu_run = {"device": COMPILE_ONLY, "command": command, "caveat": CAVEAT,
                       "environment": {**environment(), "versions": gpu_versions}}
            log(f"h100 results: {write_results(gpu_out, gpu_records, gpu_run)}")
            runs.append(gpu_run)
            records += gpu_records
        elif skipped:
            runs.append({"device": COMPILE_ONLY, "skipped": skipped})
    if write_docs:
        write_outputs(runs, records, docs_dir=docs_dir, artifacts_dir=artifacts_dir, command=command)
    log(f"done in {time.perf_counter() - start:.0f} s")
    return summary(records)
