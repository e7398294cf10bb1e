"""The machine a measurement ran on: the one environment report every tool writes beside its numbers."""

from __future__ import annotations

import contextlib
import os
import platform
import time
from pathlib import Path
from typing import Any


def cpu_flags() -> set[str]:
    """The CPU's feature flags (Linux /proc/cpuinfo); empty where unreadable."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model() -> str | None:
    """The CPU's model name (Linux /proc/cpuinfo); None where unreadable."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


# /proc/cpuinfo's fields that name a CPU exactly where a virtual machine shortens its model name
# ("AMD EPYC"): the vendor, family, model and stepping identify the part, the microcode its revision.
CPU_IDENTITY_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "microcode")


def cpu_identity() -> dict[str, str]:
    """The first CPU's identifying /proc/cpuinfo fields (CPU_IDENTITY_FIELDS, those present), and
    `hypervisor`: "yes" when its flags say it runs under one (then the model name may be the
    hypervisor's, not the part's). Empty where unreadable."""
    try:
        block = Path("/proc/cpuinfo").read_text().split("\n\n", 1)[0]
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
    found = {key.strip(): value.strip() for key, value in fields.items() if key.strip() in CPU_IDENTITY_FIELDS}
    if found:
        flags = {key.strip(): value for key, value in fields.items()}.get("flags", "").split()
        found["hypervisor"] = "yes" if "hypervisor" in flags else "no"
    return found


FLAGS_SHOWN = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def summary() -> tuple[str, str]:
    """Two lines for a generated page: the machine (CPU model, cores, the SIMD flags that decide
    bf16 and fp32 numerics and speed) and the versions (python, jax, torch)."""
    info, flags = describe(), cpu_flags()
    shown = ", ".join(f"{flag} {'yes' if flag in flags else 'no'}" for flag in FLAGS_SHOWN)
    return (f"{cpu_model() or info['processor']}, {info['cpu_count']} CPUs; {shown}",
            f"python {info['python']}, jax {info['jax']}, torch {info['torch']}")


def describe() -> dict[str, Any]:
    """Versions, host, CPU, load, JAX's backend and devices, and the CUDA GPU torch sees (name,
    memory, SMs, capability) where there is one; a package that is not installed reads None.
    Imports jax (its backend starts here: set JAX_PLATFORMS before calling)."""
    import jax

    info: dict[str, Any] = {
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "device_kind": jax.devices()[0].device_kind,
        "load_average_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    try:
        import torch
    except ImportError:
        info["torch"] = None
    else:
        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info.update(gpu=props.name, gpu_memory_mib=props.total_memory // 2**20, sm_count=props.multi_processor_count,
                        capability=f"{props.major}.{props.minor}", cuda=torch.version.cuda)
    try:
        import triton
    except ImportError:
        info["triton"] = None
    else:
        info["triton"] = triton.__version__
    return info


@contextlib.contextmanager
def torch_threads(count: int | None):
    """torch's intra-op threads set to `count` for the block (None: left as they are), then restored."""
    import torch

    previous = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
