"""Benchmark the record's Newton-Schulz work, on one device and split over the devices of a mesh.

    python scripts/bench_ns.py --devices 8 --json

`--devices N` (N > 1) on a CPU makes XLA expose N virtual host devices; it must be set before
JAX starts, which is why the library (jaxgpt_tools/bench/newton_schulz.py) imports JAX only inside its
functions. Virtual devices share the machine's cores, so on a CPU the split shows the per-device
work shrinking, not a wall-clock speedup.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from jaxgpt_tools.bench.newton_schulz import bench_newton_schulz, scaled_record_shapes
from jaxgpt_tools.common import command


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=8, help="mesh size of the split run (virtual CPU devices)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--scale", type=int, default=1, help="divide every dim by this (quick runs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.devices > 1 and "jax" not in sys.modules:
        flag = f"--xla_force_host_platform_device_count={args.devices}"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
    return command.run("bench_ns", lambda: show(bench_newton_schulz(
        scaled_record_shapes(args.scale), devices=args.devices, repeats=args.repeats, dtype=args.dtype), args.json))


def show(result: dict, as_json: bool) -> None:
    print(json.dumps(result) if as_json else "\n".join(f"{key}: {value}" for key, value in result.items()))


if __name__ == "__main__":
    sys.exit(main())
