"""What jaxgpt and torch_ref do on a lent GPU, written to gpu_check.{json,md} (the library of
`scripts/gpu_check.py`, which says how to run it).

Parts, each guarded (a failure is recorded and the others still run):
  environment  versions, device, memory
  gpu_tests    every `gpu`-marked test of both packages (pytest in a subprocess)
  parity       torch_ref on CUDA (compiled flex_attention) vs jaxgpt on the GPU: logits and loss of
               one record-size model (fp32 policy, perturbed init) on a sample val sequence
  train        the two trainers' own CLIs, record preset on one device (1 x 65,536 tokens per
               step, sample shards cycled): jaxgpt (attention `pallas`, and `blocked` unless
               --quick; `blocked` alone in the dry run) and torch_ref (torch.compile), run one
               after the other, A B A B without --quick; per-step times from their log lines (median of the timed steps, which
               exclude the first 10 and validation, RECORD.md section 9), first-step (compile)
               time, peak memory, tokens per second, final validation loss
The dry run (DRY_SIZES) runs the same code on the CPU at tiny sizes (tiny preset, short sequences,
no pytest) and writes the same files, so the command itself is tested in CI.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from jaxgpt_tools.machine import describe

ROOT = Path(__file__).resolve().parents[1]
STEP_LINE = re.compile(r"^step:(\d+)/(\d+) train_time:(\d+)ms")
VAL_LINE = re.compile(r"^step:(\d+)/(\d+) val_loss:([0-9.naninf]+)")
PEAK_LINE = re.compile(r"^peak memory allocated: (\d+) MiB")
TIMED_FROM_STEP = 10  # the record's clock starts after step 10 (RECORD.md section 9)


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


# 30 steps: torch_ref does not cycle its shards, and the sample shards hold 31 record batches.
GPU_SIZES = Sizes("record", 65536, 30, 65536, 8192, 14, "cuda", "cuda", "pallas", None)
# The dry run tests this script, not the kernel or the policy: on a CPU `pallas` runs in Pallas's
# interpreter and torch's bf16 is emulated (minutes per torch_ref step); both have their own tests.
DRY_SIZES = Sizes("tiny", 1024, 4, 2048, 256, 2, "cpu", "cpu", "blocked", "fp32")


def say(message: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {message}", flush=True)


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
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


# ---------------------------------------------------------------------------------------------
# Parts


def gpu_tests(timeout_s: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "pytest", "tests", "parity_tests", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=ROOT, env=child_env("cuda"), capture_output=True, text=True, timeout=timeout_s)
    lines = (done.stdout + done.stderr).strip().splitlines()
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed|error)", line)),
                   lines[-1] if lines else "")
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    return {"returncode": done.returncode, "summary": summary,
            "failed": failed, "tail": "\n".join(lines[-40:])}


def parity(sizes: Sizes, val_glob: str) -> dict[str, Any]:
    """Same weights and tokens in both frameworks (fp32 policy, eval): loss and logits."""
    import glob

    import numpy as np
    import torch

    from jaxgpt import config as cfg
    from jaxgpt import convert
    from jaxgpt.data import read_shard
    from jaxgpt_tools import compare_checkpoint as compare
    from torch_ref import model as torch_model

    model_cfg = cfg.get_preset(sizes.preset).model
    torch.manual_seed(0)
    gpt = torch_model.GPT(model_cfg.vocab_size, model_cfg.num_layers, model_cfg.num_heads, model_cfg.model_dim)
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
    torch_logits, torch_loss = compare.TorchModel(state_dict, config, sizes.parity_window, bf16=False,
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


def parse_log(text: str) -> dict[str, Any]:
    """Per-step times, first-step time, val losses and peak memory from the record's log lines."""
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
    # Consecutive train_time lines differ by one step's time, except across the clock reset
    # after step 10. The record times the steps after it; a run too short for those (the dry
    # run) falls back to steps 2..10, which follow the compiling first step.
    deltas = {s: cumulative[s] - cumulative[s - 1] for s in sorted(cumulative)
              if s - 1 in cumulative and s != TIMED_FROM_STEP + 1}
    timed = [ms for s, ms in deltas.items() if s > TIMED_FROM_STEP + 1] or list(deltas.values())
    return {"first_step_ms": cumulative.get(1), "step_ms_median": statistics.median(timed) if timed else None,
            "step_ms": timed, "val_losses": val, "peak_mib": peak, "steps_logged": len(cumulative)}


def train_run(framework: str, sizes: Sizes, data: dict[str, str], out: Path, attention: str | None,
              timeout_s: float) -> dict[str, Any]:
    """One trainer's CLI for `sizes.steps` steps; its log lines parsed."""
    common = ["--preset", sizes.preset, "--devices", "1", "--batch-tokens", str(sizes.batch_tokens),
              "--steps", str(sizes.steps), "--val-every", str(sizes.steps), "--val-tokens", str(sizes.val_tokens),
              "--train-files", data["train"], "--val-files", data["val"]]
    if sizes.dtype:
        common += ["--dtype", sizes.dtype]
    if framework == "jaxgpt":
        command = [sys.executable, "-m", "jaxgpt.train", *common, "--cycle-data", "--no-progress",
                   "--attention", attention, "--out-dir", str(out / f"jaxgpt_{attention}")]
    else:
        command = [sys.executable, "-m", "torch_ref.train", *common, "--device", sizes.torch_device,
                   "--log-dir", str(out / "torch_ref")]
    say("  " + " ".join(command[1:]))
    done = subprocess.run(command, cwd=ROOT, env=child_env(sizes.jax_platform), capture_output=True, text=True,
                          timeout=timeout_s)
    text = done.stdout + done.stderr
    (out / f"{framework}{'_' + attention if attention else ''}.log").write_text(text)
    if done.returncode != 0:
        raise RuntimeError(f"{framework} exited {done.returncode}: {text.strip().splitlines()[-1:]}")
    result = parse_log(done.stdout)
    if result["step_ms_median"]:
        result["tokens_per_s"] = round(sizes.batch_tokens / (result["step_ms_median"] / 1000))
    result["command"] = " ".join(command[1:])
    return result


def train_comparison(sizes: Sizes, data: dict[str, str], out: Path, quick: bool, timeout_s: float) -> dict[str, Any]:
    runs = [("jaxgpt", sizes.jax_attention), ("torch_ref", None)]
    if not quick:  # A B A B, and jaxgpt's portable backend for reference
        runs = runs + runs + [("jaxgpt", "blocked")]
    results: dict[str, list[dict[str, Any]]] = {}
    for framework, attention in runs:
        key = framework if attention in (None, sizes.jax_attention) else f"{framework}_{attention}"
        results.setdefault(key, []).append(train_run(framework, sizes, data, out, attention, timeout_s))
    summary: dict[str, Any] = {"runs": results, "jax_attention": sizes.jax_attention}
    medians = {key: statistics.median(r["step_ms_median"] for r in runs_ if r["step_ms_median"])
               for key, runs_ in results.items() if any(r["step_ms_median"] for r in runs_)}
    summary["jax_step_ms"] = medians.get("jaxgpt")
    summary["torch_step_ms"] = medians.get("torch_ref")
    if summary["jax_step_ms"] and summary["torch_step_ms"]:
        summary["ratio_jax_over_torch"] = round(summary["jax_step_ms"] / summary["torch_step_ms"], 3)
    summary["jax_peak_mib"] = results["jaxgpt"][0]["peak_mib"]
    summary["torch_peak_mib"] = results["torch_ref"][0]["peak_mib"]
    summary["plan_peak_mib"] = None  # the compile-only H100 plan, once a tool provides it here
    return summary


# ---------------------------------------------------------------------------------------------
# Report


def markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = [f"# gpu_check: {env.get('gpu', env.get('backend', '?'))}", "",
             f"Command: `{report['command']}` ({report['started']}, {report['total_seconds']} s in all)", ""]
    if report["dry_run"]:
        lines += ["**Dry run on the CPU at tiny sizes: these numbers say nothing about a GPU.**", ""]
    lines += ["## Environment", "", "```", json.dumps({k: v for k, v in env.items() if k != "ok"}, indent=1), "```", ""]
    tests = report["gpu_tests"]
    lines += ["## gpu-marked tests", "", f"- {tests.get('summary') or tests.get('error', 'skipped')}"]
    lines += [f"- {line}" for line in tests.get("failed", [])] + [""]
    par = report["parity"]
    lines += ["## Parity (fp32 policy, eval, same weights and tokens)", ""]
    if par.get("ok"):
        lines += [f"T = {par['seq_len']}, window {par['window_blocks']} blocks: torch_ref loss {par['torch_loss']:.6f}, "
                  f"jaxgpt loss {par['jax_loss']:.6f} (rel diff {par['loss_rel_diff']:.2e}); max |logit diff| "
                  f"{par['max_abs_logit_diff']:.3e} of max |logit| {par['max_abs_logit']:.3f}; argmax agreement "
                  f"{par['argmax_agreement']:.4f}", ""]
    else:
        lines += [f"FAILED: {par.get('error')}", ""]
    train = report["train"]
    lines += ["## Training step, one device (record preset, 1 x 65,536 tokens per step)", ""]
    if train.get("ok"):
        lines += ["| run | median step ms | first step (compile) ms | peak MiB | tokens/s | final val loss |",
                  "|---|---|---|---|---|---|"]
        for key, runs in train["runs"].items():
            for run in runs:
                final_val = list(run["val_losses"].values())[-1] if run["val_losses"] else None
                lines.append(f"| {key} | {run['step_ms_median']} | {run['first_step_ms']} | {run['peak_mib']} | "
                             f"{run.get('tokens_per_s')} | {final_val} |")
        lines += ["", f"jax_step_ms {train['jax_step_ms']}, torch_step_ms {train['torch_step_ms']}, ratio "
                  f"{train.get('ratio_jax_over_torch')} (jaxgpt with attention `{train.get('jax_attention')}`; torch_ref compiled)", ""]
    else:
        lines += [f"FAILED: {train.get('error')}", ""]
    return "\n".join(lines) + "\n"


def run_check(*, out: Path | None, quick: bool, dry_run: bool, train_files: str, val_files: str, timeout_s: float,
              command: str) -> int:
    """Every part, then gpu_check.json and gpu_check.md in `out` (default runs/gpu_check/<device
    name>); 0 when every part passed, else 1."""
    sizes = DRY_SIZES if dry_run else GPU_SIZES
    os.environ["JAX_PLATFORMS"] = sizes.jax_platform  # before jax is imported by a part
    # JAX would otherwise reserve 75% of the GPU in this process and starve the trainers it starts.
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    started, start = time.strftime("%Y-%m-%d %H:%M:%S %Z"), time.perf_counter()
    env = guarded("environment", describe)
    device_name = re.sub(r"[^A-Za-z0-9._-]+", "_", env.get("gpu") or "cpu")
    out = out or ROOT / "runs" / "gpu_check" / device_name
    out.mkdir(parents=True, exist_ok=True)
    data = {"train": train_files, "val": val_files}
    report: dict[str, Any] = {"command": command, "started": started, "dry_run": dry_run, "quick": quick,
                              "environment": env}
    report["gpu_tests"] = ({"ok": True, "summary": "skipped (dry run)"} if dry_run
                           else guarded("gpu_tests", lambda: gpu_tests(timeout_s)))
    # The trainers run before this process puts models on the GPU (parity), so they find it empty.
    report["train"] = guarded("train", lambda: train_comparison(sizes, data, out, quick or dry_run, timeout_s))
    report["parity"] = guarded("parity", lambda: parity(sizes, val_files))
    report["total_seconds"] = round(time.perf_counter() - start, 1)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "gpu_check.md").write_text(markdown(report))
    say(f"wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
    return 0 if all(report[part].get("ok") for part in ("environment", "gpu_tests", "parity", "train")) else 1
