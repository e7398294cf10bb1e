"""One lease of a GPU, one command: every number the project asks of a GPU, in priority order,
each step capped, under one deadline, the results published into a flat folder after every step.

The device tool lends a GPU for 15 minutes in all and runs one command for at most 10; what it
brings back is at most 8 files, at most 2 folders deep. So the plan (`scripts/device_plan.py`):
- checks the selected steps' caps against its deadline before anything runs (`plan_budget`: the
  later steps' caps shrink, or with --strict-caps the plan is refused with one line);
- runs each step as a child process (`common.subprocesses`): its own process group in the
  plan's session, its output streamed to a log file (a step killed at its cap keeps what it
  printed), its whole group ended after it whatever it did, dead with the plan if the plan dies;
  before each step, processes an earlier step left are ended and the GPU's memory in use is read;
- points every step at one compile-cache root (`compile_caches`), restored from an earlier
  lease's archive when given, packed (under 12 MiB) after every step that compiles, so that the
  next lease pays for no compile this one finished;
- publishes the flat output folder (`PUBLISHED`: summary.json, the three runs' logs, the kernel
  rankings, the caches' archive and one small archive of the rest, summary.md included) after
  every step, and the summary with the running step's phase (`step_progress`) every ~10 s, so a
  command killed at the tool's limit still returns what finished and how far the rest got.

The steps themselves, the plan's options and the reading of the runs' logs are `plan_steps`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from jaxgpt_tools.common.artifacts import REPO_ROOT, repo_relative_paths
from jaxgpt_tools.common.subprocesses import end_marked, log_tail, run_streamed
from jaxgpt_tools.gpu import compile_caches, plan_budget, step_progress
from jaxgpt_tools.gpu.plan_steps import STEP_MARKER, PlanOptions, Skip, Step, step_range

# What comes back from the device tool: these names, flat, and nothing else. Seven, so that with
# the one partial file a publish may have in flight there are never more than the tool's 8.
SUMMARY_JSON, SUMMARY_MD, ARCHIVE, CACHES = "summary.json", "summary.md", "rest.tar.gz", "caches.tar.gz"
PUBLISHED = (SUMMARY_JSON, "jaxgpt.log", "torch_ref.log", "record.log", "kernels.txt", ARCHIVE, CACHES)
MAX_FILES = 8
# Files larger than this stay out of the archive (a profiler trace can be tens of MB), and the
# archive holds at most ARCHIVE_CAP bytes of files (the tool takes 16 MiB a file): what is left
# out is listed in the summary instead.
ARCHIVE_FILE_LIMIT = 4 * 2**20
ARCHIVE_CAP = 12 * 2**20
# The compile caches' archive: under 12 MiB, so that the repository that keeps it stays far
# below the 64 MiB a device call carries (artifacts/gpu/README.md, "Compile caches").
CACHES_CAP = 12 * 2**20
# GPU memory in use before a step above this means something else holds the GPU (an idle H100
# or H200 shows a few MiB); the plan waits GPU_BUSY_WAIT_S for it to go, then runs and says so.
GPU_BUSY_MIB = 1024
GPU_BUSY_WAIT_S = 15.0


# ---------------------------------------------------------------------------------------------
# The plan


def budget(steps: list[Step], options: PlanOptions) -> plan_budget.Budget:
    """The selected steps' caps against the deadline (PlanRefused: see plan_budget.fit)."""
    return plan_budget.fit({step.name: step.cap_s for step in steps}, options.deadline_s, options.margin_s,
                           options.strict_caps)


def run_plan(steps: list[Step], options: PlanOptions, *, clock: Callable[[], float] = time.monotonic,
             on_publish: Callable[[str, dict[str, Any]], None] | None = None,
             gpu_memory: Callable[[], int | None] | None = None) -> dict[str, Any]:
    """Run `steps` in order under the deadline; publish after each, while one runs every
    `options.tick_s`, and once before the first, so an early kill still returns a summary.
    `gpu_memory()`: MiB in use on the GPU (None: no GPU), read before each step.
    Returns the summary (also in summary.json). PlanRefused before anything runs (`budget`)."""
    plan_time = budget(steps, options)
    start = clock()
    options.work.mkdir(parents=True, exist_ok=True)
    options.out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                               "commit": _commit(), "deadline_s": options.deadline_s, "cpu_stand_ins": options.cpu,
                               "step_range": list(step_range(options.steps)), "budget": plan_time.as_dict(),
                               "caches": restore_caches(options), "steps": {}}
    logs = {s.name: s.log for s in steps if s.log}
    publish(summary, options, logs)
    for step in steps:
        result = run_step(step, options, summary, logs, deadline_in_s=options.deadline_s - options.margin_s
                          - (clock() - start), clock=clock, gpu_memory=gpu_memory or gpu_memory_used_mib)
        if step.name == "preflight" and summary["caches"].get("manifest"):
            summary["caches"]["mismatch"] = compile_caches.describe_mismatch(
                summary["caches"]["manifest"], result.get("results") or {})
        if step.compiles and result["status"] != "skipped":
            summary["caches"]["packed"] = pack_caches(options, summary)
        summary["steps"][step.name] = result
        summary.update(headline(summary["steps"]))
        summary["elapsed_s"] = round(clock() - start, 1)
        publish(summary, options, logs)
        if on_publish is not None:
            on_publish(step.name, result)
    return summary


def run_step(step: Step, options: PlanOptions, summary: dict[str, Any], logs: dict[str, str], *,
             deadline_in_s: float, clock: Callable[[], float], gpu_memory: Callable[[], int | None]) -> dict[str, Any]:
    """One step: the machine made free, the child launched with the step's marker and the cache
    root, its progress published while it runs, its results collected whatever its fate."""
    log = options.work / f"{step.name}.log"
    result: dict[str, Any] = {"cap_s": step.cap_s}
    if deadline_in_s < 1:
        return {**result, "status": "skipped", "reason": f"no time left before the plan's {options.deadline_s:.0f} s deadline"}
    result["before"] = make_free(gpu_memory, options.marker)
    timeout, began = min(step.cap_s, deadline_in_s), clock()
    caches = cache_root(options)
    try:
        launch = step.launch(options.work)
    except Skip as reason:
        result.update(status="skipped", reason=str(reason))
    except Exception as error:  # noqa: BLE001 - a step that cannot even start is that step's failure
        result.update(status="failed", reason=f"{type(error).__name__}: {error}")
    else:
        # As a reader can rerun it: the work folder and this interpreter by name, not by path.
        result["command"] = " ".join(launch.command).replace(str(options.work), "$WORK").replace(
            sys.executable, "python3")
        env = {**(launch.env if launch.env is not None else os.environ), options.marker: step.name,
               **compile_caches.environment(caches)}
        counts_before = compile_caches.counts(caches)

        def tick(elapsed_s: float) -> None:
            result.update(status="running", progress=step_progress.read(log, elapsed_s, caches))
            summary["steps"][step.name] = result
            publish(summary, options, logs, archives=False)

        try:
            status, code = run_streamed(replace(launch, env=env), log, timeout, on_tick=tick, tick_s=options.tick_s)
        except KeyboardInterrupt:
            result.update(status="interrupted", reason="the plan was stopped (SIGTERM or Ctrl-C) during this step",
                          progress=step_progress.read(log, clock() - began, caches))
            summary["steps"][step.name] = result
            publish(summary, options, logs)
            raise
        result.update(status=status, returncode=code)
        if status == "timed_out":
            result["reason"] = f"killed at {timeout:.0f} s ({'its cap' if timeout == step.cap_s else 'the deadline'})"
        elif status == "failed":
            result["reason"] = f"exited {code}: {log_tail(log)}"
        # Where it stood when it ended: for a killed compile, how far it got.
        result["progress"] = step_progress.read(log, clock() - began, caches)
        after = result["progress"]["caches"]
        result["compiled"] = {name: after[name] - counts_before.get(name, 0) for name in after}
    result["seconds"] = round(clock() - began, 1)
    try:
        result.update(step.collect(options.work, log))
    except Exception as error:  # noqa: BLE001 - reading a broken step's output must not end the plan
        result["collect_error"] = f"{type(error).__name__}: {error}"
    return result


def make_free(gpu_memory: Callable[[], int | None], marker: str = STEP_MARKER) -> dict[str, Any]:
    """Before a step: end every process an earlier step left (found by `marker`), then read the
    GPU's memory in use, waiting up to GPU_BUSY_WAIT_S for it to fall under GPU_BUSY_MIB."""
    ended = end_marked(marker)
    used, waited = gpu_memory(), 0.0
    while used is not None and used > GPU_BUSY_MIB and waited < GPU_BUSY_WAIT_S:
        time.sleep(1.0)
        waited += 1.0
        used = gpu_memory()
    state: dict[str, Any] = {"gpu_memory_used_mib": used, "leftovers_ended": ended}
    if used is not None and used > GPU_BUSY_MIB:
        state["gpu_busy"] = f"{used} MiB in use after {waited:.0f} s: the step's numbers may be off"
    return state


def gpu_memory_used_mib() -> int | None:
    """MiB in use on GPU 0 by nvidia-smi (None without one, or when it fails)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=20)
        return int(done.stdout.split()[0]) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def headline(steps: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The three step times under gpu_check's names, jaxgpt's with the Mosaic kernels, and their
    ratios (None where a run gave none)."""
    times = {name: (steps.get(step) or {}).get("step_ms_median")
             for name, step in (("jax_step_ms", "jaxgpt"), ("torch_step_ms", "torch_ref"), ("record_step_ms", "record"),
                                ("jax_mosaic_step_ms", "jaxgpt_mosaic"))}
    ratios = {}
    for a, b in (("jax", "torch"), ("jax", "record"), ("torch", "record"), ("jax_mosaic", "jax")):
        x, y = times[f"{a}_step_ms"], times[f"{b}_step_ms"]
        ratios[f"ratio_{a}_over_{b}"] = round(x / y, 3) if x and y else None
    return {**times, **ratios}


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


# ---------------------------------------------------------------------------------------------
# Compile caches: restored before the first step, packed after every step that compiles


def cache_root(options: PlanOptions) -> Path:
    return options.work / "caches"


def restore_caches(options: PlanOptions) -> dict[str, Any]:
    """Unpack `options.caches_archive` into the cache root ({"state": "cold"} without one; a bad
    archive is reported and the plan runs cold)."""
    if options.caches_archive is None:
        return {"state": "cold"}
    try:
        manifest = compile_caches.unpack(options.caches_archive, cache_root(options))
    except (OSError, ValueError) as error:
        return {"state": "cold", "restore_error": f"{type(error).__name__}: {error}"}
    return {"state": "warm", "restored_from": options.caches_archive.name, "manifest": manifest,
            "counts_at_start": compile_caches.counts(cache_root(options))}


def pack_caches(options: PlanOptions, summary: dict[str, Any]) -> dict[str, Any]:
    """The cache root as CACHES in the output folder, under CACHES_CAP; a failure is reported."""
    machine = ((summary["steps"].get("preflight") or {}).get("results") or {})
    try:
        return compile_caches.pack(cache_root(options), options.out / CACHES, CACHES_CAP,
                                   compile_caches.manifest(summary["commit"], machine))
    except Exception as error:  # noqa: BLE001 - the caches are a bonus; the numbers must still come back
        return {"error": f"{type(error).__name__}: {error}"}


# ---------------------------------------------------------------------------------------------
# Publishing


def publish(summary: dict[str, Any], options: PlanOptions, step_logs: dict[str, str] | None = None,
            archives: bool = True) -> None:
    """Rewrite the flat output folder: each step's log under its flat name, the work folder's
    `kernels.txt`, the rest archived (small files only; not with `archives=False`, the cheap
    publish of a running step), the summary last. Each file is written beside its target and
    renamed over it (a kill never leaves half a file), each on its own: a failure loses that
    file, recorded in the summary's `publish_errors`, never the plan."""
    out, work = options.out, options.work
    errors: dict[str, str] = {}

    def guarded(name: str, write: Callable[[], object]) -> None:
        try:
            write()
        except Exception as error:  # noqa: BLE001 - one file lost, not the lease
            errors[name] = f"{type(error).__name__}: {error}"

    def portable(text: str) -> bytes:  # no machine's folders: the work folder as $WORK, then repo_relative_paths
        return repo_relative_paths(text.replace(str(work), "$WORK")).encode()

    for stale in out.glob("*.partial"):  # a partial file a killed publish left
        guarded(stale.name, stale.unlink)
    copied = {work / f"{step}.log": name for step, name in (step_logs or {}).items()}
    copied[work / "kernels.txt"] = "kernels.txt"
    for source, name in copied.items():
        if source.is_file():
            guarded(name, partial(_copy_portably, source, out / name, portable))
    guarded(SUMMARY_MD, lambda: (work / SUMMARY_MD).write_bytes(portable(markdown(summary))))
    if archives:
        skip = set(copied) | {cache_root(options)}
        guarded(ARCHIVE, lambda: summary.__setitem__("left_out_of_archive", _archive(work, out / ARCHIVE, skip)))
    summary["publish_errors"] = errors
    # The summary last: once it names a step, that step's files are already in place.
    try:
        _write_atomically(out / SUMMARY_JSON, portable(json.dumps(summary, indent=1, default=str) + "\n"))
    except Exception as error:  # noqa: BLE001 - said where the lease's output tail shows it
        print(f"device_plan: could not write {SUMMARY_JSON}: {type(error).__name__}: {error}", file=sys.stderr)


def _copy_portably(source: Path, target: Path, portable: Callable[[str], bytes]) -> None:
    _write_atomically(target, portable(source.read_text(errors="replace")))


def _write_atomically(path: Path, data: bytes) -> None:
    staged = path.with_name(f".{path.name}.partial")
    staged.write_bytes(data)
    staged.replace(path)


def _archive(work: Path, target: Path, skip: set[Path]) -> list[str]:
    """Every regular file under `work` not already published (nor under a skipped folder), under
    ARCHIVE_FILE_LIMIT each and ARCHIVE_CAP in all (counting each file's tar header and padding,
    so the gzipped archive cannot pass it), in one gzipped tar; returns the files left out."""
    left_out, total = [], 0
    staged = target.with_name(f".{target.name}.partial")
    with tarfile.open(staged, "w:gz") as archive:
        for path in sorted(work.rglob("*")):
            if path.is_symlink() or not path.is_file() or path in skip or any(p in skip for p in path.parents):
                continue
            size = path.stat().st_size
            if size > ARCHIVE_FILE_LIMIT or total + size + 1024 > ARCHIVE_CAP:
                left_out.append(f"{path.relative_to(work)} ({size / 2**20:.1f} MiB)")
                continue
            total += size + 1024
            archive.add(path, arcname=str(path.relative_to(work)))
    staged.replace(target)
    return left_out


# ---------------------------------------------------------------------------------------------
# The summary as a page


def markdown(summary: dict[str, Any]) -> str:
    first, last = summary["step_range"]
    lines = [f"# Device plan at {summary['commit']} ({summary['started_utc']} UTC)", ""]
    if summary["cpu_stand_ins"]:
        lines += ["**CPU stand-ins: these numbers say nothing about a GPU.**", ""]
    preflight = ((summary["steps"].get("preflight") or {}).get("results") or {})
    if preflight:
        lines += [f"Device: {preflight.get('gpu') or preflight.get('device_kind')}, driver {preflight.get('driver')}; "
                  f"python {preflight.get('python')}, jax {preflight.get('jax')}, torch {preflight.get('torch')}, "
                  f"triton {preflight.get('triton')}", ""]
    lines += [f"Median step ms over steps {first}..{last} of each run: jaxgpt {summary.get('jax_step_ms')}, "
              f"torch_ref {summary.get('torch_step_ms')}, the record's own script {summary.get('record_step_ms')}; "
              f"jaxgpt / record {summary.get('ratio_jax_over_record')}, torch_ref / record "
              f"{summary.get('ratio_torch_over_record')}, jaxgpt / torch_ref {summary.get('ratio_jax_over_torch')}; "
              f"jaxgpt with the Mosaic kernels {summary.get('jax_mosaic_step_ms')} "
              f"({summary.get('ratio_jax_mosaic_over_jax')} of its default's).", "",
              "| step | status | seconds | cap | median step ms | first step ms | peak MiB | reason |",
              "|---|---|---|---|---|---|---|---|"]
    for name, step in summary["steps"].items():
        lines.append(f"| {name} | {step['status']} | {step.get('seconds', '')} | {step['cap_s']} | "
                     f"{step.get('step_ms_median', '')} | {step.get('first_step_ms', '')} | {step.get('peak_mib', '')} | "
                     f"{(step.get('reason') or step.get('collect_error') or '').replace('|', '/')[:200]} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# The one-second check before a lease


def local_check(steps: list[Step], options: PlanOptions) -> tuple[list[str], list[str]]:
    """What the lease will find, checked here in about a second (no child process, no jax): the
    caps against the deadline, the shards with their completion marker and encoding, the
    record's script and its SHA-256 (when its step is selected), the caches' archive. Returns
    (lines to print, problems)."""
    from jaxgpt_tools.gpu import device_steps

    lines, problems = [], []
    try:
        plan_time = budget(steps, options)
        lines.append(f"steps {', '.join(step.name for step in steps)}: caps {plan_time.as_dict()['caps_sum_s']:.0f} s "
                     f"for {plan_time.usable_s:.0f} s before the deadline")
        lines += [f"  {note}" for note in plan_time.notes]
    except plan_budget.PlanRefused as error:
        problems.append(str(error))
    found = device_steps.inputs(options.train_files, options.val_files, options.record_script)
    lines.append(f"shards: {len(found['train_shards'])} train, {len(found['val_shards'])} val, "
                 f"encoding {found['encoding']}")
    wants_record = any(step.name == "record" for step in steps)
    problems += [p for p in found["problems"] if wants_record or "record script" not in p]
    if wants_record and found["record_script_is_the_records"]:
        lines.append(f"record script: {options.record_script} (SHA-256 is the record's)")
    if options.caches_archive is not None:
        try:
            held = compile_caches.check(options.caches_archive)
            lines.append(f"caches: {options.caches_archive} ({held['bytes'] / 2**20:.1f} MiB, {held['members']} "
                         f"members, built at {(held.get('manifest') or {}).get('commit')})")
        except (OSError, ValueError) as error:
            problems.append(str(error))
    return lines, problems
