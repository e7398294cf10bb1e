"""jaxgpt_tools.fusion.provenance: the page's CPU and compiler versions read from the runs, what
the stored runs lack said as such, and what a run made now records."""

from __future__ import annotations

from jaxgpt_tools.fusion import provenance
from jaxgpt_tools.fusion.report import REPO_ROOT, load_results


def run(device, compiler=None, **environment):
    env = {"host": "h", "cpu_count": 2, "cpu_model": "AMD EPYC", "isa": ["avx2"], "versions": {}, **environment}
    return {"device": device, **({"compiler": compiler} if compiler else {}), "environment": env}


def test_the_committed_runs_name_their_torches_and_why_not_one():
    runs = load_results([REPO_ROOT / "artifacts" / "fusion" / "results.json"])["runs"]
    (claim,) = provenance.provenance_claim(runs)
    assert claim.check()
    # The committed runs were made after cpu_identity and the legs' wall times were recorded.
    assert "'AMD EPYC'" in claim.text and "vendor AuthenticAMD, family 25" in claim.text and "min (`" in claim.text
    # `make fusion` compiles and times the CPU column on CI's CPU wheel, the H100 column in the CUDA-torch venv.
    assert "two torch versions: 2.13.0+cpu for its CPU column, 2.14.1 with triton 3.8.0 for its H100 column" in claim.text
    assert provenance.ONE_TORCH_WHY_NOT in claim.text
    # Every leg from one `make fusion`: their sum is stated.
    assert "every leg from one run of `python scripts/fusion_report.py --write-docs`" in claim.text


def test_two_torches_are_named_with_why_not_one():
    runs = [{"device": "cpu", "compilers": ["inductor"], "environment": {"versions": {"torch": "2.13.0+cpu"}}},
            run("h100-compile-only", "inductor", versions={"torch": "2.14.1", "triton": "3.8.0"})]
    text = provenance.versions_text(runs)
    assert "two torch versions: " in text and "2.13.0+cpu for its CPU column" in text
    assert "2.14.1 with triton 3.8.0 for its H100 column" in text and provenance.ONE_TORCH_WHY_NOT in text


def test_a_cpu_run_of_xla_alone_names_no_torch_for_inductor():
    """A CPU run that compiled only XLA (`compilers`) has torch installed beside jax: its torch is
    not the Inductor column's (the Inductor run on the same device is)."""
    runs = [{"device": "cpu", "compilers": ["inductor"], "environment": {"versions": {"torch": "2.14.1"}}},
            {"device": "cpu", "compilers": ["xla"], "environment": {"versions": {"jax": "0.10.2", "torch": "2.13.0+cpu"}}},
            run("h100-compile-only", "inductor", versions={"torch": "2.14.1", "triton": "3.8.0"})]
    assert provenance.versions_text(runs).startswith("Inductor's columns were compiled by one torch, 2.14.1")


def test_a_run_that_records_the_cpu_and_one_torch():
    identity = {"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17", "stepping": "1", "microcode": "0x1",
                "hypervisor": "yes"}
    versions = {"torch": "2.14.1", "jax": "0.10.2"}
    runs = [run("cpu", cpu_identity=identity, cpu_flags=["avx2", "fpu"], torch="2.14.1", jax="0.10.2", versions=versions),
            run("h100-compile-only", "inductor", versions={"torch": "2.14.1", "triton": "3.8.0"})]
    (claim,) = provenance.provenance_claim(runs)
    assert "family 25, model 17, stepping 1" in claim.text and "all 2 of its flags" in claim.text
    assert "one torch, 2.14.1" in claim.text and claim.check()
    assert provenance.provenance_claim([{"device": "cpu"}]) == []


def test_a_run_made_now_records_the_cpu_identity_and_every_flag(monkeypatch):
    from jaxgpt_tools.fusion import report

    monkeypatch.setattr(report.machine, "cpu_identity", lambda: {"vendor_id": "v", "hypervisor": "no"})
    monkeypatch.setattr(report, "cpu_flags", lambda: {"fpu", "avx2"})
    env = report.environment()
    assert env["cpu_identity"] == {"vendor_id": "v", "hypervisor": "no"} and env["cpu_flags"] == ["avx2", "fpu"]
    assert env["isa"] == ["avx2"]
