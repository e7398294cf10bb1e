"""Test-wide set-up: 8 virtual CPU devices for JAX, set before JAX is first imported."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
