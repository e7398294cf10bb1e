"""Test-wide set-up: 8 virtual CPU devices for JAX, set before JAX is first imported, and
`gpu`-marked tests skipped where no CUDA device is visible (so `pytest -m "not slow"` is the
quick loop on any machine; scripts/gpu_check.py runs `-m gpu` with JAX_PLATFORMS=cuda)."""

import importlib.util
import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()


def _cuda_visible() -> bool:
    """A CUDA device that JAX (under this JAX_PLATFORMS) or torch can use."""
    import jax

    if jax.default_backend() == "gpu":
        return True
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.hookimpl(trylast=True)  # after -m has deselected what it deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items or _cuda_visible():  # the check imports jax and torch: only when it matters
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU; none visible (JAX_PLATFORMS={os.environ['JAX_PLATFORMS']})")
    for item in gpu_items:
        item.add_marker(skip)
