"""docs/FUSION.md's provenance sentence: the machine and the compiler versions each column was
made with, read from what results.json's runs record (their `environment`), saying what they do
not record (older runs name the CPU only as its /proc/cpuinfo model name gave it)."""

from __future__ import annotations

from typing import Any

from jaxgpt_tools.fusion.claims import Claim
from jaxgpt_tools.fusion.records import DEVICE_NAMES, run_compilers

NUMBERS = {2: "two", 3: "three", 4: "four"}
# Why the CPU column keeps CI's torch when the H100 column needs a CUDA build.
ONE_TORCH_WHY_NOT = (
    "One torch for both would have to be the CUDA build (the H100 leg needs its CUDA codegen and triton), and CI's "
    "venv keeps the CPU-only wheel (the Makefile pins it so that no test pulls a CUDA build); on CI's torch the CPU "
    "column is the one `make test` recompiles against the stored kernels (tests/tools/fusion/test_drift.py) and the "
    "one `make fusion` times in one process beside XLA, so it stays there")


def _environments(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [run["environment"] for run in runs if run.get("environment")]


def cpu_text(envs: list[dict[str, Any]]) -> str:
    """The CPU as the runs record it: its name, its identity and flags where recorded, or that they are not."""
    # A host is its name, cores and widest vector ISA: VMs of one name may sit on different CPUs.
    hosts = sorted({f"{e.get('host')}, {e.get('cpu_count')} cores, "
                    f"{'AVX-512' if any(f.startswith('avx512') for f in e.get('isa', [])) else 'no AVX-512'}" for e in envs})
    names = sorted({str(e.get("cpu_model")) for e in envs})
    identities = [e["cpu_identity"] for e in envs if e.get("cpu_identity")]
    flags = [e["cpu_flags"] for e in envs if e.get("cpu_flags")]
    isa = max((len(e.get("isa", [])) for e in envs), default=0)
    text = (f"every leg ran on {'one host' if len(hosts) == 1 else f'{len(hosts)} hosts'} ({'; '.join(hosts)}), whose CPU "
            f"the runs name as {' / '.join(repr(n) for n in names)} (the model name its /proc/cpuinfo gives)")
    if identities:
        i = identities[0]
        text += (f": vendor {i.get('vendor_id', '?')}, family {i.get('cpu family', '?')}, model {i.get('model', '?')}, "
                 f"stepping {i.get('stepping', '?')}, microcode {i.get('microcode', '?')}, under a hypervisor: "
                 f"{i.get('hypervisor', '?')}")
    else:
        text += ("; the stored runs record no vendor, family, model or stepping, which runs made from now on record "
                 "(jaxgpt_tools.common.machine.cpu_identity)")
    if flags:
        text += f"; all {len(flags[0])} of its flags are in results.json"
    else:
        text += (f"; of its flags they keep the {isa} vector-ISA ones listed above (runs made from now on keep all of "
                 "them, `cpu_flags`)")
    return text + "."


def _versions(runs: list[dict[str, Any]], compiler: str, package: str) -> dict[str, dict[str, str]]:
    """Column (the device's short name) -> the package versions of the runs that compiled `compiler` there."""
    out = {}
    for run in runs:
        versions = (run.get("environment") or {}).get("versions", {})
        if compiler in run_compilers(run) and versions.get(package):
            out[DEVICE_NAMES.get(run["device"], run["device"]).split(" (")[0]] = versions
    return out


def versions_text(runs: list[dict[str, Any]]) -> str:
    """Which torch compiled each Inductor column and which jax each XLA column."""
    torch, jax = _versions(runs, "inductor", "torch"), _versions(runs, "xla", "jax")
    parts = []
    count = len({v["torch"] for v in torch.values()})
    if torch:
        found = {column: v["torch"] + (f" with triton {v['triton']}" if v.get("triton") else "") for column, v in torch.items()}
        if count == 1:
            parts.append(f"Inductor's columns were compiled by one torch, {next(iter(torch.values()))['torch']}"
                         + build_text(runs) + kernels_as_before_text(runs))
        else:
            parts.append(f"Inductor's columns were compiled by {NUMBERS.get(count, count)} torch versions: "
                         + ", ".join(f"{v} for its {column} column" for column, v in found.items())
                         + " (the H100 leg runs in the CUDA-torch venv, `make torch-cuda`; a `+cpu` version is a CPU-only "
                           "wheel), so its two columns differ in compiler version as well as target")
    if jax:
        numbers = sorted({v["jax"] for v in jax.values()})
        plugins = sorted({f"{k} {x}" for v in jax.values() for k, x in v.items() if k.startswith("jax-cuda")})
        parts.append("XLA's by " + (f"one jax, {numbers[0]}" if len(numbers) == 1 else "jax " + " and ".join(numbers))
                     + (f" (with {', '.join(plugins)} for the H100)" if plugins else ""))
    return "; ".join(parts) + "." + (f" {ONE_TORCH_WHY_NOT}." if count > 1 else "") if parts else ""


def build_text(runs: list[dict[str, Any]]) -> str:
    """The build of the one torch where its version string names one (torch.__version__'s local
    label, e.g. `+cu130`, which the package metadata leaves out): the CUDA build compiles the CPU column too."""
    labels = sorted({env["torch"].partition("+")[2] for run in runs if (env := run.get("environment") or {}).get("torch")
                     and "+" in env["torch"] and not run.get("compiler")})
    cuda = [label for label in labels if label.startswith("cu")]
    return (f" (its CUDA build, torch.__version__ `{'`, `'.join('+' + label for label in cuda)}`, which compiles for the "
            "CPU as well as for the H100)" if cuda else "")


def kernels_as_before_text(runs: list[dict[str, Any]]) -> str:
    """What a run that replaced an earlier one's programs found (report.load_results: `kernels_as_before`)."""
    parts = []
    for run in runs:
        before = run.get("kernels_as_before")
        if not before or run.get("compiler") or not before.get("versions"):
            continue
        was = ", ".join(f"{k} {v}" for k, v in sorted(before["versions"].items()))
        parts.append(f"its {DEVICE_NAMES.get(run['device'], run['device'])} column, compiled before by {was}, came out the "
                     f"same kernel for kernel in {before['same']} of its {before['programs']} programs"
                     + (" (so `make test`, on CI's CPU-only wheel, still recompiles it against the stored kernels: "
                        "tests/tools/fusion/test_drift.py)" if before["same"] == before["programs"] else ""))
    return ("; " + "; ".join(parts)) if parts else ""


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def times_text(runs: list[dict[str, Any]]) -> str:
    """The measured wall time of each leg whose run records one (`wall_s`), with its command."""
    timed = [run for run in runs if run.get("wall_s")]
    if not timed:
        return ""
    def what(run: dict[str, Any]) -> str:
        if run.get("compiler"):
            return f" {run.get('leg') or run['compiler']} leg"
        made = sorted(set(run.get("compilers", ["xla", "inductor"])) | set(run.get("superseded", [])))
        timing = run.get("timing")
        return (f" legs ({' and '.join(made)}; " + (f"timed, a pair waiting up to {timing['idle_wait_s']:.0f} s for an idle "
                                                      "machine" if timing else "not timed")
                + (f"; its {', '.join(run['superseded'])} programs since made again by the run after it"
                   if run.get("superseded") else "") + ")")

    parts = [f"{DEVICE_NAMES.get(run['device'], run['device'])}{what(run)} {_minutes(run['wall_s'])} (`{run['command']}`)"
             for run in timed]
    cores = sorted({run["environment"].get("cpu_count") for run in timed if run.get("environment")} - {None})
    text = (f"Measured wall time of the legs on this machine ({'/'.join(map(str, cores)) or 'unrecorded'} cores): "
            + "; ".join(parts))
    commands = {run["command"] for run in timed}
    if len(timed) > 1 and len(commands) == 1:  # one command made every leg: its time, but for its start and the page
        text += f"; in all {_minutes(sum(run['wall_s'] for run in timed))}, every leg from one run of `{commands.pop()}`"
    return text + "."


def wall_covers_compiles(run: dict[str, Any], records: list[dict[str, Any]], sweeps: list[dict[str, Any]],
                         leg_variants: frozenset[str] = frozenset()) -> bool:
    """Second path for a leg's wall time: at least the compile seconds of the programs it made (a
    GEMM-choice leg's: its `variants`; a column's: the rest, `leg_variants` being the legs')."""
    mine = [r for r in records if r["device"] == run["device"] and r["compiler"] in run_compilers(run)
            and ((r.get("variant") in run["variants"]) if run.get("leg") else r.get("variant") not in leg_variants)]
    swept = sweeps if run.get("compiler") == "xla" and not run.get("leg") else []
    return run["wall_s"] >= sum(r.get("compile_s", 0) for r in mine + swept)


def provenance_claim(runs: list[dict[str, Any]], records: list[dict[str, Any]] | None = None,
                     sweeps: list[dict[str, Any]] | None = None) -> list[Claim]:
    """One sentence (none without recorded environments): the CPU and the compiler versions."""
    envs = _environments(runs)
    if not envs:
        return []
    text = "Provenance, as the stored runs record it: " + cpu_text(envs) + " " + versions_text(runs) + " " + times_text(runs)

    legs = frozenset(v for run in runs if run.get("leg") for v in run.get("variants", []))

    def check() -> bool:  # another field: describe()'s own torch and jax against the package versions of the same process
        local = [run for run in runs if run.get("environment") and not run.get("compiler")]
        release = lambda version: str(version).partition("+")[0] if version else version  # noqa: E731 - a CUDA build's +cu130 label
        return all(release(run["environment"].get("torch")) == release(run["environment"]["versions"].get("torch"))
                   and run["environment"].get("jax") == run["environment"]["versions"].get("jax") for run in local) \
            and all(0 <= run["kernels_as_before"]["same"] <= run["kernels_as_before"]["programs"]
                    for run in runs if run.get("kernels_as_before")) \
            and all(set(e.get("isa", [])) <= set(e.get("cpu_flags") or e.get("isa", [])) for e in envs) \
            and all(wall_covers_compiles(run, records or [], sweeps or [], legs) for run in runs if run.get("wall_s"))
    return [Claim("method.provenance", text.strip(), check)]
