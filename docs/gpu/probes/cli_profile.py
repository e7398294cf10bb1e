"""Why is a step of `python -m jaxgpt.train` slower than the same compiled step called in a loop?
(a probe, kept for provenance)

Runs the trainer's own main() with the given flags, with its compiled train step wrapped: each
call's host time (dispatch to return, and return to the next call) is recorded, and calls
--from..--to run under the JAX profiler; the GPU kernels' busy time per step and the host
events with the most time are printed.

    JAX_PLATFORMS=cuda PYTHONPATH=. python3 docs/gpu/probes/cli_profile.py --trace $OUT/trace -- --preset record ...
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import glob
import gzip
import json
import statistics
import sys
import time

import jax

from jaxgpt import train


def summarize(trace_dir: str, steps: int, top: int) -> None:
    path = sorted(glob.glob(f"{trace_dir}/**/perfetto_trace.json.gz", recursive=True))[-1]
    with gzip.open(path) as handle:
        events = json.load(handle)
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {e["pid"]: e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    by_track: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    for event in events:
        if event.get("ph") == "X":
            track = "gpu" if "GPU" in names.get(event["pid"], "") else "host"
            by_track[track][event["name"]] += event.get("dur", 0) / 1e3
    gpu_total = sum(by_track["gpu"].values())
    print(f"GPU kernel busy time: {gpu_total / steps:.1f} ms/step over {steps} steps")
    for track in ("host", "gpu"):
        rows = sorted(by_track[track].items(), key=lambda kv: -kv[1])[:top]
        print(f"top {track} events (ms/step):")
        for name, ms in rows:
            print(f"  {ms / steps:9.2f}  {name[:120]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace", required=True)
    parser.add_argument("--from-call", type=int, default=14)
    parser.add_argument("--to-call", type=int, default=17)
    parser.add_argument("--top", type=int, default=25)
    args, train_argv = parser.parse_known_args()
    train_argv = [a for a in train_argv if a != "--"]
    calls = {"n": 0, "returned": None}
    host = collections.defaultdict(list)
    original = train.compile_steps

    def compile_steps(*a, **kw):
        compiled = original(*a, **kw)
        step_fn = compiled.train

        def traced_step(*step_args):
            now = time.perf_counter()
            if calls["returned"] is not None:
                host["between_calls_ms"].append(1e3 * (now - calls["returned"]))
            calls["n"] += 1
            if calls["n"] == args.from_call:
                jax.profiler.start_trace(args.trace, create_perfetto_trace=True)
            out = step_fn(*step_args)
            if calls["n"] == args.to_call:
                jax.block_until_ready(out)
                jax.profiler.stop_trace()
            calls["returned"] = time.perf_counter()
            host["dispatch_ms"].append(1e3 * (calls["returned"] - now))
            return out

        traced_step._cache_size = step_fn._cache_size  # finish_run reports the compile count
        return dataclasses.replace(compiled, train=traced_step)

    train.compile_steps = compile_steps
    code = train.main(train_argv)
    for key, values in host.items():
        tail = values[5:] or values
        print(f"{key}: median {statistics.median(tail):.1f} ms, max {max(tail):.1f} ms over {len(tail)} calls")
    summarize(args.trace, args.to_call - args.from_call + 1, args.top)
    sys.exit(code)


if __name__ == "__main__":
    main()
