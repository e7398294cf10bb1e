"""gpu_check's report as a page (gpu_check.md): the environment, the gpu-marked tests, parity,
the training-step comparison and the whole schedule, each part's section from its entry in the
report dict that `check.run_check` writes to gpu_check.json.
"""

from __future__ import annotations

import json
from typing import Any


def markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = [f"# gpu_check: {env.get('gpu', env.get('backend', '?'))}", "",
             f"Command: `{report['command']}` ({report['started']}, {report['total_seconds']} s in all)", ""]
    if report["dry_run"]:
        lines += ["**Dry run on the CPU at tiny sizes: these numbers say nothing about a GPU.**", ""]
    lines += ["## Environment", "", "```", json.dumps({k: v for k, v in env.items() if k != "ok"}, indent=1), "```", ""]
    if "gpu_tests" in report:
        tests = report["gpu_tests"]
        lines += ["## gpu-marked tests", "", f"- {tests.get('summary') or tests.get('error', 'skipped')}"]
        lines += [f"- {line}" for line in tests.get("failed", [])] + [""]
    if "parity" in report:
        lines += parity_markdown(report["parity"])
    if "train" in report:
        lines += train_markdown(report["train"])
    if "schedule" in report:
        lines += schedule_markdown(report["schedule"])
    return "\n".join(lines) + "\n"


def parity_markdown(par: dict[str, Any]) -> list[str]:
    lines = ["## Parity (fp32 policy, eval, same weights and tokens)", ""]
    if par.get("ok"):
        lines += [f"T = {par['seq_len']}, window {par['window_blocks']} blocks: torch_ref loss {par['torch_loss']:.6f}, "
                  f"jaxgpt loss {par['jax_loss']:.6f} (rel diff {par['loss_rel_diff']:.2e}); max |logit diff| "
                  f"{par['max_abs_logit_diff']:.3e} of max |logit| {par['max_abs_logit']:.3f}; argmax agreement "
                  f"{par['argmax_agreement']:.4f}", ""]
    else:
        lines += [f"FAILED: {par.get('error')}", ""]
    return lines


def train_markdown(train: dict[str, Any]) -> list[str]:
    lines = ["## Training step, one device (record preset, 1 x 65,536 tokens per step)", ""]
    if train.get("ok"):
        lines += ["| run | median step ms | first step (compile) ms | peak MiB | tokens/s | final val loss |",
                  "|---|---|---|---|---|---|"]
        for key, runs in train["runs"].items():
            for run in runs:
                final_val = list(run["val_losses"].values())[-1] if run["val_losses"] else None
                lines.append(f"| {key} | {run['step_ms_median']} | {run['first_step_ms']} | {run['peak_mib']} | "
                             f"{run.get('tokens_per_s')} | {final_val} |")
        lines += ["", f"jax_step_ms {train['jax_step_ms']}, torch_step_ms {train['torch_step_ms']}, record_step_ms "
                  f"{train['record_step_ms']}; jaxgpt / torch_ref {train.get('ratio_jax_over_torch')}, jaxgpt / record "
                  f"{train.get('ratio_jax_over_record')} (jaxgpt with attention `{train.get('jax_attention')}`; torch_ref "
                  "compiled; record: its own script, one process)", ""]
        lines += [f"- {key} FAILED: {reason}" for key, reasons in train.get("failed_runs", {}).items() for reason in reasons]
        record = (train["runs"].get("record") or [train.get("record_skipped") or {}])[0]
        if "skipped" in record:
            lines += [f"The record's script was not timed: {record['skipped']}", ""]
        if record.get("patches"):
            lines += ["The record's script as run, changed only here (line numbers of the unpatched script):", ""]
            lines += [f"- line {p['line']}: `{p['name']}`: {p['reason']}" for p in record["patches"]]
            lines += [f"- environment: {change}" for change in record["environment_changes"]] + [""]
    else:
        lines += [f"FAILED: {train.get('error')}", ""]
    return lines


def schedule_markdown(part: dict[str, Any]) -> list[str]:
    lines = ["## Whole schedule, one device (both trainers from one initial state)", ""]
    if not part.get("ok"):
        return lines + [f"FAILED: {part.get('error')}", ""]
    lines += [f"Initial state SHA-256 (tensor bytes): `{part['init_sha256']}`", "",
              "| trainer | steps | wall s | train time ms | median step ms | peak MiB | final val loss | checkpoint bytes |",
              "|---|---|---|---|---|---|---|---|"]
    for name, run in part["runs"].items():
        final_val = list(run["val_losses"].values())[-1] if run["val_losses"] else None
        lines.append(f"| {name} | {run['steps_logged']} | {run['wall_s']} | {run['train_time_ms']} | "
                     f"{run['step_ms_median']} | {run['peak_mib']} | {final_val} | {run['checkpoint']['bytes']} |")
    if "val" in part:
        val = part["val"]
        lines += ["", "| step | " + " | ".join(map(str, val["steps"])) + " |", "|---" * (len(val["steps"]) + 1) + "|",
                  "| jaxgpt | " + " | ".join(f"{v:.4f}" for v in val["jaxgpt"]) + " |",
                  "| torch_ref | " + " | ".join(f"{v:.4f}" for v in val["torch_ref"]) + " |",
                  "", f"Largest val-loss difference: {val['max_abs_diff']}; plot: {part.get('plot')}"]
    return lines + [""]
