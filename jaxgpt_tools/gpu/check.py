"""What jaxgpt and torch_ref do on a lent GPU, written to gpu_check.{json,md} (the library of
`scripts/gpu_check.py`, which says how to run it).

Parts, each guarded (a failure is recorded and the others still run):
  environment  versions, device, memory
  gpu_tests    every `gpu`-marked test of both packages (pytest in a subprocess)
  parity       torch_ref on CUDA (compiled flex_attention) vs jaxgpt on the GPU: logits and loss of
               one record-size model (fp32 policy, perturbed init) on a sample val sequence
  train        the two trainers' own CLIs and the record's own script, record preset on one
               device (1 x 65,536 tokens per step, sample shards cycled): jaxgpt (attention
               `pallas`; `blocked` alone in the dry run), torch_ref (torch.compile) and the
               record's script (upstream_record: fetched into runs/upstream/, changed only as
               listed there, one process; skipped with the reason when absent, prepared but not
               run on a CPU), one after the other, twice over without --quick (A B C A B C, then
               jaxgpt with `blocked`); per-step times from their log lines (median of the timed
               steps, which exclude the first 10 and validation, RECORD.md section 9), first-step
               (compile) time, peak memory, tokens per second, final validation loss
  schedule     (only when asked) the record preset's whole schedule (1,393 steps, validation every
               125) for each trainer asked, from one initial state written here (torch_ref's seeded
               init in the record's format, its SHA-256 reported), with a final checkpoint: log
               lines, wall and training time, peak memory, val losses side by side, and the two
               metrics files plotted when both are in the same output folder
The dry run (DRY_SIZES) runs the same code on the CPU at tiny sizes (the smoke preset, short
sequences, no pytest) and writes the same files, so the command itself is tested in CI.
gpu_check.md, the report as a page, is written by `check_report`.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jaxgpt_tools import upstream_record
from jaxgpt_tools.common.artifacts import REPO_ROOT, repo_relative_paths
from jaxgpt_tools.common.log import logger
from jaxgpt_tools.common.machine import describe
from jaxgpt_tools.common.subprocesses import Launch, log_tail, run_streamed
from jaxgpt_tools.gpu.check_report import markdown
from jaxgpt_tools.reports import plot_runs

STEP_LINE = re.compile(r"^step:(\d+)/(\d+) train_time:(\d+)ms")
VAL_LINE = re.compile(r"^step:(\d+)/(\d+) val_loss:([0-9.naninf]+)")
PEAK_LINE = re.compile(r"^peak memory allocated: (\d+) MiB")


@dataclass(frozen=True)
class Sizes:
    """What the run uses; the dry run shrinks everything to CPU sizes."""

    preset: str
    batch_tokens: int
    steps: int
    val_tokens: int
    parity_seq_len: int
    parity_window: int
    jax_platform: str
    torch_device: str
    jax_attention: str
    dtype: str | None  # the trainers' --dtype; None keeps the preset's (the record's bf16/FP8 policy)
    schedule_steps: int | None  # the schedule part's steps and validation interval; None: the preset's
    schedule_val_every: int | None
    seq_len: int | None = None  # the trainers' --seq-len; None keeps the preset's


# 30 steps, the shards cycled: the sample shards hold 11 record batches of GPT-2 tokens (31 of the
# byte tokens a machine without the tokenizer files builds).
GPU_SIZES = Sizes("record", 65536, 30, 65536, 8192, 14, "cuda", "cuda", "pallas", None, None, None)
# The dry run tests this script, not the kernel or the policy: on a CPU `pallas` runs in Pallas's
# interpreter and torch's bf16 is emulated (minutes per torch_ref step); both have their own tests.
# The smoke preset (the record's per-layer patterns in 4 layers) at one 256-token sequence a
# step: the dry run's time is its compiles and per-op overheads, which its 4 layers cut to about
# a third of the tiny preset's 12; the steps themselves are what a GPU times.
DRY_SIZES = Sizes("smoke", 256, 4, 512, 256, 2, "cpu", "cpu", "blocked", "fp32", 4, 2, seq_len=256)


say = logger("gpu_check")


def guarded(name: str, part: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one part; a failure becomes {"ok": false, "error": ...} instead of ending the run."""
    say(f"{name} ...")
    start = time.perf_counter()
    try:
        result = {"ok": True, **part()}
    except Exception as error:  # noqa: BLE001 - every failure is recorded, the run goes on
        result = {"ok": False, "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc(limit=8)}
    result["seconds"] = round(time.perf_counter() - start, 1)
    say(f"{name} {'ok' if result['ok'] else 'FAILED: ' + result['error'][:300]} ({result['seconds']} s)")
    return result


def child_env(jax_platform: str) -> dict[str, str]:
    """Environment of the subprocesses: the repository on PYTHONPATH, JAX on the wanted platform
    (the tests' conftest defaults JAX to the CPU), unbuffered output."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", JAX_PLATFORMS=jax_platform)
    env.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)  # the trainers keep JAX's default (this process's is off)
    if jax_platform == "cpu":  # the dry run: torch's worker threads spin against other work on a small CPU
        env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return env


# ---------------------------------------------------------------------------------------------
# Parts


def gpu_tests(timeout_s: float, out: Path) -> dict[str, Any]:
    """Every `gpu`-marked test (pytest in a child; its output in out/gpu_tests.log, kept on a timeout)."""
    command = [sys.executable, "-m", "pytest", "tests", "parity_tests", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    log = out / "gpu_tests.log"
    status, code = run_streamed(Launch(command, REPO_ROOT, child_env("cuda")), log, timeout_s)
    lines = log.read_text(errors="replace").strip().splitlines()
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed|error)", line)),
                   lines[-1] if lines else "")
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    if status == "timed_out":
        raise TimeoutError(f"the gpu-marked tests ran past {timeout_s:.0f} s ({len(failed)} failed by then; output in {log})")
    return {"returncode": code, "summary": summary, "failed": failed, "tail": "\n".join(lines[-40:])}


def parity(sizes: Sizes, val_glob: str) -> dict[str, Any]:
    """Same weights and tokens in both frameworks (fp32 policy, eval): loss and logits."""
    import glob

    import numpy as np
    import torch

    from jaxgpt import presets
    from jaxgpt.run import convert
    from jaxgpt.shards import read_shard
    from jaxgpt_tools.parity import compare_checkpoint as compare
    from torch_ref import model as torch_model
    from torch_ref import presets as torch_presets

    model_cfg = presets.get_preset(sizes.preset).model
    torch.manual_seed(0)
    gpt = torch_model.GPT.from_config(torch_presets.get_preset(sizes.preset).model)
    # The record zero-initialises three projections and the head; perturb every weight so that
    # all layers and the logits carry signal.
    state_dict = {name: value + 0.01 * torch.randn_like(value) if value.is_floating_point() else value
                  for name, value in gpt.state_dict().items()}
    tokens = read_shard(sorted(glob.glob(val_glob))[0])
    chunk = np.asarray(tokens[: sizes.parity_seq_len + 1], dtype=np.int32)
    inputs, targets = chunk[:-1], chunk[1:]
    config = convert.model_config_from_state_dict(
        {k: v.numpy() for k, v in state_dict.items()}, model_cfg, dtype_policy="fp32",
        max_window_blocks=sizes.parity_window,
    )
    start = time.perf_counter()
    torch_logits, torch_loss = compare.TorchModel(state_dict, config, sizes.parity_window,
                                                  device=sizes.torch_device).logits_and_loss(inputs, targets)
    torch_s = time.perf_counter() - start
    start = time.perf_counter()
    jax_logits, jax_loss = compare.JaxModel(state_dict, config, sizes.parity_window).logits_and_loss(inputs, targets)
    jax_s = time.perf_counter() - start
    diff = np.abs(jax_logits - torch_logits)
    return {"seq_len": sizes.parity_seq_len, "window_blocks": sizes.parity_window, "torch_loss": torch_loss,
            "jax_loss": jax_loss, "loss_rel_diff": abs(jax_loss - torch_loss) / abs(torch_loss),
            "max_abs_logit_diff": float(diff.max()), "max_abs_logit": float(np.abs(torch_logits).max()),
            "argmax_agreement": float(np.mean(jax_logits.argmax(-1) == torch_logits.argmax(-1))),
            "torch_seconds": round(torch_s, 1), "jax_seconds": round(jax_s, 1)}


def step_deltas(text: str) -> dict[int, int]:
    """step -> its own ms, from the cumulative `train_time` of consecutive step lines; the step
    across the record's clock reset after step 10 (RECORD.md section 9) has none."""
    # Imported here, after run_check has set the platform jax starts on.
    from jaxgpt.run.runlog import CLOCK_RESET_STEP

    cumulative = {int(match[1]): int(match[3]) for line in text.splitlines() if (match := STEP_LINE.match(line))}
    return {s: cumulative[s] - cumulative[s - 1] for s in sorted(cumulative)
            if s - 1 in cumulative and s != CLOCK_RESET_STEP + 1}


def parse_log(text: str) -> dict[str, Any]:
    """Per-step times, first-step time, val losses and peak memory from the record's log lines."""
    from jaxgpt.run.runlog import CLOCK_RESET_STEP

    cumulative: dict[int, int] = {}
    val: dict[int, float] = {}
    peak = None
    for line in text.splitlines():
        if match := STEP_LINE.match(line):
            cumulative[int(match[1])] = int(match[3])
        elif match := VAL_LINE.match(line):
            val[int(match[1])] = float(match[3])
        elif match := PEAK_LINE.match(line):
            peak = int(match[1])
    # The record times the steps after the clock reset; a run too short for those (the dry run)
    # falls back to steps 2..10, which follow the compiling first step.
    deltas = step_deltas(text)
    timed = [ms for s, ms in deltas.items() if s > CLOCK_RESET_STEP + 1] or list(deltas.values())
    return {"first_step_ms": cumulative.get(1), "step_ms_median": statistics.median(timed) if timed else None,
            "step_ms": timed, "val_losses": val, "peak_mib": peak, "steps_logged": len(cumulative),
            "train_time_ms": cumulative[max(cumulative)] if cumulative else None}


def trainer_command(framework: str, sizes: Sizes, data: dict[str, str], steps: int | None,
                    val_every: int | None) -> list[str]:
    """One trainer's command line on one device, sample shards cycled (output flags added by the caller)."""
    common = ["--preset", sizes.preset, "--devices", "1", "--batch-tokens", str(sizes.batch_tokens),
              "--val-tokens", str(sizes.val_tokens), "--train-files", data["train"], "--val-files", data["val"],
              "--cycle-data"]
    common += ["--steps", str(steps)] if steps else []
    common += ["--val-every", str(val_every)] if val_every is not None else []  # 0: only after the last step
    common += ["--dtype", sizes.dtype] if sizes.dtype else []
    common += ["--seq-len", str(sizes.seq_len)] if sizes.seq_len else []
    if framework == "jaxgpt":
        return [sys.executable, "-m", "jaxgpt.train", *common, "--no-progress", "--attention", sizes.jax_attention]
    return [sys.executable, "-m", "torch_ref.train", *common, "--device", sizes.torch_device]


def run_logged(command: list[str], log: Path, timeout_s: float, cwd: Path = REPO_ROOT,
               env: dict[str, str] | None = None) -> str:
    """Run a command, its output streamed into `log` (kept on a timeout too); returns the output.
    RuntimeError with its last lines when it fails, TimeoutError when it outlives `timeout_s`."""
    say("  " + " ".join(command[1:]))
    status, code = run_streamed(Launch(command, cwd, env), log, timeout_s)
    name = Path(command[1]).name if command[1] != "-m" else command[2]
    if status == "timed_out":
        raise TimeoutError(f"{name} ran past {timeout_s:.0f} s and was stopped (its output so far in {log})")
    if status == "failed":
        raise RuntimeError(f"{name} exited {code}: {log_tail(log, 1)} (whole output in {log})")
    return log.read_text(errors="replace")


def _timed(result: dict[str, Any], batch_tokens: int, command: list[str]) -> dict[str, Any]:
    if result["step_ms_median"]:
        result["tokens_per_s"] = round(batch_tokens / (result["step_ms_median"] / 1000))
    result["command"] = " ".join(command[1:])
    return result


def train_run(framework: str, sizes: Sizes, data: dict[str, str], out: Path, attention: str | None,
              timeout_s: float) -> dict[str, Any]:
    """One trainer's CLI for `sizes.steps` steps; its log lines parsed."""
    run_sizes = replace(sizes, jax_attention=attention) if attention else sizes
    command = trainer_command(framework, run_sizes, data, sizes.steps, sizes.steps)
    command += ["--out-dir", str(out / (f"jaxgpt_{attention}" if framework == "jaxgpt" else "torch_ref"))]
    stdout = run_logged(command, out / f"{framework}{'_' + attention if attention else ''}.log", timeout_s,
                        env=child_env(sizes.jax_platform))
    return _timed(parse_log(stdout), sizes.batch_tokens, command)


def record_run(sizes: Sizes, data: dict[str, str], out: Path, script: Path, timeout_s: float) -> dict[str, Any]:
    """The record's own script, patched as upstream_record lists, one process on one GPU; its
    step lines parsed as the trainers' (peak memory from its own log file). On a CPU the run
    folder is prepared and checked, and the run skipped: the script needs CUDA."""
    run = upstream_record.prepare_run(script, out / "record", upstream_record.RecordRun(
        sizes.steps, sizes.batch_tokens, sizes.val_tokens), data["train"], data["val"])
    listed = {"patches": run.patches, "environment_changes": run.environment_changes, "script": str(script)}
    if sizes.torch_device != "cuda":
        return {**listed, "skipped": "the record's script needs CUDA (it asserts it at import); patched and "
                                     f"compiled only, in {run.folder}"}
    stdout = run_logged(run.command, out / "record.log", timeout_s, cwd=run.folder, env=run.env)
    result = parse_log(stdout)
    result["peak_mib"] = parse_log(upstream_record.log_file_text(stdout, run.folder))["peak_mib"]
    return {**_timed(result, sizes.batch_tokens, run.command), **listed}


def train_comparison(sizes: Sizes, data: dict[str, str], out: Path, quick: bool, timeout_s: float,
                     record_script: Path) -> dict[str, Any]:
    """jaxgpt, torch_ref and the record's script (when fetched) one after the other (A B C A B C
    and jaxgpt with `blocked` without --quick); medians of their median steps and the ratios."""
    runs: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("jaxgpt", lambda: train_run("jaxgpt", sizes, data, out, sizes.jax_attention, timeout_s)),
        ("torch_ref", lambda: train_run("torch_ref", sizes, data, out, None, timeout_s))]
    record_skipped = None  # why the record leg timed nothing: {"skipped": reason, ...}
    if not record_script.is_file():
        record_skipped = {"skipped": f"no record script at {record_script} (python scripts/fetch_record.py writes "
                                     "it; a GPU machine gets it through the device tool's carry)"}
    else:
        runs.append(("record", lambda: record_run(sizes, data, out, record_script, timeout_s)))
    if not quick:
        runs = runs + runs + [("jaxgpt_blocked", lambda: train_run("jaxgpt", sizes, data, out, "blocked", timeout_s))]
    results: dict[str, list[dict[str, Any]]] = {}
    failures: dict[str, list[str]] = {}
    for key, run in runs:
        try:  # one run at a time: a failed or timed-out run keeps the others' numbers
            result = run()
        except Exception as error:  # noqa: BLE001 - recorded with its reason, the next run goes on
            failures.setdefault(key, []).append(f"{type(error).__name__}: {error}")
            say(f"  {key} FAILED: {str(error)[:300]}")
            continue
        if "skipped" in result:
            record_skipped = result
            continue
        results.setdefault(key, []).append(result)
    summary: dict[str, Any] = {"runs": results, "jax_attention": sizes.jax_attention}
    medians = {key: statistics.median(r["step_ms_median"] for r in runs_ if r["step_ms_median"])
               for key, runs_ in results.items() if any(r["step_ms_median"] for r in runs_)}
    for key, name in (("jaxgpt", "jax"), ("torch_ref", "torch"), ("record", "record")):
        summary[f"{name}_step_ms"] = medians.get(key)
        summary[f"{name}_peak_mib"] = results[key][0]["peak_mib"] if key in results else None
    for a, b in (("jax", "torch"), ("jax", "record"), ("torch", "record")):
        if summary[f"{a}_step_ms"] and summary[f"{b}_step_ms"]:
            summary[f"ratio_{a}_over_{b}"] = round(summary[f"{a}_step_ms"] / summary[f"{b}_step_ms"], 3)
    if record_skipped:
        summary["record_skipped"] = record_skipped
    if failures:
        summary["failed_runs"] = failures
    return summary


def initial_state(sizes: Sizes, path: Path) -> str:
    """torch_ref's seeded init (seed 0, built on the CPU) of the preset's model under the run's dtype
    policy, saved in the record's format {'model': state_dict}; the SHA-256 of its tensors' bytes
    in name order (the same on every machine with the same torch, which two calls can compare)."""
    import hashlib

    import torch

    import torch_ref.config as torch_cfg
    from torch_ref import loop as torch_train
    from torch_ref import presets as torch_presets

    model_config = torch_presets.get_preset(sizes.preset).model
    if sizes.dtype:
        model_config = torch_cfg.with_fields(model_config, dtype_policy=sizes.dtype)
    state = torch_train.build_model(model_config, sizes.batch_tokens, 0, None, torch.device("cpu")).state_dict()
    torch.save({"model": state}, path)
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def val_losses(metrics: Path) -> dict[int, float]:
    """step -> val loss from a trainer's metrics JSONL."""
    records = (json.loads(line) for line in metrics.read_text().splitlines() if line.strip())
    return {int(r["step"]): float(r["val_loss"]) for r in records if r.get("kind") == "val"}


def schedule(sizes: Sizes, data: dict[str, str], out: Path, scratch: Path, trainers: list[str],
             timeout_s: float) -> dict[str, Any]:
    """The preset's whole schedule for each trainer in `trainers`, from one initial state, with a
    final checkpoint (in `scratch`: large files); logs and metrics in out/schedule/. When both
    trainers' metrics are there (this call's or an earlier one's), their val losses side by side
    and plotted (jaxgpt_tools.reports.plot_runs)."""
    folder = out / "schedule"
    folder.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    init = scratch / "init.pt"
    result: dict[str, Any] = {"init_sha256": initial_state(sizes, init), "runs": {}}
    for framework in trainers:
        run_id = f"schedule-{framework}"
        command = trainer_command(framework, sizes, data, sizes.schedule_steps, sizes.schedule_val_every)
        command += ["--init-from", str(init), "--run-id", run_id, "--out-dir", str(scratch / framework)]
        checkpoint = scratch / framework / "checkpoints"  # both trainers: <out-dir>/checkpoints/<run id>
        command += ["--save-checkpoint"]
        start = time.perf_counter()
        stdout = run_logged(command, folder / f"{framework}.log", timeout_s, env=child_env(sizes.jax_platform))
        run = _timed(parse_log(stdout), sizes.batch_tokens, command)
        run["wall_s"] = round(time.perf_counter() - start, 1)
        for suffix in ("txt", "jsonl"):  # the trainer's own log and metrics, beside this report
            (folder / f"{framework}.{suffix}").write_text((scratch / framework / "logs" / f"{run_id}.{suffix}").read_text())
        files = [checkpoint] if checkpoint.is_file() else [p for p in checkpoint.rglob("*") if p.is_file()]
        run["checkpoint"] = {"path": str(checkpoint), "bytes": sum(p.stat().st_size for p in files)}
        result["runs"][framework] = run
    metrics = {name: folder / f"{name}.jsonl" for name in ("jaxgpt", "torch_ref") if (folder / f"{name}.jsonl").is_file()}
    if len(metrics) == 2:
        jax_val, torch_val = val_losses(metrics["jaxgpt"]), val_losses(metrics["torch_ref"])
        steps = sorted(set(jax_val) & set(torch_val))
        result["val"] = {"steps": steps, "jaxgpt": [jax_val[s] for s in steps], "torch_ref": [torch_val[s] for s in steps],
                         "max_abs_diff": max((abs(jax_val[s] - torch_val[s]) for s in steps), default=None)}
        try:
            runs = [plot_runs.read_run(metrics["jaxgpt"]), plot_runs.read_run(metrics["torch_ref"])]
            result["plot"] = str(plot_runs.plot_runs(runs, folder / "val_curves.png"))
        except ImportError as error:  # no matplotlib on the GPU machine: plot where the files come back
            result["plot"] = f"not drawn: {error}"
    return result


PARTS = ("gpu_tests", "train", "parity", "schedule")
DEFAULT_PARTS = ("gpu_tests", "train", "parity")


def check_request(parts: tuple[str, ...], schedule_trainers: tuple[str, ...]) -> None:
    """ValueError for parts or schedule trainers that do not exist (a usage error)."""
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}; choose from {PARTS}")
    if not schedule_trainers or set(schedule_trainers) - {"jaxgpt", "torch_ref"}:
        raise ValueError(f"schedule trainers must be jaxgpt and/or torch_ref, got {list(schedule_trainers)}")


def run_check(*, out: Path | None, quick: bool, dry_run: bool, train_files: str, val_files: str, timeout_s: float,
              command: str, parts: tuple[str, ...] = DEFAULT_PARTS, record_script: Path = upstream_record.DEFAULT_SCRIPT,
              schedule_trainers: tuple[str, ...] = ("jaxgpt", "torch_ref"), scratch: Path | None = None) -> int:
    """The asked parts (`environment` always), then gpu_check.json and gpu_check.md in `out`
    (default runs/gpu_check/<device name>); 0 when every part run passed, else 1. `scratch` holds
    the schedule's large files (initial state, checkpoints; default out/scratch)."""
    check_request(parts, schedule_trainers)
    sizes = DRY_SIZES if dry_run else GPU_SIZES
    os.environ["JAX_PLATFORMS"] = sizes.jax_platform  # before jax is imported by a part
    # JAX would otherwise reserve 75% of the GPU in this process and starve the trainers it starts.
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    started, start = time.strftime("%Y-%m-%d %H:%M:%S %Z"), time.perf_counter()
    env = guarded("environment", describe)
    device_name = re.sub(r"[^A-Za-z0-9._-]+", "_", env.get("gpu") or "cpu")
    out = out or REPO_ROOT / "runs" / "gpu_check" / device_name
    out.mkdir(parents=True, exist_ok=True)
    data = {"train": train_files, "val": val_files}
    report: dict[str, Any] = {"command": command, "started": started, "dry_run": dry_run, "quick": quick,
                              "environment": env}

    def write_report() -> None:
        """Rewritten after every part: a run killed at its limit keeps the parts that finished."""
        report["total_seconds"] = round(time.perf_counter() - start, 1)
        # Paths inside the repository written from its root: the report may be committed as it is.
        for name, text in (("gpu_check.json", json.dumps(report, indent=1, default=str) + "\n"),
                           ("gpu_check.md", markdown(report))):
            partial = out / f".{name}.partial"
            partial.write_text(repo_relative_paths(text))
            partial.replace(out / name)

    write_report()
    # The trainers run before this process puts models on the GPU (parity), so they find it empty.
    legs: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("gpu_tests", (lambda: {"summary": "skipped (dry run)"}) if dry_run else (lambda: gpu_tests(timeout_s, out))),
        ("train", lambda: train_comparison(sizes, data, out, quick or dry_run, timeout_s, record_script)),
        ("schedule", lambda: schedule(sizes, data, out, scratch or out / "scratch", list(schedule_trainers), timeout_s)),
        ("parity", lambda: parity(sizes, val_files))]
    for name, leg in legs:
        if name in parts:
            report[name] = guarded(name, leg)
            write_report()
    say(f"wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
    passed = all(report[part].get("ok") and not report[part].get("failed_runs") for part in ("environment", *parts))
    return 0 if passed else 1
