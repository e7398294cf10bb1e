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

The steps (`record_steps`), most wanted first:
  preflight   GPU, driver, versions, the carried inputs, the record script's SHA-256
  jaxgpt      the trainer's CLI, record preset, one device, real sample tokens; steps traced and
              their kernels ranked (the same machine's baseline)
  record      the record's own script, patched only as `upstream_record` lists (its own compile
              settings, coordinate-descent tuning included)
  torch_ref   the same as jaxgpt with torch_ref's CLI (compiled as the record compiles)
  attention   the attention bench at the record's shapes: Pallas, FlexAttention, blocked
  mosaic      the Mosaic GPU kernels, alone in their process
The three step times are medians over one step range (after the compiling first step and the
clock reset at step 10, before the traced steps and the last validation): `step_range`.

`cpu_stand_ins` swaps the GPU-only parts for CPU ones of the same shape (smoke-preset trainer runs, a
record-format log printer, the attention bench's portable backend), so the plan's control flow
is tested in `make test` (tests/tools/gpu/test_device_plan.py).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from jaxgpt_tools import upstream_record
from jaxgpt_tools.common.artifacts import REPO_ROOT, repo_relative_paths
from jaxgpt_tools.common.subprocesses import Launch, end_marked, log_tail, run_streamed
from jaxgpt_tools.gpu import check as gpu_check
from jaxgpt_tools.gpu import compile_caches, plan_budget, step_progress, trace_kernels

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
# Every step's environment carries this variable (its value: the step's name): a process of an
# earlier step or an earlier plan that escaped its process group is found by it and ended.
STEP_MARKER = "JAXGPT_DEVICE_PLAN_STEP"
# GPU memory in use before a step above this means something else holds the GPU (an idle H100
# or H200 shows a few MiB); the plan waits GPU_BUSY_WAIT_S for it to go, then runs and says so.
GPU_BUSY_MIB = 1024
GPU_BUSY_WAIT_S = 15.0


class Skip(Exception):
    """A step cannot run here (its reason is the message); the plan records it and goes on."""


@dataclass(frozen=True)
class Step:
    """One step: `launch(work)` -> the child to run (or raises Skip), `collect(work, log)` -> its
    results read from what it wrote (also after a failure or timeout: partial logs count), at
    most `cap_s` seconds. `log` is the flat name its output is published under (None: archived);
    `compiles`: its compile caches are worth keeping (the archive is rewritten after it)."""

    name: str
    cap_s: float
    launch: Callable[[Path], Launch]
    collect: Callable[[Path, Path], dict[str, Any]] = lambda work, log: {}
    log: str | None = None
    compiles: bool = False


@dataclass(frozen=True)
class PlanOptions:
    """Where and how long: `deadline_s` for the whole plan (the tool's 600 s less a margin for the
    start of Python and the copy back), `margin_s` kept free before it for the last publish;
    `caches_archive`: compile caches of an earlier lease, unpacked before the first step;
    `strict_caps`: refuse caps the deadline cannot hold instead of shrinking them (plan_budget)."""

    out: Path
    work: Path
    deadline_s: float = 560.0
    margin_s: float = 15.0
    steps: int = 30
    batch_tokens: int = 65536
    val_tokens: int = 65536
    seq_len: int | None = None  # None: the preset's
    train_files: str = "data/sample/sample_train_*.bin"
    val_files: str = "data/sample/sample_val_*.bin"
    record_script: Path = upstream_record.DEFAULT_SCRIPT
    jax_attention: str = "pallas"
    jaxgpt_args: tuple[str, ...] = ()  # more flags for jaxgpt's run (an A/B test of one change)
    caps: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_CAPS))
    caches_archive: Path | None = None
    strict_caps: bool = False
    tick_s: float = 10.0  # how often a running step's progress is published
    marker: str = STEP_MARKER  # the variable that marks the steps' processes (tests running side by side: their own)
    cpu: bool = False  # the CPU stand-ins (cpu_stand_ins)


# Seconds per step, in run order (= priority). jaxgpt's whole step took 47 s on the H200
# (2026-11-27; first step 21 s) and 26 s of first step on an H100: 90 s is about twice that.
# The record's script was killed at 210 s on the H200 still compiling its first training step
# (coordinate-descent tuning; 250-450 s expected cold): it gets the largest cap, so that preflight,
# jaxgpt and the record fill the 545 s before the default deadline. torch_ref (killed at 180 s the
# same way), then the attention benches (51 and 40 s there), run on the time left: with the
# record's caches warm, most of it.
DEFAULT_CAPS: dict[str, float] = {"preflight": 30, "jaxgpt": 90, "record": 420, "torch_ref": 300, "attention": 90,
                                  "mosaic": 60}


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
    """The three step times under gpu_check's names, and their ratios (None where a run gave none)."""
    times = {name: (steps.get(step) or {}).get("step_ms_median")
             for name, step in (("jax_step_ms", "jaxgpt"), ("torch_step_ms", "torch_ref"), ("record_step_ms", "record"))}
    ratios = {}
    for a, b in (("jax", "torch"), ("jax", "record"), ("torch", "record")):
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
# Reading the runs


def step_range(steps: int) -> tuple[int, int]:
    """(first, last) step whose time counts, for a run of `steps` steps traced at `trace_window`:
    after the clock reset at step 10 and the step across it, up to two steps before the trace
    (the trainers wait for the step before the trace starts)."""
    return 12, steps - 5


def trace_window(steps: int) -> tuple[int, int]:
    """The two traced steps, after the timed range and before the last (validating) step."""
    return steps - 3, steps - 2


def run_times(text: str, steps: int) -> dict[str, Any]:
    """Median step ms over `step_range`, first-step ms, peak MiB, val losses of one run's log lines."""
    parsed = gpu_check.parse_log(text)
    first, last = step_range(steps)
    deltas = gpu_check.step_deltas(text)
    timed = [deltas[s] for s in range(first, last + 1) if s in deltas]
    return {"step_ms_median": statistics.median(timed) if timed else None, "steps_timed": len(timed),
            "first_step_ms": parsed["first_step_ms"], "peak_mib": parsed["peak_mib"],
            "val_losses": parsed["val_losses"], "steps_logged": parsed["steps_logged"]}


def ranked_kernels(trace_folder: Path, title: str, steps: int, kernels_file: Path, top: int = 25) -> dict[str, Any]:
    """Rank a trace's kernels, append the table (and the per-class totals) to `kernels_file`;
    returns the class totals in ms per traced step."""
    ranking = trace_kernels.rank(trace_folder)
    per_step = trace_kernels.class_totals(ranking, steps=steps)
    table = trace_kernels.format_ranking(ranking, top=top, steps=steps)
    classes = "  ".join(f"{name} {ms:.2f}" for name, ms in per_step.items())
    with kernels_file.open("a") as sink:
        sink.write(f"## {title}\n{table}\nms/step by class: {classes}\n\n")
    return {"kernel_ms_per_step_by_class": {name: round(ms, 3) for name, ms in per_step.items()}}


# ---------------------------------------------------------------------------------------------
# The steps


def child_env(cpu: bool) -> dict[str, str]:
    return gpu_check.child_env("cpu" if cpu else "cuda")


def trainer_step(framework: str, options: PlanOptions) -> Step:
    """One trainer's CLI: record preset (smoke, fp32 on the CPU), one device, `options.steps` steps,
    the sample shards cycled, `trace_window` profiled; its kernels ranked."""
    sizes = replace(gpu_check.DRY_SIZES if options.cpu else gpu_check.GPU_SIZES, batch_tokens=options.batch_tokens,
                    val_tokens=options.val_tokens, seq_len=options.seq_len,
                    jax_attention="blocked" if options.cpu else options.jax_attention)
    profile = "{}:{}".format(*trace_window(options.steps))

    def launch(work: Path) -> Launch:
        data = {"train": options.train_files, "val": options.val_files}
        # --val-every 0: no step-0 validation, whose eval compile precedes the timed steps and measures nothing.
        command = gpu_check.trainer_command(framework, sizes, data, options.steps, 0)
        command += ["--profile", profile, "--run-id", framework, "--out-dir", str(work / framework)]
        command += list(options.jaxgpt_args) if framework == "jaxgpt" else []
        return Launch(command, env=child_env(options.cpu))

    def collect(work: Path, log: Path) -> dict[str, Any]:
        result = run_times(log.read_text(errors="replace"), options.steps) if log.is_file() else {}
        trace = work / framework / "profile" / framework
        if trace.is_dir():
            result.update(ranked_kernels(trace, f"{framework}: steps {profile} traced", 2, work / "kernels.txt"))
        return result

    return Step(framework, options.caps[framework], launch, collect, log=f"{framework}.log", compiles=True)


def record_step(options: PlanOptions) -> Step:
    """The record's own script, patched as listed, one process; its own log file appended to the
    step's log (its peak-memory line is only there)."""
    folder_name = "record_run"

    def launch(work: Path) -> Launch:
        if not options.record_script.is_file():
            raise Skip(f"no record script at {options.record_script}: `python scripts/fetch_record.py --log "
                       "../shared/upstream/2025-01-16_Sub3Min/<log>.txt` writes it; carry runs/upstream")
        run = upstream_record.prepare_run(
            options.record_script, work / folder_name, upstream_record.RecordRun(
                options.steps, options.batch_tokens, options.val_tokens, val_loss_every=0),
            str(REPO_ROOT / options.train_files), str(REPO_ROOT / options.val_files))
        (work / "record_patches.json").write_text(json.dumps({"patches": run.patches,
                                                              "environment": run.environment_changes}, indent=1))
        if options.cpu:  # the record's code needs CUDA: a stand-in prints its log format
            return Launch([sys.executable, "-c", RECORD_STAND_IN, str(options.steps)], cwd=run.folder, env=run.env)
        return Launch(run.command, cwd=run.folder, env=run.env)

    def collect(work: Path, log: Path) -> dict[str, Any]:
        if not log.is_file():
            return {}
        stdout = log.read_text(errors="replace")
        own_log = upstream_record.log_file_text(stdout, work / folder_name)
        if own_log:
            with log.open("a") as sink:
                sink.write("\n[device_plan] the record's own log file, after its source:\n" + own_log)
        result = run_times(stdout, options.steps)
        result["peak_mib"] = gpu_check.parse_log(own_log)["peak_mib"]
        patches = work / "record_patches.json"
        if patches.is_file():
            result["patches"] = [p["name"] for p in json.loads(patches.read_text())["patches"]]
        return result

    return Step("record", options.caps["record"], launch, collect, log="record.log", compiles=True)


# The CPU stand-in of the record's run: its stdout and log-file formats (RECORD.md section 9), at
# 10 ms a step, validating after the last step only as the patched script does (val_loss_every 0),
# so that the plan's reading of them is exercised without CUDA.
RECORD_STAND_IN = """
import os, sys, time
steps = int(sys.argv[1]); os.makedirs("logs", exist_ok=True); log = "logs/stand-in.txt"
print(log, flush=True)
total = 0
for step in range(steps + 1):
    if step == 10: total = 0
    if step == steps:
        print(f"step:{step}/{steps} val_loss:4.2 train_time:{total}ms step_avg:nanms", flush=True)
        break
    time.sleep(0.01); total += 10
    print(f"step:{step + 1}/{steps} train_time:{total}ms step_avg:nanms", flush=True)
open(log, "w").write("source\\n" + "=" * 100 + "\\npeak memory allocated: 123 MiB reserved: 130 MiB\\n")
"""


def module_step(name: str, options: PlanOptions, output: str, extra: list[str] | None = None) -> Step:
    """A step of jaxgpt_tools.gpu.device_steps (`python -m`), writing `output` in the work folder."""

    def launch(work: Path) -> Launch:
        command = [sys.executable, "-m", "jaxgpt_tools.gpu.device_steps", name, "--out", str(work / output)]
        command += ["--cpu"] if options.cpu else []
        return Launch(command + (extra or []), env=child_env(options.cpu))

    def collect(work: Path, log: Path) -> dict[str, Any]:
        path = work / output
        return {"results": json.loads(path.read_text())} if path.is_file() else {}

    return Step(name, options.caps[name], launch, collect)


def record_steps(options: PlanOptions) -> list[Step]:
    """The plan, most wanted first (module docstring)."""
    preflight_extra = ["--record-script", str(options.record_script), "--train-files", options.train_files,
                       "--val-files", options.val_files]
    return [module_step("preflight", options, "preflight.json", preflight_extra),
            trainer_step("jaxgpt", options), record_step(options), trainer_step("torch_ref", options),
            module_step("attention", options, "attention.json"),
            module_step("mosaic", options, "mosaic.json")]


def parse_caps(pairs: list[str], caps: dict[str, float]) -> dict[str, float]:
    """{step: seconds} from "STEP=SECONDS" strings; ValueError naming a bad pair or an unknown step."""
    parsed = {}
    for pair in pairs:
        name, _, seconds = pair.partition("=")
        if name not in caps:
            raise ValueError(f"--cap {pair!r}: unknown step {name!r}; choose from {sorted(caps)}")
        try:
            parsed[name] = float(seconds)
        except ValueError:
            raise ValueError(f"--cap {pair!r}: want STEP=SECONDS, e.g. torch_ref=300") from None
        if parsed[name] <= 0:
            raise ValueError(f"--cap {pair!r}: seconds must be positive")
    return parsed


def cpu_stand_ins(options: PlanOptions) -> PlanOptions:
    """The plan on a CPU: the smoke preset in fp32 at one 256-token sequence a step, 18 steps (a
    step range of 12..13, steps 15:16 traced), short caps; the record's run a printer of its log
    format (its script is still patched into its folder)."""
    caps: dict[str, float] = {"preflight": 60, "jaxgpt": 120, "record": 30, "torch_ref": 120, "attention": 60,
                              "mosaic": 60}
    return replace(options, cpu=True, steps=18, batch_tokens=256, seq_len=256, val_tokens=512, caps=caps)


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
              f"{summary.get('ratio_torch_over_record')}, jaxgpt / torch_ref {summary.get('ratio_jax_over_torch')}.", "",
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
