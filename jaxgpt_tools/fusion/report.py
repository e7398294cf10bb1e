"""The fusion study: how XLA and TorchInductor compile the record's merged-QKV path, and what
merging buys (the library of `scripts/fusion_report.py`, which says how to run it).

Both frameworks, both qkv layouts, the QKV path alone and one block, forward and forward +
backward (fusion/xla.py, fusion/inductor.py), on this machine (CPU, or a CUDA GPU with
`device="cuda"`), timed only on an idle machine (fusion_xla.measure), with Inductor's own merge
passes turned on and merged checked equal to separate in fp32 (fusion/equality.py); and for an
H100 compiled without a GPU (fusion/compile_only.py): XLA's programs and its dot-merger sweep
(fusion/sweep.py), Inductor's output code (fusion/inductor_aot.py). Full artifacts (optimized
HLO, Inductor's debug traces, results.json) go to OUT/<device>/; `write_docs` curates the QKV
programs and the results into artifacts/fusion/ (fusion/artifacts.py) and writes docs/FUSION.md
with its plots (fusion/docs.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from jaxgpt_tools.common import machine
from jaxgpt_tools.common.artifacts import REPO_ROOT, repo_relative_paths
from jaxgpt_tools.common.machine import cpu_flags, torch_threads
from jaxgpt_tools.common.timing import timed
from jaxgpt_tools.fusion.compile_only import (
    FREEZING_ON_GPU,
    INDUCTOR_CPU_ABLATIONS,
    MAX_AUTOTUNE,
    MAX_AUTOTUNE_VARIANT,
    inductor_leg,
    inductor_max_autotune_leg,
    xla_gemm_leg,
    xla_leg,
)
from jaxgpt_tools.fusion.records import run_compilers
from jaxgpt_tools.fusion.xla import COMPILE_ONLY, MODES, PARTS, SHAPES, Deadline, Timing
from jaxgpt_tools.gpu.compile_plan import CAVEAT

# Inductor settings every CPU program is compiled with that differ from Inductor's defaults (its
# trace to read the output code; no cache, whose hits write no trace) and AOTAutograd's.
INDUCTOR_CPU_CONFIG = {"trace.enabled": True, "fx_graph_cache": False, "fx_graph_remote_cache": False,
                       "functorch.enable_autograd_cache": False}
# The CPU's vector ISA extensions the compilers' CPU code may use (of /proc/cpuinfo's flags).
ISA_PREFIXES = ("sse", "ssse", "avx", "amx", "fma", "f16c", "bmi", "vnni")


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


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor string."""
    import platform

    return machine.cpu_model() or platform.processor() or platform.machine()


def environment() -> dict[str, Any]:
    """jaxgpt_tools.common.machine.describe (host, CPU, load, date, jax's devices, torch and its GPU)
    with the versions of every package that compiled the programs, the commit, the cores this
    process may use, the CPU's model, identity (family, model, stepping: machine.cpu_identity),
    all its flags and its vector ISA, and the compiler flags that differ from
    the defaults (XLA_FLAGS; Inductor's and AOTAutograd's settings; torch's CPU capability)."""
    import importlib.metadata as metadata

    from jaxgpt_tools.common.machine import describe

    versions = {}
    for package in ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "flax", "torch", "triton", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    isa = sorted(flag for flag in cpu_flags() if flag.startswith(ISA_PREFIXES))
    flags = {"XLA_FLAGS": os.environ.get("XLA_FLAGS", ""), "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", ""),
             "inductor_cpu": INDUCTOR_CPU_CONFIG}
    with contextlib.suppress(ImportError):
        import torch

        flags["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return {**describe(), "versions": versions, "commit": git_commit(), "cores_used": len(os.sched_getaffinity(0)),
            "cpu_model": cpu_model(), "cpu_identity": machine.cpu_identity(), "cpu_flags": sorted(cpu_flags()), "isa": isa,
            "compiler_flags": flags}


def run_local(device: str, shapes: list[str], compilers: list[str], out: Path, timing: Timing | None,
              parts=PARTS, modes=MODES, profile_shapes: tuple[str, ...] = (), *, inductor_max_autotune: bool = False,
              deadline: Deadline | None = None) -> list[dict[str, Any]]:
    """Both compilers on this machine ("cpu", or "cuda": jax's GPU and torch's CUDA device),
    timed; the programs at `profile_shapes` also profiled per kernel; with `inductor_max_autotune`,
    Inductor's programs compiled again with MAX_AUTOTUNE (variant MAX_AUTOTUNE_VARIANT), timed the
    same way. Shape by shape, so that a `deadline` cuts the largest shapes of every compiler alike."""
    records = []
    profile_dir = out / "profiles"
    for name in shapes:
        profile = profile_dir if name in profile_shapes else None
        for compiler in compilers:
            if compiler == "xla":
                from jaxgpt_tools.fusion import xla as fusion_xla

                records += fusion_xla.run([SHAPES[name]], device=None, out_dir=out / "xla", timing=timing, log=log,
                                          parts=parts, modes=modes, profile_dir=profile, deadline=deadline)
                continue
            from jaxgpt_tools.fusion import inductor as fusion_inductor

            variants = [("default", None)] + ([(MAX_AUTOTUNE_VARIANT, MAX_AUTOTUNE)] if inductor_max_autotune else [])
            for variant, options in variants:
                records += fusion_inductor.run([SHAPES[name]], out_dir=out / "inductor", timing=timing, log=log,
                                               parts=parts, modes=modes, device=device, profile_dir=profile,
                                               options=options, variant=variant, deadline=deadline)
    return records


def local_extras(device: str, compilers: list[str], largest: str, out: Path, modes: list[str]) -> tuple[list, list]:
    """(ablation records, equality checks) on this machine: Inductor's own merge passes on the
    separate QKV path at the `largest` shape, untimed; merged against separate in fp32 per compiler."""
    from jaxgpt_tools.fusion import equality as fusion_equality

    records = []
    if "inductor" in compilers:
        from jaxgpt_tools.fusion import inductor as fusion_inductor

        for variant, (options, flat, variant_modes) in INDUCTOR_CPU_ABLATIONS.items():
            if device != "cpu" and variant.startswith("freezing"):
                continue  # its CPU option (cpp.enable_concat_linear) is the CPU's; on a GPU freezing alone
            records += fusion_inductor.run([SHAPES[largest]], out_dir=out / "inductor", timing=None, log=log, parts=["qkv"],
                                           modes=[m for m in variant_modes if m in modes], device=device, options=options,
                                           variant=variant, layouts=("separate",), flat=flat)
    shape = SHAPES[largest]
    equality = [fusion_equality.check(compiler, shape.model_dim, shape.num_heads, shape.seq_len) for compiler in compilers]
    for check in equality:
        log(f"{check['compiler']} fp32 merged vs separate at T {shape.seq_len}: max |diff| {check['max_abs_diff']:.3g}")
    return records, equality


def write_results(out: Path, study: dict[str, Any]) -> Path:
    """OUT/results.json: {"runs": how the records were made, "records", "sweep", "width_sweep",
    "debug_options", "equality"}."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps(study, indent=1))
    return path


def empty_study() -> dict[str, Any]:
    return {"runs": [], "records": [], "sweep": [], "width_sweep": [], "debug_options": {}, "equality": []}


def load_results(roots: list[Path]) -> dict[str, Any]:
    """The study of every results.json under the given folders: runs, records (a program found
    twice keeps the later root's record), sweep and equality checks (a later root's replace an
    earlier's when it has any)."""
    programs: dict[tuple, dict[str, Any]] = {}
    study = empty_study()
    for root in roots:
        paths = [root] if root.is_file() else sorted(root.rglob("results.json"))
        if not paths:
            raise ValueError(f"no results.json under {root}")
        for path in paths:
            result = json.loads(path.read_text())
            runs = result.get("runs", [result["run"]] if "run" in result else [])
            replaced: dict[tuple[str, str], list[bool]] = {}
            for record in result["records"]:
                if record.get("files"):  # a curated set: its program texts lie beside it
                    record["files_from"] = str(path.parent)
                earlier = programs.get(record_key(record))
                if earlier is not None:
                    replaced.setdefault((record["device"], record["compiler"]), []).append(same_kernels(earlier, record))
                programs[record_key(record)] = record
            for (device, compiler), same in replaced.items():
                before = last_run(study["runs"], device, compiler)
                for run in runs:
                    if run["device"] == device and compiler in run_compilers(run) and before is not None:
                        run["kernels_as_before"] = {"versions": compiler_versions(before, compiler), "programs": len(same),
                                                    "same": sum(same)}
            study["runs"] += runs
            for key in ("sweep", "width_sweep", "debug_options"):
                if result.get(key):
                    study[key] = result[key]
            later = {check["compiler"] for check in result.get("equality", [])}
            study["equality"] = [c for c in study["equality"] if c["compiler"] not in later] + result.get("equality", [])
    study["records"] = list(programs.values())
    study["runs"] = merge_runs(study["runs"])
    return study


# The compile-only H100 legs: name -> the compiler whose programs it makes. "xla" and "inductor"
# are the columns; "xla_gemm" and "inductor_max_autotune" the GEMM choices an H100 would autotune
# (compile_only.xla_gemm_leg, inductor_max_autotune_leg), runs of their own beside the columns'.
GPU_LEGS = {"xla": "xla", "inductor": "inductor", "xla_gemm": "xla", "inductor_max_autotune": "inductor"}


# The packages whose versions decide a compiler's programs.
COMPILER_PACKAGES = {"xla": ("jax", "jaxlib"), "inductor": ("torch",)}
# A kernel-table row's fields that are bytes (under the one byte model or the compiler's own
# count) or the graph's name: the rest say what the kernel is.
_BYTE_FIELDS = ("read", "written", "own_read", "own_written", "graph")


def same_kernels(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two records of one program launch the same kernels: counts, and every row of their
    per-kernel tables (names, kinds, ops, buffers) but its byte totals, which the byte model derives."""
    rows = lambda r: [{k: v for k, v in row.items() if k not in _BYTE_FIELDS} for row in r.get("kernel_table") or []]  # noqa: E731
    return (a["kernels"], a["gemm_kernels"]) == (b["kernels"], b["gemm_kernels"]) and rows(a) == rows(b)


def compiler_versions(run: dict[str, Any], compiler: str) -> dict[str, str]:
    """The versions of the packages that decide `compiler`'s programs, as `run` records them."""
    versions = (run.get("environment") or {}).get("versions", {})
    return {p: versions[p] for p in COMPILER_PACKAGES[compiler] if p in versions}


def last_run(runs: list[dict[str, Any]], device: str, compiler: str) -> dict[str, Any] | None:
    """The last of `runs` that made `compiler`'s programs on `device` (a column's, not a GEMM-choice leg's)."""
    return next((run for run in reversed(runs) if run["device"] == device and compiler in run_compilers(run)
                 and run_leg(run) in (compiler, "local")), None)


def run_leg(run: dict[str, Any]) -> str:
    """The leg a run made: a compile-only leg's name (a column's is its compiler's), or "local"."""
    return run.get("leg") or run.get("compiler") or "local"


def merge_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs in order, a later run of the same leg on the same device superseding an earlier one's
    compilers: the earlier keeps those it alone made (`compilers`, the rest named in `superseded`),
    or goes. A GEMM-choice leg's run and a column's never supersede each other."""
    out = []
    for i, run in enumerate(runs):
        covered = {c for later in runs[i + 1:] if later["device"] == run["device"] and run_leg(later) == run_leg(run)
                   for c in run_compilers(later)}
        kept = [c for c in run_compilers(run) if c not in covered]
        if not kept:
            continue
        if len(kept) < len(run_compilers(run)):
            run = {**run, "compilers": kept,
                   "superseded": sorted(set(run.get("superseded", [])) | (set(run_compilers(run)) - set(kept)))}
        out.append(run)
    return out


def record_key(record: dict[str, Any]) -> tuple:
    return (record["compiler"], record["device"], record["part"], record["mode"], record["layout"],
            record["shape"]["name"], record.get("variant", "default"))


def write_outputs(study: dict[str, Any], *, docs_dir: Path, artifacts_dir: Path, command: str, plot: bool = True) -> Path:
    """artifacts/fusion/ (curated programs, results.json, plots) and docs/FUSION.md."""
    from jaxgpt_tools.fusion import artifacts as fusion_artifacts
    from jaxgpt_tools.fusion import byte_model
    from jaxgpt_tools.fusion import docs as fusion_docs

    study = fusion_artifacts.curate(byte_model.apply(study), artifacts_dir, command)
    if plot:
        fusion_docs.plot(study["records"], artifacts_dir / "fusion.png")
        if study["sweep"]:
            fusion_docs.plot_sweep(study["sweep"], artifacts_dir / "sweep.png")
        if study.get("width_sweep") and study["sweep"]:
            from jaxgpt_tools.fusion.width_claims import plot_widths

            plot_widths(study["width_sweep"], study["sweep"], artifacts_dir / "width_sweep.png")
    page = fusion_docs.page(study, command=command, artifacts_dir=artifacts_dir, docs_dir=docs_dir)
    docs_dir.mkdir(parents=True, exist_ok=True)
    path = docs_dir / "FUSION.md"
    path.write_text(page)
    log(f"wrote {path} and {artifacts_dir}")
    return path


def compile_only(*, gpu_python: str, torch_cuda_python: str, shapes: list[str], parts: list[str], modes: list[str],
                 out: Path, ablation: bool, sweep: bool, command: str,
                 compilers: tuple[str, ...] = tuple(GPU_LEGS)) -> dict[str, Any]:
    """The H100 legs named in `compilers` (GPU_LEGS), compiled without a GPU (fusion_compile_only),
    as a study of their own: a run per leg (its versions and command, or why it was skipped),
    records and the sweep. The GEMM-choice legs take the last shape (XLA) and the smallest (Inductor)."""
    study = empty_study()
    smallest = min(shapes, key=lambda name: SHAPES[name].seq_len * SHAPES[name].model_dim)
    legs = (("xla", lambda: xla_leg(gpu_python, shapes, parts, modes, out, sweep=sweep, log=log)),
            ("inductor", lambda: inductor_leg(torch_cuda_python, shapes, modes, out, ablation=ablation, log=log)),
            ("xla_gemm", lambda: xla_gemm_leg(gpu_python, shapes[-1], modes, out / "gemm_choice", log=log)),
            ("inductor_max_autotune", lambda: inductor_max_autotune_leg(torch_cuda_python, smallest, out / "max_autotune",
                                                                        log=log)))
    for name, leg in legs:
        if name not in compilers:
            continue
        compiler = GPU_LEGS[name]
        log(f"{name} h100 (compiled without a GPU): {', '.join(shapes)}")
        leg_s, done = timed(leg)
        run: dict[str, Any] = {"device": COMPILE_ONLY, "compiler": compiler, "command": command, "caveat": CAVEAT,
                               "wall_s": leg_s}
        if name != compiler:
            run |= {"leg": name, "variants": done.get("variants", [])}
        if "skipped" in done:
            log(f"{name} h100 skipped: {done['skipped']}")
            study["runs"].append({**run, "skipped": done["skipped"]})
            continue
        env = environment()
        run["environment"] = {**env, "versions": done["versions"], "compiler_flags": {
            "XLA_FLAGS": "", **({"inductor_compile_only": done["records"][0].get("compile_config", {})} if done["records"] else {})}}
        if done.get("not_compiled"):
            run["not_compiled"] = done["not_compiled"]
        elif name == "inductor":
            run["not_compiled"] = {"block": "torch_ref's block builds its flex-attention BlockMask by running on the "
                                            "device; not attempted without a GPU", "freezing_concat_linear": FREEZING_ON_GPU}
        study["runs"].append(run)
        study["records"] += done["records"]
        study["sweep"] += done.get("sweep", [])
        study["width_sweep"] += done.get("width_sweep", [])
        study["debug_options"] = done.get("debug_options") or study["debug_options"]
        for key in ("sweep_skipped", "width_sweep_skipped", "debug_options_skipped"):
            if done.get(key):
                run[key] = done[key]
    return study


def run_study(*, device: str, shapes: list[str], compilers: list[str], parts: list[str], modes: list[str],
              timing: Timing | None, threads: int, cores: list[int], gpu: bool, gpu_python: str, torch_cuda_python: str,
              gpu_shapes: list[str], ablation: bool, sweep: bool, profile_shapes: tuple[str, ...], out: Path,
              gpu_compilers: tuple[str, ...] = tuple(GPU_LEGS), inductor_max_autotune: bool = False,
              deadline_s: float | None = None,
              write_docs: bool, docs_dir: Path, artifacts_dir: Path, command: str) -> dict[str, Any]:
    """Compile (and on this machine time) every program, write OUT/<device>/results.json per
    device and, with `write_docs`, the artifacts and docs; returns a summary. Past `deadline_s`
    (seconds from the start) this machine's run starts no new program and skips its extras."""
    from jaxgpt_tools.fusion.records import summary

    start = time.perf_counter()  # the study's wall time, for the log
    command = repo_relative_paths(command)
    study = empty_study()
    deadline = Deadline.after(deadline_s)
    local = run_local(device, shapes, compilers, out / device, timing, parts, modes, profile_shapes,
                      inductor_max_autotune=inductor_max_autotune, deadline=deadline)
    if deadline.passed():
        names = f" ({', '.join(deadline.not_started)})" if deadline.not_started else ""
        log(f"deadline ({deadline_s:g} s) passed: {len(deadline.not_started)} programs not started{names}; "
            "no ablations or equality checks")
    if local and "qkv" in parts and not deadline.passed():
        largest = max(shapes, key=lambda name: SHAPES[name].seq_len)
        extra, study["equality"] = local_extras(device, compilers, largest, out / device, modes) if ablation else ([], [])
        local += extra
    if local:
        label = local[0]["device"]
        study["runs"].append({"device": label, "compilers": compilers, "command": command, "environment": environment(),
                              "threads": threads,
                              "cores": cores, "timing": asdict(timing) if timing else None,
                              "wall_s": time.perf_counter() - start,
                              **({"inductor_variants": [MAX_AUTOTUNE_VARIANT]} if inductor_max_autotune else {}),
                              **({"deadline_s": deadline_s, "not_started": deadline.not_started}
                                 if deadline_s is not None else {})})
        study["records"] += local
        log(f"{label} results: {write_results(out / label, {**study, 'records': local})}")
    if gpu:
        aot = compile_only(gpu_python=gpu_python, torch_cuda_python=torch_cuda_python, shapes=gpu_shapes, parts=parts,
                           modes=modes, out=out / COMPILE_ONLY, ablation=ablation, sweep=sweep, command=command,
                           compilers=gpu_compilers)
        log(f"h100 results: {write_results(out / COMPILE_ONLY, aot)}")
        for key in ("runs", "records", "sweep", "width_sweep"):
            study[key] += aot[key]
        study["debug_options"] = aot["debug_options"]
    if write_docs:
        write_outputs(study, docs_dir=docs_dir, artifacts_dir=artifacts_dir, command=command)
    log(f"done in {time.perf_counter() - start:.0f} s")
    return summary(study["records"])
