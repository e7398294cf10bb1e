"""The fusion study's sweep over widths and head dims (fusion_sweep.width_sweep's records): XLA's
merge decision for the H100 (compiled without a GPU, default threshold) and the byte change of
separate against merged, at D 768 to 2,048 and head dims 64 and 128; its sentence (checked), its
table and its figure, and the DebugOptions XLA compiled with (fusion_sweep.debug_options).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxgpt_tools.fusion.claims import Claim
from jaxgpt_tools.fusion.sweep import (
    DOT_MERGER_FLAG,
    default_threshold,
    projection_bytes,
    switch_point,
    switch_seq_len,
    width_decisions,
)


def _pct(change: float) -> str:
    return f"{100 * change:+.0f}%"


def merge_threshold(sweep: list[dict[str, Any]]) -> int | None:
    """The whole MiB the T sweep puts the default's switch at, when exactly one does."""
    if not any(r["threshold_mb"] == 0 and r["mode"] == "fwd" for r in sweep):
        return None
    guess = default_threshold(sweep)
    return guess[0] if len(guess) == 1 else None


def threshold_claims(sweep: list[dict[str, Any]], options: dict[str, Any]) -> list[Claim]:
    """The default against an explicit threshold of the guessed size, and what XLA's DebugOptions
    dump says of it."""
    mb = merge_threshold(sweep)
    explicit = [r for r in sweep if r["mode"] == "fwd" and r["layout"] == "separate" and r["threshold_mb"] == mb]
    default = {r["T"]: r["gemm_kernels"] for r in sweep if r["mode"] == "fwd" and r["layout"] == "separate"
               and r["threshold_mb"] is None}
    if mb is None or not explicit or not options:
        return []
    same = all(default.get(r["T"]) == r["gemm_kernels"] for r in explicit)
    at_32 = switch_point(sweep, 32) if any(r["threshold_mb"] == 32 for r in sweep) else None
    lines = len(options["text"].splitlines())
    text = (f"The default is {mb} MiB in effect, not the 32 MiB that XLA's DefaultDebugOptionsIgnoringFlags "
            f"(xla/debug_options_flags.cc) sets in its published sources: compiled with `{DOT_MERGER_FLAG}={mb}` set, the "
            f"separate forward takes {'the same' if same else 'a different'} decision as under the default at every T swept "
            f"({len(explicit)})" + (f", while with 32 set it stops merging after T {at_32['last_merged']:,}" if at_32 else "")
            + f". XLA's own dump of the DebugOptions the program was compiled with (`--xla_dump_to`, its "
            f"`{options['file'].split('.', 1)[1]}` file, {lines} lines) "
            + (f"sets the threshold to {options['threshold_mb']} MiB" if options["threshold_mb"] is not None else
               "does not set the threshold: jax passes only the options it sets, and the CUDA plugin, which exports only "
               "its PJRT entry points, fills the rest from its own build's defaults, so the value is read from its "
               "decisions, not from a file")
            + ". The gap is this build's default, not a different rule: the sweep's 32 MiB column switches where the rule "
              "with 32 MiB says.")

    def check() -> bool:
        """Second path: the explicit column equals the default's everywhere, and 32 MiB's switch is the rule's."""
        rule = at_32 is None or (at_32["last_merged"] <= at_32["crossing_T"] < at_32["first_unmerged"])
        return same and rule and (options["threshold_mb"] is None) == (f"{DOT_MERGER_FLAG}:" not in options["text"])
    return [Claim("sweep.threshold", text, check)]


def width_claims(width_sweep: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> list[Claim]:
    """The merge decision and the byte change across D and head dims."""
    mb = merge_threshold(sweep)
    if not width_sweep or mb is None:
        return []
    rows = width_decisions(width_sweep, mb)
    dims, heads, lens = sorted({r["D"] for r in rows}), sorted({r["head_dim"] for r in rows}), sorted({r["T"] for r in rows})
    merged_at = {t: [d for d in dims if all(r["gemms"] == 1 for r in rows if r["D"] == d and r["T"] == t)] for t in lens}
    where = "; ".join(f"at T {t:,} " + ("at every width" if merged_at[t] == dims else "at none" if not merged_at[t] else
                                        f"up to D {max(merged_at[t]):,}") for t in lens)
    last = max(lens)
    change = {(r["D"], r["head_dim"]): r for r in rows if r["T"] == last}
    def span(key: str) -> str:
        """The change at the narrowest and the widest D, a range over the head dims where they differ."""
        out = []
        for d in (dims[0], dims[-1]):
            low, high = (_pct(f(change[(d, h)][key] for h in heads)) for f in (min, max))
            out.append(f"{low if low == high else f'{low} to {high}'} at D {d:,}")
        return ", ".join(out)

    text = (f"Across widths (D {', '.join(f'{d:,}' for d in dims)}) and head dims ({', '.join(map(str, heads))}), XLA for the "
            f"H100 (compiled without a GPU, no autotuning, default threshold) merges the separate projections exactly where "
            f"the rule with {mb} MiB says (a projection's 4 T D + 2 D^2 bytes at most {mb} MiB): {where}; the switch falls "
            f"from T {switch_seq_len(dims[0], mb):,.0f} at D {dims[0]:,} to T {switch_seq_len(dims[-1], mb):,.0f} at D "
            f"{dims[-1]:,}, and the head dim moves no decision. Separate against merged at T {last:,} (one byte model, over "
            f"both head dims): forward {span('fwd_bytes_change')}"
            + (f"; forward+backward {span('fwdbwd_bytes_change')}" if all("fwdbwd_bytes_change" in r for r in change.values())
               else "") + ".")

    def check(rows=rows) -> bool:
        """The rule predicts every separate forward's GEMMs, and both head dims take the same decision."""
        by: dict[tuple[int, int], set[int]] = {(r["D"], r["T"]): set() for r in rows}
        for r in rows:
            by[(r["D"], r["T"])].add(r["gemms"])
        return all(r["gemms"] == r["predicted"] for r in rows) and all(len(v) == 1 for v in by.values()) and all(
            (projection_bytes(r["D"], r["T"]) <= mb * 2**20) == (r["gemms"] == 1) for r in rows)
    return [Claim("sweep.widths", text, check)]


def width_table(width_sweep: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> list[str]:
    """(D, head dim) x T: the separate forward's GEMMs and its byte change against merged."""
    mb = merge_threshold(sweep)
    if not width_sweep or mb is None:
        return []
    rows = width_decisions(width_sweep, mb)
    lens = sorted({r["T"] for r in rows})
    lines = ["| D | head dim | " + " | ".join(f"T {t:,}: separate GEMMs, bytes vs merged" for t in lens) + " |",
             "|---|---|" + "---|" * len(lens)]
    for dim, head in sorted({(r["D"], r["head_dim"]) for r in rows}):
        found = {r["T"]: r for r in rows if (r["D"], r["head_dim"]) == (dim, head)}
        cells = []
        for t in lens:
            r = found.get(t)
            if r is None:
                cells.append("-")
                continue
            cell = f"{r['gemms']}, fwd {_pct(r['fwd_bytes_change'])}" if "fwd_bytes_change" in r else f"{r['gemms']}"
            cells.append(cell + (f", fwd+bwd {_pct(r['fwdbwd_bytes_change'])}" if "fwdbwd_bytes_change" in r else ""))
        lines.append(f"| {dim:,} | {head} | " + " | ".join(cells) + " |")
    return lines + [""]


def plot_widths(width_sweep: list[dict[str, Any]], sweep: list[dict[str, Any]], path: Path) -> None:
    """Top: the rule's switch T against D (the line) and each swept (D, T) merged (filled) or not
    (open), both head dims; bottom: separate's byte change against merged, per T and head dim."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mb = merge_threshold(sweep)
    if mb is None:
        return
    rows = width_decisions(width_sweep, mb)
    dims = sorted({r["D"] for r in rows})
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    grid = list(range(dims[0], dims[-1] + 1, 32))
    top.plot(grid, [switch_seq_len(d, mb) for d in grid], color="grey", label=f"rule's switch T ({mb} MiB)")
    for r in rows:
        offset = 1.04 if r["head_dim"] == max(x["head_dim"] for x in rows) else 0.96
        top.plot(r["D"], r["T"] * offset, "o", color="C0" if r["head_dim"] == 64 else "C1",
                 fillstyle="full" if r["gemms"] == 1 else "none")
    top.set_yscale("log", base=2)
    top.set_ylabel("T (filled: merged into 1 GEMM)", fontsize=8)
    top.legend(fontsize=7)
    for i, (t, key) in enumerate(sorted({(r["T"], k) for r in rows for k in ("fwd_bytes_change", "fwdbwd_bytes_change")
                                         if k in r})):
        for head, style in ((64, "-"), (128, "--")):
            pts = sorted((r["D"], 100 * r[key]) for r in rows if r["T"] == t and r["head_dim"] == head and key in r)
            if pts:
                bottom.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", ms=3, color=f"C{i + 2}",
                            label=f"T {t:,}, {'fwd' if key.startswith('fwd_') else 'fwd+bwd'}, head dim {head}")
    bottom.axhline(0, color="grey", linewidth=0.6)
    bottom.set_ylabel("separate vs merged bytes (%)", fontsize=8)
    bottom.set_xlabel("model width D", fontsize=8)
    bottom.legend(fontsize=6, ncol=2)
    fig.suptitle("XLA for the H100 (compiled without a GPU, no autotuning): the merge decision across widths", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
