"""The fusion study: how XLA and TorchInductor compile the record's merged-QKV attention path (the
library of `scripts/fusion_report.py`, which says how to run it).

Both frameworks, both qkv layouts, the attention layer and one block, forward and forward +
backward (fusion_xla.py, fusion_inductor.py). Full artifacts (optimized HLO, Inductor's debug
traces, results.json) go to runs/fusion/<device>/; with `write_docs` a curated few are copied to
docs/fusion/ and docs/FUSION.md is written with one plot (fusion_docs.py). The H100 column needs
the venv with the jax CUDA plugin (`gpu_python`); without it that column says why it is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from jaxgpt.gpu_plan import CAVEAT
from jaxgpt_tools.artifacts import repo_relative_paths
from jaxgpt_tools.machine import describe
from jaxgpt_tools.fusion_xla import MODES, PARTS, SHAPES

REPO_ROOT = Path(__file__).resolve().parents[1]


def log(message: str) -> None:
    print(f"[fusion] {message}", file=sys.stderr, flush=True)


def run_cpu(shapes: list[str], compilers: list[str], out: Path, repeats: int, threads: int,
            parts=PARTS, modes=MODES) -> list[dict[str, Any]]:
    """Both compilers on this CPU; torch and XLA each get `threads` threads' worth of work
    (torch.set_num_threads; XLA's CPU client keeps its own pool, recorded as is)."""
    records = []
    if "xla" in compilers:
        from jaxgpt_tools import fusion_xla

        records += fusion_xla.run([SHAPES[s] for s in shapes], device=None, out_dir=out / "xla", repeats=repeats, log=log,
                                    parts=parts, modes=modes)
    if "inductor" in compilers:
        import torch

        from jaxgpt_tools import fusion_inductor

        torch.set_num_threads(threads)
        records += fusion_inductor.run([SHAPES[s] for s in shapes], out_dir=out / "inductor", repeats=repeats, log=log,
                                         parts=parts, modes=modes)
        for record in records:
            if record["compiler"] == "inductor":
                record["torch_threads"] = threads
    return records


def run_gpu_aot(gpu_python: str, shapes: list[str], out: Path, timeout_s: float) -> dict[str, Any]:
    """XLA for an H100 through the compile-only devices, in a child process of the GPU venv."""
    if not Path(gpu_python).exists():
        return {"skipped": f"no GPU compile-only venv at {gpu_python} (jax[cuda13] with the CUDA plugin)"}
    command = [gpu_python, str(REPO_ROOT / "scripts" / "fusion_xla.py"), "--device", "h100", "--shapes", ",".join(shapes),
               "--out", str(out / "xla")]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "JAX_PLATFORMS": "cpu", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1"}
    env.pop("XLA_FLAGS", None)  # the CPU device count of the test harness means nothing there
    log(f"xla h100 (compile only) in {gpu_python}: {', '.join(shapes)}")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=REPO_ROOT, env=env)
    except subprocess.TimeoutExpired:
        return {"skipped": f"H100 compiles did not finish within {timeout_s:.0f} s"}
    for line in done.stderr.splitlines():
        if line.startswith("xla "):
            log(line)
    if done.returncode != 0:
        return {"skipped": f"child failed (rc {done.returncode}): {done.stderr[-800:]}"}
    records = json.loads(done.stdout.strip().splitlines()[-1])
    for record in records:
        record["caveat"] = CAVEAT
    return {"records": records}


def minimum_bytes(records: list[dict[str, Any]]) -> dict[tuple, float]:
    """The least a program must move: its arguments read once and its results written once
    (weights fp32, activations and cotangent bf16; gradients fp32 / bf16), from XLA's
    memory_analysis of the same program, keyed by (part, mode, layout, shape name)."""
    return {(r["part"], r["mode"], r["layout"], r["shape"]["name"]): r["argument_bytes"] + r["output_bytes"]
            for r in records if r["compiler"] == "xla" and "argument_bytes" in r}


def merged_by_compiler(records: list[dict[str, Any]]) -> dict[tuple, bool]:
    """Per (compiler, device, part, mode, shape): whether the separate layout's program has as
    many GEMM kernels as the merged one, i.e. the compiler merged the three projections itself."""
    out = {}
    for r in records:
        if r["layout"] != "separate":
            continue
        twin = [m for m in records if m["layout"] == "merged" and all(m[k] == r[k] for k in ("compiler", "device", "part", "mode"))
                and m["shape"] == r["shape"]]
        if twin:
            out[(r["compiler"], r["device"], r["part"], r["mode"], r["shape"]["name"])] = r["gemm_kernels"] == twin[0]["gemm_kernels"]
    return out


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per program: the numbers the tables and the plot use."""
    minimum = minimum_bytes(records)
    rows = []
    for r in records:
        key = (r["part"], r["mode"], r["layout"], r["shape"]["name"])
        row = {
            "compiler": r["compiler"], "device": r["device"], "part": r["part"], "mode": r["mode"], "layout": r["layout"],
            "shape": r["shape"]["name"], "T": r["shape"]["seq_len"], "D": r["shape"]["model_dim"],
            "kernels": r["kernels"], "loop_kernels": r.get("loop_kernels", 0), "gemm_kernels": r["gemm_kernels"], "flops": r.get("flops"),
            "kernel_traffic_bytes": r["kernel_traffic_bytes"], "bytes_accessed": r.get("bytes_accessed"),
            "min_bytes": minimum.get(key), "temp_bytes": r.get("temp_bytes"), "median_ms": r.get("median_ms"), "compile_s": r["compile_s"],
        }
        if row["min_bytes"]:
            row["traffic_over_min"] = row["kernel_traffic_bytes"] / row["min_bytes"]
        rows.append(row)
    return rows


def write_results(out: Path, records: list[dict[str, Any]], extra: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps({**extra, "records": records, "rows": summarize(records)}, indent=1))
    return path


def docs_from_results(roots: list[Path], docs_dir: Path) -> Path:
    """--from-results: the docs from earlier runs' results.json files (ROOT/cpu/ and
    ROOT/h100-compile-only/ of each root); a program found in several takes the last root's."""
    from jaxgpt_tools.fusion_docs import write_docs
    from jaxgpt.hlo import hlo_counts

    programs: dict[tuple, dict[str, Any]] = {}
    machine, repeats, threads = None, 0, 1
    sources = []
    for root in roots:
        for sub in ("cpu", "h100-compile-only"):
            path = root / sub / "results.json"
            if not path.exists():
                continue
            result = json.loads(path.read_text())
            sources.append(f"`{repo_relative_paths(result.get('command', '(command not recorded)'))}` -> {path.parent.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path.parent}")
            if sub == "cpu":
                machine = result["machine"]
                if any("median_ms" in r for r in result["records"]):
                    repeats, threads = result["repeats"], result.get("threads", 1)
            for record in result["records"]:
                if sub != "cpu":
                    record["caveat"] = CAVEAT
                key = (record["compiler"], record["device"], record["part"], record["mode"], record["layout"],
                       record["shape"]["name"])
                programs[key] = record
    if machine is None:
        raise ValueError(f"no cpu/results.json under {', '.join(map(str, roots))}")
    records = list(programs.values())
    for record in records:  # the counts from the saved HLO, by this version of the reader
        if record["compiler"] == "xla" and Path(record["hlo"]).exists():
            record.update(hlo_counts(Path(record["hlo"]).read_text()))
    gpu_skipped = None if any(r["device"] == "h100" for r in records) else "no h100-compile-only/results.json"
    command = "python scripts/fusion_report.py --from-results " + " ".join(str(r) for r in roots)
    path = write_docs(records, summarize(records), merged_by_compiler(records), docs_dir, gpu_skipped=gpu_skipped,
                      machine=machine, repeats=repeats, threads=threads, command=command, sources=sources)
    log(f"wrote {path}")
    return path


def run_study(*, shapes: list[str], compilers: list[str], parts: list[str], modes: list[str], repeats: int,
              threads: int, gpu: bool, gpu_python: str, gpu_shapes: list[str], out: Path, write_docs: bool,
              docs_dir: Path, command: str) -> dict[str, Any]:
    """Compile (and on this CPU time) every program, write results.json per device under `out`
    and, with `write_docs`, the docs; returns {"rows", "merged_by_compiler", "gpu"}."""
    start = time.perf_counter()
    command = repo_relative_paths(command)
    cpu_out = out / "cpu"
    records = run_cpu(shapes, compilers, cpu_out, repeats, threads, parts, modes)
    machine = describe()
    cpu_path = write_results(cpu_out, records, {"machine": machine, "shapes": shapes, "repeats": repeats,
                                                "threads": threads, "command": command})
    log(f"cpu results: {cpu_path}")
    gpu_result: dict[str, Any] = {"skipped": "not asked (--no-gpu or --quick)"}
    if gpu:
        gpu_out = out / "h100-compile-only"
        gpu_result = run_gpu_aot(gpu_python, gpu_shapes, gpu_out, timeout_s=1800)
        if "records" in gpu_result:
            records += gpu_result["records"]
            log(f"h100 results: {write_results(gpu_out, gpu_result['records'], {'caveat': CAVEAT, 'command': command})}")
        else:
            log(f"h100 column skipped: {gpu_result['skipped']}")
    if write_docs:
        from jaxgpt_tools.fusion_docs import write_docs as write

        write(records, summarize(records), merged_by_compiler(records), docs_dir,
              gpu_skipped=gpu_result.get("skipped"), machine=machine, repeats=repeats, threads=threads,
              command=command, sources=[f"`{command}` -> {out}"])
    log(f"done in {time.perf_counter() - start:.0f} s")
    return {"rows": summarize(records), "merged_by_compiler": {"/".join(k): v for k, v in merged_by_compiler(records).items()},
            "gpu": gpu_result.get("skipped", "compiled")}
