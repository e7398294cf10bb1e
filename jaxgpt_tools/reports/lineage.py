"""The speedrun's lineage in numbers: the library of `scripts/lineage_report.py`, which writes
docs/LINEAGE.md and docs/lineage_study.png.

For each preset of the lineage (#8 untie-embed ... #20 record):
- its record's time, steps and validation trajectory, read from the specification
  (docs/spec/LINEAGE.md for #8-#18, docs/spec/RECORD.md for #20), never typed in twice;
- its parameter count (the preset's model, from shapes only);
- the CPU time of one training step in both frameworks at the tiny width (12 layers, D 128,
  2 heads, 1024 tokens per step, the preset's own dtype policy and optimizers), steps of the
  two frameworks interleaved (bench_parity's steps);
- the memory of XLA's plan of the full-size step for one H100, compiled without a GPU
  (scripts/gpu_plan.py in the jax CUDA plugin's environment), no timing;
- a small lineage study: every preset at the tiny width on the sample shards for a fixed number
  of steps, both frameworks, several seeds, the val losses with their spread and one plot.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jaxgpt_tools.common import child
from jaxgpt_tools.common.artifacts import REPO_ROOT, generated_header, repo_relative_paths
from jaxgpt_tools.common.log import logger
from jaxgpt_tools.common.machine import summary as machine_summary
from jaxgpt_tools.parity.measures import torch_preset

PRESETS = ("untie-embed", "shortcuts", "unet-value-embeds", "softcap", "record")


# ---------------------------------------------------------------------------------------------
# The records' own numbers, from the specification


@dataclass(frozen=True)
class RecordFacts:
    number: int
    name: str
    minutes: float  # the README table's record time
    train_time_ms: int  # train_time on the final val line of the log
    steps: int
    trajectory: tuple[tuple[int, float], ...]  # (step, val loss) of the log


_TABLE_ROW = re.compile(r"^\| (\d+) \| (\w+) \| [\d-]+ \| ([\d.]+) min \| ([\d,]+) ms[^|]*\| (\d+) \|", re.M)
_PAIR = re.compile(r"(\d+): (\d+\.\d+)")


def record_facts(spec_dir: Path = REPO_ROOT / "docs" / "spec") -> dict[int, RecordFacts]:
    """Record number -> facts: LINEAGE.md section 1's table and each record section's "Val
    trajectory" (#8-#18), RECORD.md section 9's table (#20). ValueError when a number is missing."""
    lineage = (spec_dir / "LINEAGE.md").read_text()
    rows = {int(m[1]): m for m in _TABLE_ROW.finditer(lineage)}
    sections = re.split(r"\n## ", lineage)
    facts = {}
    for number, row in rows.items():
        if number == 20:
            trajectory = _record_trajectory((spec_dir / "RECORD.md").read_text())
        else:
            section = next((s for s in sections if re.match(rf"\d+\. Record #{number} ", s)), None)
            found = section and re.search(r"Val trajectory[^:]*:(.*?)\(([\d,]+) ms\)", section, re.S)
            if not found:
                raise ValueError(f"LINEAGE.md has no val trajectory for record #{number}")
            trajectory = tuple((int(s), float(v)) for s, v in _PAIR.findall(found[1]))
        facts[number] = RecordFacts(number, row[2], float(row[3]), int(row[4].replace(",", "")), int(row[5]), trajectory)
    missing = {8, 9, 15, 18, 20} - set(facts)
    if missing:
        raise ValueError(f"LINEAGE.md's table lacks records {sorted(missing)}")
    return facts


def _record_trajectory(record_md: str) -> tuple[tuple[int, float], ...]:
    """RECORD.md section 9's table: | step | val_loss | train_time | step_avg |."""
    section = record_md.split("Validation trajectory of the logged run", 1)[1].split("\n\n", 2)[1]
    return tuple((int(m[1]), float(m[2])) for m in re.finditer(r"^\| (\d+) \| (\d+\.\d+) \|", section, re.M))


# ---------------------------------------------------------------------------------------------
# Sizes, step times, plans


def parameter_count(name: str) -> int:
    from jaxgpt import params as params_lib
    from jaxgpt import presets

    return sum(math.prod(s.shape) for s in params_lib.param_shapes(presets.get_preset(name).model).values())


TINY = dict(model_dim=128, num_heads=2, loss_chunk_tokens=None, attention_backend="blocked")


def tiny_preset(name: str, *, steps: int, seed: int, sample_dir: Path, out_dir: Path, val_every: int,
                val_tokens: int, batch_tokens: int = 1024):
    """The preset at the tiny width (its 12 layers, own dtype policy, optimizers, window schedule
    and data switches) on the sample shards: one 1024-token sequence per step."""
    from jaxgpt import config as cfg
    from jaxgpt import presets

    base = presets.get_preset(name)
    train = cfg.replace(base.train, train_files=str(sample_dir / "sample_train_*.bin"),
                        val_files=str(sample_dir / "sample_val_*.bin"), steps=steps, seq_len=1024,
                        batch_tokens=batch_tokens, val_every=val_every, val_tokens=val_tokens, seed=seed, devices=1,
                        out_dir=str(out_dir))
    return cfg.Preset(model=cfg.replace(base.model, **TINY), optim=base.optim, train=train)


def step_times(names: tuple[str, ...], *, warmup: int, repeats: int, sample_dir: Path,
               log: Callable[[str], None]) -> dict[str, dict[str, float]]:
    """Seconds per tiny-width training step of jaxgpt and torch_ref for each preset: the
    median of `repeats` steps after `warmup` (the first compiles jaxgpt's step), the two
    frameworks' steps alternating on the same batches from the same weights."""
    import numpy as np

    from jaxgpt_tools.bench import parity_step as bench_parity
    from jaxgpt_tools.common import machine
    from jaxgpt_tools.common.timing import timed

    out = {}
    for name in names:
        with tempfile.TemporaryDirectory() as folder:
            preset = tiny_preset(name, steps=warmup + repeats, seed=0, sample_dir=sample_dir, out_dir=Path(folder),
                                 val_every=1, val_tokens=0)
            rng = np.random.default_rng(0)
            batches = [rng.integers(0, 50257, (1, 1025), dtype=np.int32) for _ in range(warmup + repeats)]
            with machine.torch_threads(1):  # see bench_parity: torch's spinning threads slow both columns
                jax_fn, params = bench_parity.jax_step(preset, batches)
                torch_fn = bench_parity.torch_step(preset, params, batches, compiled=False)
                times: dict[str, list[float]] = {"jaxgpt": [], "torch_ref": []}
                for i in range(warmup + repeats):
                    for framework, fn in (("jaxgpt", jax_fn), ("torch_ref", torch_fn)):
                        seconds, _ = timed(fn)
                        if i >= warmup:
                            times[framework].append(seconds)
            out[name] = {framework: statistics.median(values) for framework, values in times.items()}
            log(f"step time {name}: " + ", ".join(f"{k} {v:.2f} s" for k, v in out[name].items()))
    return out


def plan_memory(name: str, gpu_python: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """XLA's plan of the full-size training step for one H100, compiled without a GPU
    (compile_plan.plan_preset in a child run by `gpu_python`, the jax CUDA plugin's environment): its memory."""
    try:
        plan = child.call("jaxgpt_tools.gpu.compile_plan:plan_preset",
                          {"preset_name": name, "device": "h100", "num_devices": 1,
                           "hlo_dir": tempfile.mkdtemp(prefix="lineage_plan_")}, python=str(gpu_python))
    except child.ChildFailed as error:
        tail = repo_relative_paths((str(error).strip().splitlines() or ["(no output)"])[-1])
        log(f"plan {name}: failed: {tail}")
        return {"error": tail[:300]}
    log(f"plan {name}: {plan['total_gib']} GiB ({plan['attention']}, {plan['batch_tokens']} tokens)")
    return {key: plan[key] for key in ("total_gib", "temp_gib", "argument_gib", "output_gib", "attention",
                                       "batch_tokens", "compile_s", "caveat")}


# ---------------------------------------------------------------------------------------------
# The lineage study


@dataclass(frozen=True)
class StudyRun:
    preset: str
    framework: str
    seed: int
    val_losses: dict[int, float]  # step -> val loss
    seconds: float


def study_run(name: str, framework: str, seed: int, *, steps: int, val_every: int, val_tokens: int,
              sample_dir: Path, compile_cache: str | None = None) -> StudyRun:
    """One tiny-width run of a preset in one framework from its own seeded init (jaxgpt's
    compilations through JAX's persistent cache in `compile_cache`)."""
    import time

    from jaxgpt_tools.common import machine

    with tempfile.TemporaryDirectory() as folder:
        preset = tiny_preset(name, steps=steps, seed=seed, sample_dir=sample_dir, out_dir=Path(folder),
                             val_every=val_every, val_tokens=val_tokens)
        start = time.perf_counter()
        if framework == "jaxgpt":
            from jaxgpt import loop as jax_train

            val = jax_train.train(preset, jax_train.RunOptions(run_id=f"study-{name}-{seed}", progress=False,
                                                               compile_cache=compile_cache)).val_losses
        else:
            from torch_ref import loop as torch_train
            from torch_ref.run.cli import RunOptions

            with machine.torch_threads(1):
                result = torch_train.train(torch_preset(preset), RunOptions(device="cpu", run_id=f"study-{name}-{seed}"))
            assert result is not None  # rank 0 of this one process returns its result
            val = result.val_losses
        return StudyRun(name, framework, seed, dict(val), time.perf_counter() - start)


def run_study(names: tuple[str, ...], seeds: tuple[int, ...], *, steps: int, val_every: int, val_tokens: int,
              sample_dir: Path, compile_cache: str | None, log: Callable[[str], None]) -> list[StudyRun]:
    """Every preset x framework x seed. jaxgpt's compiled steps go through JAX's persistent cache
    (`compile_cache`), so a preset compiles once for all its seeds (same program, other values)."""
    runs = []
    for name in names:
        for seed in seeds:
            for framework in ("jaxgpt", "torch_ref"):
                run = study_run(name, framework, seed, steps=steps, val_every=val_every, val_tokens=val_tokens,
                                sample_dir=sample_dir, compile_cache=compile_cache)
                log(f"study {name} {framework} seed {seed}: final val {run.val_losses[steps]:.4f} ({run.seconds:.0f} s)")
                runs.append(run)
    return runs


def study_table(runs: list[StudyRun], steps: int) -> dict[str, dict[str, Any]]:
    """Per preset: final val loss mean and spread (max - min) per framework and over all runs."""
    table: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(run.preset for run in runs):
        row: dict[str, Any] = {}
        mine = [run for run in runs if run.preset == name]
        for framework in ("jaxgpt", "torch_ref", "all"):
            finals = [run.val_losses[steps] for run in mine if framework in ("all", run.framework)]
            row[framework] = {"mean": statistics.fmean(finals), "spread": max(finals) - min(finals), "n": len(finals)}
        table[name] = row
    return table


def write_plot(runs: list[StudyRun], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(run.preset for run in runs))
    fig, (ax, final_ax) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": (3, 2)})
    for index, name in enumerate(names):
        color = f"C{index}"
        for run in (r for r in runs if r.preset == name):
            steps = sorted(run.val_losses)
            jax_run = run.framework == "jaxgpt"
            ax.plot(steps, [run.val_losses[s] for s in steps], "-" if jax_run else "--", color=color, alpha=0.7,
                    label=name if jax_run and run.seed == min(r.seed for r in runs) else None)
            # the final losses side by side: where the curves overlap, the seeds' and frameworks' spread
            final_ax.plot(index + (-0.12 if jax_run else 0.12), run.val_losses[steps[-1]], "o" if jax_run else "x",
                          color=color)
    ax.set(xlabel="step", ylabel="val loss (sample shards)")
    ax.set_title("Lineage presets at width 128 (12 layers)\nsolid jaxgpt, dashed torch_ref, one line per seed",
                 fontsize=10)
    ax.legend()
    final_ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
    final_ax.set_ylabel("final val loss")
    final_ax.set_title("final val loss of each run (o jaxgpt, x torch_ref)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# The page


def render(results: dict[str, Any], command: str) -> str:
    from jaxgpt import presets

    facts = {number: RecordFacts(**f) for number, f in ((int(k), v) for k, v in results["facts"].items())}
    lines = [
        generated_header(command),
        "# The lineage in numbers",
        "",
        f"Generated by `{command}`; do not edit by hand. The presets are the records of",
        "docs/spec/LINEAGE.md as switches of one model (`--preset NAME` in both trainers; the switches:",
        "`python -m jaxgpt.train --help`, groups \"lineage switches\"). Record times and val trajectories are",
        "the records' own logs as the specification reads them; everything else was measured here.",
        "",
        f"- Machine: {results['machine']}",
        f"- Versions: {results['versions']}",
        "",
        "## The presets",
        "",
        "| preset | record | time (README) | official train_time | steps | final val (log) | parameters | "
        "CPU step, jaxgpt | CPU step, torch_ref | H100 plan, one device |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in PRESETS:
        number, record, _ = presets.LINEAGE_PRESETS[name]
        f = facts[number]
        times = results.get("step_times", {}).get(name, {})
        plan = results.get("plans", {}).get(name)
        plan_cell = ("not measured" if plan is None else f"error: {plan['error']}" if "error" in plan
                     else f"{plan['total_gib']:.1f} GiB ({plan['attention']})")
        lines.append(
            f"| `{name}` | #{number} {record} | {f.minutes:g} min | {f.train_time_ms:,} ms | {f.steps} | "
            f"{f.trajectory[-1][1]:.4f} | {results['parameters'][name]:,} | "
            + " | ".join(f"{times[k]:.2f} s" if k in times else "not measured" for k in ("jaxgpt", "torch_ref"))
            + f" | {plan_cell} |")
    lines += [
        "",
        "CPU step: forward, backward and the Muon/Adam update of the tiny-width variant (12 layers, D 128, 2",
        "heads of 64, one sequence of 1024 tokens, the preset's dtype policy and optimizers), median of the",
        f"timed steps ({results.get('step_time_steps', '?')}), jaxgpt's and torch_ref's steps alternating on the",
        "same batches from the same weights; torch_ref eager, one thread. H100 plan: XLA's memory for the",
        "full-size training step of one device (the preset's batch / 8 tokens), compiled without a GPU, no",
        "autotuning (`scripts/gpu_plan.py --preset NAME`); the H100 step times of both frameworks need a lent",
        "GPU and were not measured.",
        "",
        "## The records' validation trajectories (from their logs)",
        "",
    ]
    steps_union = sorted({s for f in facts.values() for s, _ in f.trajectory})
    header = "| step | " + " | ".join(f"#{n}" for n in sorted(facts)) + " |"
    lines += [header, "|" + "---|" * (len(facts) + 1)]
    for step in steps_union:
        cells = [next((f"{v:.4f}" for s, v in facts[n].trajectory if s == step), "") for n in sorted(facts)]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    study = results.get("study")
    if study:
        steps = study["steps"]
        lines += [
            "",
            "## A small lineage study on the CPU",
            "",
            "Every preset at the tiny width (12 layers, D 128, 2 heads; its own dtype policy, optimizers, window",
            f"schedule and data switches), {steps} steps of one 1024-token sequence on the sample shards",
            f"(`data/sample`), validation on the first {study['val_tokens']} val tokens, seeds "
            f"{', '.join(map(str, study['seeds']))} in each framework (each framework draws its own init).",
            "A study this small need not reproduce the records' claims: the records ran 0.7-2.4 billion tokens of",
            "FineWeb at width 768 on 8 GPUs, and their differences (a few hundredths of a nat at the end) come from",
            f"changes that pay off at that scale; {steps} steps of one sequence at width 128 mostly measure how fast",
            "each configuration's learning rates and schedules move a small model at the start.",
            "",
            "| preset | final val, jaxgpt (mean, spread) | final val, torch_ref (mean, spread) | all runs (mean, spread) |",
            "|---|---|---|---|",
        ]
        for name, row in study["table"].items():
            lines.append(f"| `{name}` | " + " | ".join(
                f"{row[k]['mean']:.4f} ({row[k]['spread']:.4f}, n={row[k]['n']})" for k in ("jaxgpt", "torch_ref", "all"))
                + " |")
        lines += ["", "Spread: the largest minus the smallest final val loss of the runs.",
                  f"Wall time of the study: {study['seconds'] / 60:.1f} minutes.", "",
                  f"![val loss per step of every study run]({study['plot']})"]
    return "\n".join(lines) + "\n"


def facts_json(facts: dict[int, RecordFacts]) -> dict[str, Any]:
    return {str(number): asdict(f) for number, f in facts.items()}


log_to_stderr = logger("lineage")


# ---------------------------------------------------------------------------------------------
# The whole report

PARTS = ("steps", "plans", "study")


@dataclass(frozen=True)
class ReportOptions:
    """What `build_report` measures and where it writes (scripts/lineage_report.py's flags)."""

    parts: tuple[str, ...] = PARTS
    presets: tuple[str, ...] = PRESETS
    out: Path = REPO_ROOT / "docs" / "LINEAGE.md"
    results: Path = REPO_ROOT / "artifacts" / "lineage" / "results.json"
    sample_dir: Path = REPO_ROOT / "data" / "sample"
    study_steps: int = 30
    study_val_every: int = 10
    study_val_tokens: int = 4096
    seeds: tuple[int, ...] = (0, 1)
    step_warmup: int = 2
    step_repeats: int = 3
    gpu_python: Path = REPO_ROOT / ".venv-gpu-aot" / "bin" / "python"
    compile_cache: str | None = None


def study_results(options: ReportOptions, log: Callable[[str], None]) -> dict[str, Any]:
    """The CPU lineage study's runs, table and plot (written beside the page)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache:
        runs = run_study(options.presets, options.seeds, steps=options.study_steps, val_every=options.study_val_every,
                         val_tokens=options.study_val_tokens, sample_dir=options.sample_dir,
                         compile_cache=options.compile_cache or cache, log=log)
    plot = options.out.parent / "lineage_study.png"
    write_plot(runs, plot)
    return {"steps": options.study_steps, "seeds": list(options.seeds), "val_tokens": options.study_val_tokens,
            "table": study_table(runs, options.study_steps), "plot": plot.name,
            "runs": [run.__dict__ | {"val_losses": {str(k): v for k, v in run.val_losses.items()}} for run in runs],
            "seconds": time.perf_counter() - start}


def build_report(options: ReportOptions, log: Callable[[str], None] = log_to_stderr) -> Path:
    """Measure the asked parts, merge them into the results file (parts measured before are
    kept) and render the page from it; returns the page's path. FileNotFoundError when the plans
    are asked for without the plugin's python."""
    if "plans" in options.parts and not options.gpu_python.is_file():
        raise FileNotFoundError(f"{options.gpu_python} not found; build it with `make gpu-plan` or pass --gpu-python")
    results = json.loads(options.results.read_text()) if options.results.is_file() else {}
    machine, versions = machine_summary()
    results.update(machine=machine, versions=versions, facts=facts_json(record_facts()),
                   parameters={name: parameter_count(name) for name in PRESETS})
    if "steps" in options.parts:
        results.setdefault("step_times", {}).update(step_times(
            options.presets, warmup=options.step_warmup, repeats=options.step_repeats, sample_dir=options.sample_dir,
            log=log))
        results["step_time_steps"] = f"{options.step_repeats} after {options.step_warmup} warm-up"
    if "plans" in options.parts:
        results.setdefault("plans", {}).update({name: plan_memory(name, options.gpu_python, log) for name in options.presets})
    if "study" in options.parts:
        results["study"] = study_results(options, log)
    options.results.parent.mkdir(parents=True, exist_ok=True)
    options.results.write_text(json.dumps(results, indent=1) + "\n")
    options.out.write_text(render(results, "python scripts/lineage_report.py"))
    log(f"wrote {options.out} and {options.results}")
    return options.out
