"""jaxgpt_tools.common.machine: the environment report written beside every measurement."""

from __future__ import annotations

import os

import jax

from jaxgpt_tools.common import machine


def test_describe_reports_this_process_versions_and_devices():
    info = machine.describe()
    assert info["jax"] == jax.__version__ and info["backend"] == jax.default_backend()
    assert info["devices"] == [str(d) for d in jax.devices()] and info["cpu_count"] == os.cpu_count()
    assert info["python"].count(".") == 2 and info["date_utc"][:2] == "20"
    import torch

    assert info["torch"] == torch.__version__
    assert ("gpu" in info) == torch.cuda.is_available()  # GPU fields only where torch sees one


def test_cpu_flags_reads_proc_cpuinfo(monkeypatch, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n")
    real_path = machine.Path
    monkeypatch.setattr(machine, "Path", lambda name: cpuinfo if name == "/proc/cpuinfo" else real_path(name))
    assert machine.cpu_flags() == {"fpu", "avx2", "avx512_bf16"}
    monkeypatch.setattr(machine, "Path", lambda name: tmp_path / "missing")
    assert machine.cpu_flags() == set()


def test_cpu_identity_reads_the_first_cpu(monkeypatch, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                       "model name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: fpu avx2 hypervisor\n\n"
                       "processor\t: 1\nmodel\t\t: 99\n")
    real_path = machine.Path
    monkeypatch.setattr(machine, "Path", lambda name: cpuinfo if name == "/proc/cpuinfo" else real_path(name))
    assert machine.cpu_identity() == {"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17", "model name": "AMD EPYC",
                                      "stepping": "1", "hypervisor": "yes"}
    monkeypatch.setattr(machine, "Path", lambda name: tmp_path / "missing")
    assert machine.cpu_identity() == {}
