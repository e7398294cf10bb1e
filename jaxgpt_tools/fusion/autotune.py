"""docs/FUSION.md's section on Inductor's `max_autotune=True` where it ran on the machine that
timed it (`scripts/fusion_report.py --inductor-max-autotune`; on a GPU, the fusion leg of
artifacts/gpu/README.md): per program, the GEMMs its autotuner kept (Triton templates, or extern
library calls) and its time beside Inductor's default, and what autotuning does to separate
against merged. The compile-only H100 leg's attempt at max_autotune is gemm_choice's.
Each sentence is a fusion_claims.Claim whose check recounts its numbers another way.
"""

from __future__ import annotations

from typing import Any

from jaxgpt_tools.fusion.claims import Claim
from jaxgpt_tools.fusion.compile_only import MAX_AUTOTUNE_VARIANT
from jaxgpt_tools.fusion.records import DEVICE_NAMES, MODE_NAMES, PART_NAMES, find
from jaxgpt_tools.fusion.roofline_claims import change
from jaxgpt_tools.fusion.xla import COMPILE_ONLY, LAYOUTS

VARIANTS = ("default", MAX_AUTOTUNE_VARIANT)


def autotuned(records: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], dict[str, dict[str, dict[str, Any]]]]:
    """(device, part, shape name, mode) -> {variant: {layout: record}}: Inductor's programs made on a
    device with and without max_autotune, where all four (two variants, two layouts) were made."""
    keys = sorted({(r["device"], r["part"], r["shape"]["name"], r["mode"]) for r in records
                   if r["compiler"] == "inductor" and r.get("variant") == MAX_AUTOTUNE_VARIANT and r["device"] != COMPILE_ONLY},
                  key=lambda k: (k[0], k[1], _seq_len(records, k[2]), k[3]))
    found = {}
    for device, part, shape, mode in keys:
        made: dict[str, dict[str, Any]] = {v: {layout: find(records, compiler="inductor", device=device, part=part, shape=shape, mode=mode,
                                 layout=layout, variant=v) for layout in LAYOUTS} for v in VARIANTS}
        if all(r is not None for by_layout in made.values() for r in by_layout.values()):
            found[(device, part, shape, mode)] = made
    return found


def _seq_len(records: list[dict[str, Any]], shape: str) -> int:
    return next(r["shape"]["seq_len"] for r in records if r["shape"]["name"] == shape)


def gemm_launches(record: dict[str, Any]) -> tuple[int, int]:
    """(Triton GEMM templates, extern GEMM calls) among a program's launches, from its kernel table."""
    table = record.get("kernel_table") or []
    return (sum(row["kind"] == "template" for row in table),
            sum(row["kind"] in ("extern", "fallback") and row["gemm"] for row in table))


def _counts_hold(record: dict[str, Any]) -> bool:
    """Second path: the table's templates against the output code's generated kernels by kind,
    and templates plus extern GEMMs against the program's GEMM count."""
    templates, extern = gemm_launches(record)
    return templates == record.get("generated_by_kind", {}).get("template", 0) and templates + extern == record["gemm_kernels"]


def _ms(record: dict[str, Any]) -> float:
    """The median time of a timed program."""
    return record["time"]["median_ms"]


def _time_text(record: dict[str, Any]) -> str:
    if not record.get("time"):
        return "not timed"
    value = _ms(record)
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.3g} ms"


def _program_text(made: dict[str, dict[str, dict[str, Any]]], shape: dict[str, Any], part: str, mode: str) -> str:
    tuned = made[MAX_AUTOTUNE_VARIANT]
    per_layout = []
    for layout in LAYOUTS:
        templates, extern = gemm_launches(tuned[layout])
        per_layout.append(f"{layout} {_time_text(made['default'][layout])} -> {_time_text(tuned[layout])} "
                          f"({templates} of its {templates + extern} GEMM launches Triton templates)")
    text = f"{PART_NAMES[part]} {MODE_NAMES[mode]} at D {shape['model_dim']}, T {shape['seq_len']:,}: " + ", ".join(per_layout)
    if all(r.get("time") for by_layout in made.values() for r in by_layout.values()):
        text += (f"; separate against merged {change(_ms(made['default']['separate']), _ms(made['default']['merged']))} "
                 f"by default, {change(_ms(tuned['separate']), _ms(tuned['merged']))} autotuned")
    return text


def autotune_claims(records: list[dict[str, Any]]) -> list[Claim]:
    """One sentence per device where both variants were made (none elsewhere)."""
    found = autotuned(records)
    made = []
    for device in sorted({key[0] for key in found}):
        mine = {key: value for key, value in found.items() if key[0] == device}
        programs = [_program_text(value, value["default"]["merged"]["shape"], part, mode)
                    for (_, part, _, mode), value in mine.items()]
        text = (f"Inductor on the {DEVICE_NAMES.get(device, device)} with `max_autotune=True` (each GEMM's kernel chosen by "
                "timing Inductor's Triton templates against the extern library call on the device), median times by "
                "default -> autotuned: " + "; ".join(programs) + ".")
        records_of = [r for value in mine.values() for by_layout in value.values() for r in by_layout.values()]
        made.append(Claim(f"autotune.inductor_{device}", text, lambda records_of=records_of: all(
            _counts_hold(r) and (not r.get("time") or r["time"]["min_ms"] <= r["time"]["median_ms"] <= r["time"]["max_ms"])
            for r in records_of)))
    return made


def autotune_table(records: list[dict[str, Any]]) -> list[str]:
    """Per program, layout and variant: kernels, GEMM launches (templates / extern), median ms and
    its change against the default."""
    found = autotuned(records)
    if not found:
        return []
    lines = ["| device | program | layout | Inductor | kernels | GEMM launches: Triton templates / extern | median ms "
             "| vs default |", "|---|---|---|---|---|---|---|---|"]
    for (device, part, _, mode), made in found.items():
        for layout in LAYOUTS:
            for variant in VARIANTS:
                r = made[variant][layout]
                templates, extern = gemm_launches(r)
                base = made["default"][layout]
                versus = change(_ms(r), _ms(base)) if variant != "default" and r.get("time") and base.get("time") else ""
                lines.append(f"| {DEVICE_NAMES.get(device, device)} | {PART_NAMES[part]} {MODE_NAMES[mode]}, "
                             f"T {r['shape']['seq_len']:,} | {layout} | {'max_autotune' if variant != 'default' else 'default'} "
                             f"| {r['kernels']} | {templates} / {extern} | {_time_text(r).removesuffix(' ms')} | {versus} |")
    return lines + [""]
