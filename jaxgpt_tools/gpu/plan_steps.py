"""The device plan's steps and options: what each step of one GPU lease runs, how long it may
take, and what the plan reads from what it leaves (the plan that runs them, publishes and keeps
the caches: `device_plan`).

The steps (`record_steps`), most wanted first:
  preflight   GPU, driver, versions, the carried inputs, the record script's SHA-256
  jaxgpt      the trainer's CLI, record preset, one device, real sample tokens; steps traced and
              their kernels ranked (the same machine's baseline)
  record      the record's own script, patched only as `upstream_record` lists (its own compile
              settings, coordinate-descent tuning included)
  torch_ref   the same as jaxgpt with torch_ref's CLI (compiled as the record compiles)
  record_readings  #15's rotary tables and #20's Newton-Schulz compiled against eager (the two
              readings the parity suite's record's-code column takes on trust; seconds)
  attention   the attention bench at the record's shapes: Pallas, FlexAttention, cuDNN, blocked
  mosaic      the Mosaic GPU kernels, alone in their process
  step_agreement  one record step's loss and gradients with the Mosaic kernels against `blocked`
  jaxgpt_mosaic   the jaxgpt step again with `--attention mosaic` (traced and ranked like jaxgpt's):
              the A/B that decides whether `auto` picks Mosaic on Hopper
The last two run on whatever time the first ones leave; a second command on the warm machine
(`--only step_agreement,jaxgpt_mosaic`) runs them on their own (artifacts/gpu/README.md).
The three step times are medians over one step range (after the compiling first step and the
clock reset at step 10, before the traced steps and the last validation): `step_range`.

`cpu_stand_ins` swaps the GPU-only parts for CPU ones of the same shape (smoke-preset trainer runs, a
record-format log printer, the attention bench's portable backend), so the plan's control flow
is tested in `make test` (tests/tools/gpu/test_device_plan.py).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from jaxgpt_tools import upstream_record
from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.common.subprocesses import Launch
from jaxgpt_tools.gpu import check as gpu_check
from jaxgpt_tools.gpu import trace_kernels

# Every step's environment carries this variable (its value: the step's name): a process of an
# earlier step or an earlier plan that escaped its process group is found by it and ended.
STEP_MARKER = "JAXGPT_DEVICE_PLAN_STEP"


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
# The Mosaic step's agreement (two record-step compiles) and its A/B run come last: they are the
# second command's, or run on time the others left.
# The readings of the records' compiled code (two small compiles) come before the benches: they
# settle what the parity suite assumes, and cost seconds.
DEFAULT_CAPS: dict[str, float] = {"preflight": 30, "jaxgpt": 90, "record": 420, "torch_ref": 300, "record_readings": 60,
                                  "attention": 90, "mosaic": 60, "step_agreement": 120, "jaxgpt_mosaic": 90}


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


def trainer_step(framework: str, options: PlanOptions, name: str | None = None, attention: str | None = None) -> Step:
    """One trainer's CLI: record preset (smoke, fp32 on the CPU), one device, `options.steps` steps,
    the sample shards cycled, `trace_window` profiled; its kernels ranked. `name` (default: the
    framework) names the step, its run and its log (published flat when it is the framework's
    own, archived otherwise); `attention`: jaxgpt's backend instead of `options.jax_attention`
    (a step of another backend is skipped on the CPU: its stand-in would be jaxgpt's again)."""
    name = name or framework
    sizes = replace(gpu_check.DRY_SIZES if options.cpu else gpu_check.GPU_SIZES, batch_tokens=options.batch_tokens,
                    val_tokens=options.val_tokens, seq_len=options.seq_len,
                    jax_attention="blocked" if options.cpu else attention or options.jax_attention)
    profile = "{}:{}".format(*trace_window(options.steps))

    def launch(work: Path) -> Launch:
        if options.cpu and attention is not None:
            raise Skip(f"needs a GPU: the {attention} backend's CPU stand-in is the jaxgpt step's own run")
        data = {"train": options.train_files, "val": options.val_files}
        # --val-every 0: no step-0 validation, whose eval compile precedes the timed steps and measures nothing.
        command = gpu_check.trainer_command(framework, sizes, data, options.steps, 0)
        command += ["--profile", profile, "--run-id", name, "--out-dir", str(work / name)]
        command += list(options.jaxgpt_args) if framework == "jaxgpt" else []
        return Launch(command, env=child_env(options.cpu))

    def collect(work: Path, log: Path) -> dict[str, Any]:
        result = run_times(log.read_text(errors="replace"), options.steps) if log.is_file() else {}
        trace = work / name / "profile" / name
        if trace.is_dir():
            result.update(ranked_kernels(trace, f"{name}: steps {profile} traced", 2, work / "kernels.txt"))
        return result

    return Step(name, options.caps[name], launch, collect, log=f"{name}.log" if name == framework else None,
                compiles=True)


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
            module_step("record_readings", options, "record_readings.json",
                        ["--record-script", str(options.record_script)]),
            module_step("attention", options, "attention.json"),
            module_step("mosaic", options, "mosaic.json"),
            module_step("step_agreement", options, "step_agreement.json"),
            # not among the CPU stand-ins: there it would be the jaxgpt step's run again
            *([] if options.cpu else [trainer_step("jaxgpt", options, name="jaxgpt_mosaic", attention="mosaic")])]


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
    caps: dict[str, float] = {"preflight": 60, "jaxgpt": 120, "record": 30, "torch_ref": 120, "record_readings": 60,
                              "attention": 60, "mosaic": 60, "step_agreement": 90, "jaxgpt_mosaic": 90}
    return replace(options, cpu=True, steps=18, batch_tokens=256, seq_len=256, val_tokens=512, caps=caps)
