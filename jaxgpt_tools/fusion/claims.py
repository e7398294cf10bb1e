"""The fusion study's sentences, computed from its records (results.json; read by `records`).

Every sentence of docs/FUSION.md's answer is a `Claim` made here from the records: its text is
generated (numbers and comparative words from the data) and its `check` re-derives the fact it
states from the per-kernel tables (read from the optimized HLO or Inductor's output code), a
second path through the data; tests/tools/fusion/test_claims.py runs every check on the
committed results and finds every sentence in the page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jaxgpt_tools.fusion.records import (
    COMPILER_NAMES,
    DEVICE_NAMES,
    MODE_NAMES,
    PART_NAMES,
    bytes_moved,
    find,
    gemms_per_call,
    kernel_stages,
    kernels_per_call,
    label,
    run_compilers,
)


@dataclass(frozen=True)
class Claim:
    """One sentence of the page, made from the data, and the check that re-derives its fact."""
    key: str
    text: str
    check: Callable[..., bool] = field(compare=False, repr=False)  # called with no argument (a lambda's defaults bind its data)


# ---------------------------------------------------------------------------------------------
# The page's sentences. Each function returns the claims it can make from the records present
# (none where its programs are missing); texts are generated, checks re-derive the facts.

def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _pct(new: float, old: float) -> str:
    """'12% more' / '3% fewer' / 'as many' of new against old."""
    change = (new - old) / old * 100 if old else 0.0
    if abs(change) < 0.5:
        return "as many"
    return f"{abs(change):.0f}% {'more' if change > 0 else 'fewer'}"


def _mb(value: float) -> str:
    return f"{value / 1e6:,.3g} MB" if value < 1e8 else f"{value / 1e6:,.0f} MB"


def _shape(record: dict[str, Any]) -> str:
    return f"D {record['shape']['model_dim']}, T {record['shape']['seq_len']:,}"


def _ms(value: float) -> str:
    """Milliseconds, three significant digits (whole ms from 100 on)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _time_words(a: dict[str, Any], b: dict[str, Any]) -> str:
    """a's median time against b's: 'x% higher' / 'x% lower' / 'the same', and whether their quartile ranges
    overlap (then the difference is within the run-to-run spread)."""
    change = (a["median_ms"] - b["median_ms"]) / b["median_ms"] * 100
    overlap = a["p25_ms"] <= b["p75_ms"] and b["p25_ms"] <= a["p75_ms"]
    word = "the same" if abs(change) < 0.5 else f"{abs(change):.0f}% {'higher' if change > 0 else 'lower'}"
    return (f"{word} "
            f"({_ms(a['median_ms'])} against {_ms(b['median_ms'])} ms; quartile ranges {'overlap' if overlap else 'apart'})")


TARGETS = (("xla", "cpu"), ("inductor", "cpu"), ("xla", "h100-compile-only"), ("inductor", "h100-compile-only"))


def answer_programs(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """(compiler, device) -> {"fwd_merged", "fwd_separate", "fwdbwd_merged", "fwdbwd_separate"}:
    the QKV programs of each target at its largest shape (those with all four)."""
    from jaxgpt_tools.fusion.artifacts import committed_shapes

    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for (compiler, device), shape in committed_shapes(records).items():
        found = {f"{mode}_{layout}": find(records, compiler=compiler, device=device, part="qkv", mode=mode, layout=layout,
                                          shape=shape) for mode in MODE_NAMES for layout in ("merged", "separate")}
        if all(program is not None for program in found.values()):
            out[(compiler, device)] = {key: program for key, program in found.items() if program is not None}
    return dict(sorted(out.items(), key=lambda kv: TARGETS.index(kv[0]) if kv[0] in TARGETS else 9))


def _gemm_answer(programs, sweep) -> Claim:
    own = {target: p["fwd_separate"]["gemm_kernels"] == p["fwd_merged"]["gemm_kernels"] for target, p in programs.items()}
    counts = sorted({(p["fwd_merged"]["gemm_kernels"], p["fwdbwd_merged"]["gemm_kernels"], p["fwd_separate"]["gemm_kernels"],
                      p["fwdbwd_separate"]["gemm_kernels"]) for p in programs.values()})
    last = max((r["T"] for r in sweep if r["mode"] == "fwd" and r["layout"] == "separate" and r["threshold_mb"] is None
                and r["gemm_kernels"] == 1), default=None)
    yes = [f"{label(*t)} at {_shape(programs[t]['fwd_separate'])}" for t, merges in own.items() if merges]
    no = [f"{label(*t)} at {_shape(programs[t]['fwd_separate'])}" for t, merges in own.items() if not merges]
    text = (f"Merged, the QKV path is {counts[0][0]} GEMM forward and {counts[0][1]} forward+backward on every target; "
            f"separate, {counts[0][2]} and {counts[0][3]}" + ("" if len(counts) == 1 else " where the compiler does not merge them")
            + (f": no target merges the three projections itself by default ({'; '.join(no)})" if not yes else
               f": {'; '.join(yes)} merge{'s' if len(yes) == 1 else ''} them itself, {'; '.join(no) or 'no other'} not")
            + (f"; XLA for the H100 does, but only up to T {last:,} at D 768 (the sweep below)" if last else "") + ".")
    return Claim("answer.gemms", text, lambda: all(
        gemms_per_call(p[k]) == p[k]["gemm_kernels"] and kernels_per_call(p[k]) == p[k]["kernels"] for p in programs.values() for k in p))


def _bytes_answer(programs) -> Claim:
    parts = [f"{label(*t)} {_signed(p['fwd_separate'], p['fwd_merged'])} / {_signed(p['fwdbwd_separate'], p['fwdbwd_merged'])}"
             for t, p in programs.items()]
    more = all(p[f"{m}_separate"]["kernel_traffic_bytes"] > p[f"{m}_merged"]["kernel_traffic_bytes"]
               for p in programs.values() for m in MODE_NAMES)
    text = (f"Separate moves {'more bytes than merged on every target' if more else 'more or fewer bytes than merged'} "
            f"(one byte model for all four columns: each kernel reads every distinct buffer it takes and writes every "
            f"buffer it produces, whole), forward / forward+backward: " + "; ".join(parts)
            + " (whole buffers overstate merged, whose kernels after its GEMM each take the whole (T, 3D) result: the "
              "reasons below say by how much).")

    def check() -> bool:
        from jaxgpt_tools.fusion import byte_model

        return all(p[k].get("byte_model") == byte_model.MODEL and abs(byte_model.program_bytes(p[k]) - p[k]["kernel_traffic_bytes"]) < 1
                   and abs(bytes_moved(p[k]) - p[k]["kernel_traffic_bytes"]) < 1 for p in programs.values() for k in p)

    return Claim("answer.bytes", text, check)


def _signed(new: dict[str, Any], old: dict[str, Any]) -> str:
    change = (new["kernel_traffic_bytes"] - old["kernel_traffic_bytes"]) / old["kernel_traffic_bytes"] * 100
    return f"{change:+.0f}%"


def _time_answer(programs) -> Claim:
    timed = {t: p for t, p in programs.items() if all(p[k].get("time") for k in p)}
    idle = {t: p for t, p in timed.items() if all(p[k]["time"].get("idle") for k in p)}
    if idle:
        parts = [f"{label(*t)} {_time_words(p['fwdbwd_separate']['time'], p['fwdbwd_merged']['time'])}" for t, p in idle.items()]
        text = ("On this CPU, timed idle, separate's median forward+backward time against merged's is " + "; ".join(parts)
                + "; the H100 columns are compiled without a GPU, no autotuning, and not timed.")
    elif timed:
        loads = [x for p in timed.values() for k in p for x in p[k]["time"]["load_1m"]]
        limit = next(iter(timed.values()))["fwd_merged"]["time"].get("load_limit")
        text = (f"No time is shown: the machine was not idle while the CPU programs were timed (1-minute load average "
                f"{min(loads):.1f}-{max(loads):.1f}, above the {limit:.1f} an idle timing allows), and the H100 columns are "
                "compiled without a GPU, no autotuning, and not timed.")
    else:
        text = "Nothing was timed: the H100 columns are compiled without a GPU, no autotuning; the CPU's were not timed."
    return Claim("answer.time", text, lambda: all(
        t["min_ms"] <= t["p25_ms"] <= t["median_ms"] <= t["p75_ms"] <= t["max_ms"]
        and t.get("idle") == (max(t["load_1m"]) <= t.get("load_limit", float("inf")))
        for p in timed.values() for k in p for t in [p[k]["time"]]))


def _inductor_merge_answer(records) -> list[Claim]:
    from jaxgpt_tools.fusion.compile_only import GEMM_CHOICE_VARIANTS

    found: dict[tuple[str, str], Any] = {}
    for r in records:
        if r["compiler"] == "inductor" and r.get("variant", "default") not in ("default", *GEMM_CHOICE_VARIANTS) \
                and r["mode"] == "fwd":
            base = find(records, **{k: r[k] for k in ("compiler", "device", "part", "mode", "layout", "shape")})
            if base is not None:
                found.setdefault(r["variant"], []).append((r, base))
    if not found:
        return []
    parts = []
    for variant, pairs in sorted(found.items()):
        words = ", ".join(f"{DEVICE_NAMES.get(r['device'], r['device'])} {b['gemm_kernels']} -> {r['gemm_kernels']}" for r, b in pairs)
        parts.append(f"`{variant}` {words}")
    text = ("Inductor merges the separate projections itself only when asked (separate forward, GEMMs by default -> with "
            "the pass): " + "; ".join(parts) + " (its passes, their conditions and the H100's missing freezing: below).")
    return [Claim("answer.inductor_merge", text,
                  lambda: all(gemms_per_call(r) == r["gemm_kernels"] and gemms_per_call(b) == b["gemm_kernels"]
                              for pairs in found.values() for r, b in pairs))]


def answer_claims(records: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> list[Claim]:
    """At most five sentences: GEMMs, bytes, the merge switch (sweep), Inductor's own merges, time."""
    programs = answer_programs(records)
    if not programs:
        return []
    made = [_gemm_answer(programs, sweep), _bytes_answer(programs)] + _inductor_merge_answer(records)
    made.append(_time_answer(programs))
    return made


def _xla_ablation(ablated, base, merged) -> str:
    threshold = ablated["compiler_options"].get("xla_gpu_dot_merger_threshold_mb")
    converts = [k for k in ablated["kernel_table"] if not k["gemm"] and k.get("ops") == {"convert": 1}
                and "projection" in kernel_stages(ablated, k)]
    now = ablated["gemm_kernels"] < base["gemm_kernels"]
    return (f"With `xla_gpu_dot_merger_threshold_mb={threshold}` XLA {'merges' if now else 'does not merge'} the "
            f"separate layout's dots at {_shape(ablated)} ({label(ablated['compiler'], ablated['device'])}, "
            f"{MODE_NAMES[ablated['mode']]}): {base['gemm_kernels']} GEMMs become {ablated['gemm_kernels']} (merged: "
            f"{merged['gemm_kernels']}), kernels {base['kernels']} -> {ablated['kernels']} (merged: {merged['kernels']}), "
            f"{len(converts)} of which convert a weight to bf16 before the GEMM concatenates them (no prologue takes a cast "
            f"through a concatenation); bytes moved {_mb(base['kernel_traffic_bytes'])} -> {_mb(ablated['kernel_traffic_bytes'])} "
            f"(merged: {_mb(merged['kernel_traffic_bytes'])}).")


INDUCTOR_VARIANT_WORDS = {
    "batch_linear_lhs": "its pre-grad pass `batch_linear_lhs` (off by default; groups of 5 linears at least, lowered to 3 "
                        "here) on the path as it is, input (1, T, D)",
    "batch_linear_lhs_2d": "the same pass with the path's input flattened to (T, D), the 2-D input the pass requires "
                           "(group_batch_fusion.is_linear_node_can_be_fused)",
    "freezing_concat_linear": "freezing with `cpp.enable_concat_linear` (inference only: the weights become constants "
                              "that its concat-linear pattern concatenates)",
}


def _inductor_ablation(ablated, base, merged) -> str:
    now = ablated["gemm_kernels"] < base["gemm_kernels"]
    return (f"{label(ablated['compiler'], ablated['device'])}, "
            f"{INDUCTOR_VARIANT_WORDS.get(ablated['variant'], '`' + ablated['variant'] + '`')}: separate "
            f"{MODE_NAMES[ablated['mode']]} at {_shape(ablated)} {'merges' if now else 'does not merge'}, "
            f"{base['gemm_kernels']} GEMMs -> {ablated['gemm_kernels']} (merged: {merged['gemm_kernels']}), kernels "
            f"{base['kernels']} -> {ablated['kernels']} (merged: {merged['kernels']}), bytes moved "
            f"{_mb(base['kernel_traffic_bytes'])} -> {_mb(ablated['kernel_traffic_bytes'])} (merged: "
            f"{_mb(merged['kernel_traffic_bytes'])}).")


def ablation_claims(records: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[Claim]:
    """The flags and passes that decide the merge, turned on the separate layout: XLA's
    dot-merger threshold, Inductor's batch_linear_lhs and freezing; what could not be compiled."""
    from jaxgpt_tools.fusion.compile_only import GEMM_CHOICE_VARIANTS

    made = []
    for ablated in [r for r in records if r.get("variant", "default") not in ("default", *GEMM_CHOICE_VARIANTS)
                    and r["layout"] == "separate" and r["part"] == "qkv"]:
        base = find(records, **{k: ablated[k] for k in ("compiler", "device", "part", "mode", "layout", "shape")})
        merged = find(records, **{k: ablated[k] for k in ("compiler", "device", "part", "mode", "shape")}, layout="merged")
        if base is None or merged is None:
            continue
        text = (_xla_ablation if ablated["compiler"] == "xla" else _inductor_ablation)(ablated, base, merged)
        made.append(Claim(f"ablation.{ablated['compiler']}_{ablated['device']}_{ablated['variant']}_{ablated['mode']}", text,
                          lambda a=ablated, m=merged, b=base: (
                              gemms_per_call(a) == a["gemm_kernels"] and gemms_per_call(b) == b["gemm_kernels"]
                              and gemms_per_call(m) == m["gemm_kernels"] and kernels_per_call(a) == a["kernels"]
                              and abs(bytes_moved(a) - a["kernel_traffic_bytes"]) < 1)))
    for run in [run for run in runs if not run.get("leg")]:  # a GEMM-choice leg's: fusion/gemm_choice.py
        for what, why in (run.get("not_compiled") or {}).items():
            made.append(Claim(f"ablation.not_compiled_{run.get('compiler')}_{what}",
                              f"{COMPILER_NAMES.get(str(run.get('compiler')), '')} {DEVICE_NAMES.get(run['device'], run['device'])}: "
                              f"`{what}` not compiled ({why}).",
                              lambda what=what, run=run: not any(r.get("variant") == what and r["device"] == run["device"]
                                                                 and r["compiler"] == run.get("compiler") for r in records)))
    return made


PROGRAMS_HEAD = (
    "Programs (jaxgpt_tools/fusion/xla.py, fusion/inductor.py): the **QKV path** (jaxgpt's and torch_ref's "
    "`CausalSelfAttention.project` on a normed bf16 input and a value embedding, returning q, k, v as the attention kernel "
    "takes them) and, as context, one whole **block**, each forward and forward+backward, with the **merged** (3D, D) QKV "
    "weight or **separate** (D, D) weights; bf16 activations, fp32 weights cast at use, one document. ")
BYTES_TEXT = (
    "*Bytes moved*, one model for all four columns (fusion/byte_model.py): a kernel reads every distinct buffer it takes "
    "and writes every buffer it produces, each whole and once, in bytes of its dtype (XLA: a kernel's distinct operands "
    "and its result in the optimized HLO; Inductor: the buffer arguments of a launch in its output code, by their in_ptr / "
    "out_ptr / in_out_ptr roles, an extern call's out=); a buffer a kernel reads only part of counts whole in both "
    "compilers (merged's (T, 3D) GEMM result, which the kernels after it split into q, k and v), one updated in place "
    "counts read and written, and a cuBLAS call's workspace (the s8 scratch array XLA's custom call returns beside "
    "its result) is left out; the block's totals, which have no per-kernel table, are each compiler's own count. "
    "*Minimum*: the program's arguments read once and results written once (XLA's memory_analysis of the same program).")
KERNELS_TEXT = (
    "*Kernels*: launches per call (XLA: instructions that do work in the entry computation and loop bodies, once per "
    "trip; Inductor: generated kernels, extern calls and aten fallbacks in its output code, forward and backward graphs "
    "summed). ")


def returns(record: dict[str, Any]) -> str:
    """What a forward+backward program returns; a record made before `returns` was kept: Inductor's
    always returned the outputs (its forward graph's) and the gradients, XLA's the gradients only."""
    from jaxgpt_tools.fusion.xla import FWDBWD_RETURNS

    return record.get("returns", FWDBWD_RETURNS if record["compiler"] == "inductor" else "gradients")


def fwdbwd_returns_text(records: list[dict[str, Any]]) -> str:
    """What the forward+backward programs return, from their records' `returns` (a record made
    before both compilers returned the same values has none: named)."""
    from jaxgpt_tools.fusion.xla import FWDBWD_RETURNS

    fwdbwd = [r for r in records if r["mode"] == "fwdbwd"]
    other = sorted({label(r["compiler"], r["device"]) for r in fwdbwd if returns(r) != FWDBWD_RETURNS})
    same = ("*Forward+backward* returns, in both compilers, what a training step keeps of the program: its outputs (q, k, "
            "v, which attention reads; the block's output, which the next layer reads) and the gradients of its parameters "
            "(the QKV weights and the value-mix lambdas; the block's every weight) and inputs (h and ve; x0), for fixed "
            "random output cotangents; Inductor's forward graph also writes the activations its backward graph reads, "
            "where XLA's one program keeps them inside. ")
    return same if not other else same.replace("in both compilers", "in every column but " + ", ".join(other)) + (
        f"{', '.join(other)}: the gradients only (those records were made before the outputs were returned). ")


def programs_text(records: list[dict[str, Any]]) -> str:
    return PROGRAMS_HEAD + fwdbwd_returns_text(records) + KERNELS_TEXT + BYTES_TEXT


def fwdbwd_outputs_written(record: dict[str, Any]) -> bool:
    """Second path for an XLA QKV forward+backward: its results (memory_analysis output bytes)
    hold q, k and v (3 T D bf16) beside the gradients of h and ve (2 T D bf16) and of the weights
    (3 D^2 fp32) and lambdas (2 fp32), and an 8-byte pointer per returned array (7 merged, 9
    separate: XLA's tuple index table)."""
    dim, seq_len = record["shape"]["model_dim"], record["shape"]["seq_len"]
    arrays = 7 if record["layout"] == "merged" else 9
    return record.get("output_bytes") == 2 * 5 * seq_len * dim + 4 * (3 * dim * dim + 2) + 8 * arrays


def _cpu_run_text(run: dict[str, Any], mine: list[dict[str, Any]]) -> str:
    env = run.get("environment") or {}
    versions = ", ".join(f"{k} {v}" for k, v in sorted(env.get("versions", {}).items()))
    flags = env.get("compiler_flags", {})
    compilers = run.get("compilers", ["xla", "inductor"])
    whose = "" if len(compilers) != 1 else f" of {COMPILER_NAMES[compilers[0]]}"
    text = (f"{DEVICE_NAMES.get(run['device'], run['device'])} programs{whose}: `{run['command']}` at commit "
            f"{env.get('commit', 'unknown')} with {versions}, on {env.get('cpu_model', 'an unnamed CPU')} "
            f"({env.get('cpu_count')} cores; vector ISA {' '.join(env.get('isa', [])) or 'unknown'}; torch's CPU capability "
            f"{flags.get('torch_cpu_capability', 'unknown')}); non-default compiler settings: XLA_FLAGS "
            f"`{flags.get('XLA_FLAGS') or '(unset)'}` (JAX_PLATFORMS `{flags.get('JAX_PLATFORMS') or '(unset)'}`), "
            "Inductor and AOTAutograd "
            + ", ".join(f"`{k}={v}`" for k, v in flags.get("inductor_cpu", {}).items()))
    if run.get("inductor_variants"):
        text += ("; Inductor's programs also compiled with `max_autotune=True` (variant "
                 + ", ".join(f"`{v}`" for v in run["inductor_variants"]) + ") and timed the same way")
    if run.get("not_started"):
        text += (f"; its deadline ({run['deadline_s']:g} s, `--deadline-s`) left {len(run['not_started'])} programs not "
                 f"started ({', '.join(run['not_started'])}) and its ablations and equality checks not run")
    times = [r["time"] for r in mine if r.get("time")]
    if not times:
        return text + "; compiled and counted, not timed."
    loads = [x for t in times for x in t["load_1m"]]
    idle = sum(bool(t.get("idle")) for t in times)
    return (text + f"; timed on {run['threads']} core{'s' if run['threads'] != 1 else ''} (the process pinned to core "
            f"{', '.join(map(str, run.get('cores', [])))}: XLA's thread pool and torch's intra-op threads both run there), "
            f"merged and separate interleaved, median with quartiles of {min(t['repeats'] for t in times)}-"
            f"{max(t['repeats'] for t in times)} timed calls after a warm-up; a timing counts as idle when the 1-minute load "
            f"average before and after it is at most {times[0].get('load_limit', 0):.1f} (the pinned cores plus 0.5): "
            f"{idle} of {len(times)} were (load {min(loads):.1f}-{max(loads):.1f}), and only idle times are shown.")


def _gpu_run_text(run: dict[str, Any]) -> str:
    env = run.get("environment") or {}
    versions = ", ".join(f"{k} {v}" for k, v in sorted(env.get("versions", {}).items()))
    what = " GEMM-choice programs" if run.get("leg") else " programs"
    head = (f"{COMPILER_NAMES.get(str(run.get('compiler')), '')} {DEVICE_NAMES[run['device']]}{what}: `{run['command']}` at "
            f"commit {env.get('commit', 'unknown')} with {versions}; {run.get('caveat', 'compiled without a GPU, no autotuning')}")
    if run.get("leg") == "xla_gemm":
        return head + (" (jax's CUDA plugin, compile-only devices): the GEMM-choice leg, the QKV path at the record's "
                       "shape with XLA's Triton GEMMs off (variants " + ", ".join(f"`{v}`" for v in run.get("variants", []))
                       + ", each program naming its compiler options).")
    if run.get("leg") == "inductor_max_autotune":
        return head + (" (fake_cuda.py as in the Inductor leg): Inductor's `max_autotune=True` tried on the QKV path's "
                       "merged forward at the smallest shape" + (", which did not compile (below)."
                                                                 if run.get("not_compiled") else "."))
    if run.get("compiler") == "xla":
        return head + (" (jax's CUDA plugin, compile-only devices): GEMM tiles are XLA's defaults, nothing is timed, and "
                       "no compiler option is changed except the dot-merger threshold where a program says so.")
    config = env.get("compiler_flags", {}).get("inductor_compile_only", {})
    return head + (" (a CPU-only process made to look like one H100 to torch and Triton, jaxgpt_tools/fusion/"
                   "fake_cuda.py; Dynamo traces on the CPU, Inductor compiles for `cuda` with FakeTensor inputs and "
                   "emits its output code; no cubin is kept, so no claim here rests on one): Inductor's default GPU "
                   "configuration except what a GPU "
                   "would decide by running kernels, left out rather than guessed: `max_autotune` (its autotuned Triton "
                   "GEMM templates) and coordinate-descent tuning stay off, so every GEMM is an extern cuBLAS call, and each "
                   "pointwise or reduction kernel keeps the list of block-size configs it would pick from at its first "
                   "launch; non-default settings " + ", ".join(f"`{k}={v}`" for k, v in config.items()) + ".")


def method_claims(records: list[dict[str, Any]], runs: list[dict[str, Any]], equality: list[dict[str, Any]]) -> list[Claim]:
    def programs_hold() -> bool:
        from jaxgpt_tools.fusion import byte_model
        from jaxgpt_tools.fusion.xla import FWDBWD_RETURNS

        known = all(r["part"] in PART_NAMES and r["mode"] in MODE_NAMES and r["layout"] in ("merged", "separate")
                    for r in records)
        returned = all(fwdbwd_outputs_written(r) for r in records if r["compiler"] == "xla" and r["part"] == "qkv"
                       and r["mode"] == "fwdbwd" and r.get("returns") == FWDBWD_RETURNS)
        modeled = all(r.get("byte_model") == byte_model.MODEL and abs(byte_model.program_bytes(r) - r["kernel_traffic_bytes"]) < 1
                      for r in records if r.get("kernel_table"))
        return known and returned and modeled

    made = [Claim("method.programs", programs_text(records), programs_hold)]
    for run in runs:
        compilers = run_compilers(run)
        key = f"method.run_{run['device']}_{run.get('leg') or (compilers[0] if len(compilers) == 1 else 'both')}"
        if run.get("skipped"):
            made.append(Claim(key, f"{COMPILER_NAMES.get(str(run.get('compiler')), '')} {DEVICE_NAMES.get(run['device'], run['device'])}: "
                              f"not compiled ({run['skipped']}).", lambda run=run: not any(
                                  r["device"] == run["device"] and r["compiler"] == run.get("compiler") for r in records)))
            continue
        mine = [r for r in records if r["device"] == run["device"] and r["compiler"] in compilers
                and (not run.get("leg") or r.get("variant") in run.get("variants", []))]
        text = _gpu_run_text(run) if run["device"] == "h100-compile-only" else _cpu_run_text(run, mine)
        made.append(Claim(key, text, lambda mine=mine: all(
            t["min_ms"] <= t["p25_ms"] <= t["median_ms"] <= t["p75_ms"] <= t["max_ms"] and t["repeats"] >= 1
            for t in (r["time"] for r in mine if r.get("time")))))
    for check in equality:
        made.append(Claim(f"method.equal_{check['compiler']}", (
            f"Merged and separate compute the same q, k and v: {COMPILER_NAMES[check['compiler']]} on this CPU, fp32, "
            f"D {check['model_dim']}, T {check['seq_len']:,}, the separate weights the merged one's slices: largest absolute "
            f"difference {check['max_abs_diff']:.3g} against outputs up to {check['max_abs']:.3g} (tolerance "
            f"{check['tolerance']:g} relative: {'equal' if check['equal'] else 'NOT equal'})."),
            lambda c=check: c["equal"] == (c["max_abs_diff"] <= c["tolerance"] * max(c["max_abs"], 1e-30))))
    return made


def block_claims(records: list[dict[str, Any]]) -> list[Claim]:
    made = []
    for compiler, device in sorted({(r["compiler"], r["device"]) for r in records if r["part"] == "block"},
                                   key=lambda c: (c[0] != "xla", c[1])):
        blocks = [r for r in records if (r["compiler"], r["device"], r["part"], r["mode"]) == (compiler, device, "block", "fwdbwd")]
        shape = max((r["shape"] for r in blocks), key=lambda s: s["seq_len"], default=None)
        if shape is None:
            continue
        merged = find(blocks, layout="merged", shape=shape)
        separate = find(blocks, layout="separate", shape=shape)
        if merged is None or separate is None:
            continue
        text = (f"{label(compiler, device)}, one block forward+backward at {_shape(merged)} (attention: "
                f"{merged.get('attention') or '-'}): {merged['kernels']} kernels merged, {separate['kernels']} separate; "
                f"separate moves {_pct(separate['kernel_traffic_bytes'], merged['kernel_traffic_bytes'])} bytes"
                + (f"; its median time is {_time_words(separate['time'], merged['time'])}"
                   if (merged.get("time") or {}).get("idle") and (separate.get("time") or {}).get("idle") else "")
                + ".")
        made.append(Claim(f"block.{compiler}_{device}", text, lambda m=merged, s=separate: (
            m["gemm_kernels"] <= s["gemm_kernels"] and m["kernels"] > 0)))
    return made + gap_claims(records, "block")


def _top(record: dict[str, Any]) -> tuple[str, float]:
    """The profile's largest kernel (or op) and its share of the profiled time."""
    kernels = record["kernel_times"]["kernels"]
    total = sum(k["ms_per_call"] for k in kernels)
    return kernels[0]["name"], kernels[0]["ms_per_call"] / total if total else 0.0


def gap_claims(records: list[dict[str, Any]], part: str) -> list[Claim]:
    """How the two compilers' times compare on `part` forward+backward (merged) at the largest
    shape where both were profiled, with each profile's largest kernel: the explanation of a gap."""
    pairs: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in records:
        if (r["part"], r["mode"], r["layout"]) == (part, "fwdbwd", "merged") and r.get("kernel_times") \
                and (r.get("time") or {}).get("idle") and r.get("variant", "default") == "default":
            pairs.setdefault((r["device"], r["shape"]["name"]), {})[r["compiler"]] = r
    largest: dict[str, tuple[int, str, dict]] = {}  # per device, the largest shape with both compilers profiled
    for (device, shape), found in pairs.items():
        if set(found) == {"xla", "inductor"}:
            seq = found["xla"]["shape"]["seq_len"]
            if device not in largest or seq > largest[device][0]:
                largest[device] = (seq, shape, found)
    made = []
    for device, (_, _, found) in sorted(largest.items()):
        xla, ind = found["xla"], found["inductor"]
        ratio = ind["time"]["median_ms"] / xla["time"]["median_ms"]
        (xla_top, xla_share), (ind_top, ind_share) = _top(xla), _top(ind)
        sdpa = "scaled_dot_product" in ind_top
        text = (f"On this {DEVICE_NAMES.get(device, device)} at {_shape(ind)}, Inductor's {PART_NAMES[part]} forward+backward "
                f"(merged) takes {ratio:.2g}x XLA's time ({_ms(ind['time']['median_ms'])} against "
                f"{_ms(xla['time']['median_ms'])} ms, on the same core): Inductor runs {ind['kernels']} launches and its "
                f"profile puts {ind_share:.0%} of its time in `{ind_top}`"
                + (" (torch_ref's attention on a CPU: SDPA with a dense (T, T) mask)" if sdpa else "")
                + (" (the compiled graph's own time: its generated C++ kernels, which the profiler does not split)"
                   if ind_top.startswith("## Call CompiledFxGraph") else "")
                + f", while XLA's time is spread over {xla['kernels']} kernels"
                + (f" ({xla['loop_kernels']} of them in the blocked attention's loop)" if xla.get("loop_kernels") else "")
                + f", the largest, `{xla_top}`, taking {xla_share:.0%}.")
        made.append(Claim(f"{'block' if part == 'block' else 'why'}.gap_{part}_{device}", text, lambda x=xla, i=ind: all(
            [k["ms_per_call"] for k in r["kernel_times"]["kernels"]] == sorted((k["ms_per_call"] for k in r["kernel_times"]["kernels"]),
                                                                              reverse=True) for r in (x, i))))
    return made
