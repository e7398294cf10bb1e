"""Where does one device's record training step spend its time on a GPU? (a probe, kept for provenance)

Builds the trainer's own compiled step (record preset, 1 x 65,536 tokens, one device), times it,
and with --trace DIR records a JAX profiler trace of a few steps and sums the GPU kernels' time
by kernel name (top-N table on stdout, everything in DIR/kernels.json).

    JAX_PLATFORMS=cuda PYTHONPATH=. python3 docs/gpu/probes/step_profile.py --attention pallas --trace $OUT/prof
    ... --loss-chunk 0          # the loss without 8192-token chunks
    XLA_FLAGS=--xla_gpu_enable_triton_gemm=false ...   # GEMMs through cuBLAS
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpt import config as cfg
from jaxgpt import train


def fp32_segment_sum_lookup():
    """Embedding lookup whose backward sums each id's rows in fp32 (one rounding to the table's
    dtype), instead of jnp.take's scatter-add in the table's dtype."""

    @jax.custom_vjp
    def lookup(table, ids):
        return jnp.take(table, ids, axis=0)

    def fwd(table, ids):
        return lookup(table, ids), (ids, jnp.zeros((table.shape[0], 0), table.dtype))  # shape and dtype only

    def bwd(res, g):
        ids, like = res
        rows, dtype = like.shape[0], like.dtype
        flat_ids, flat_g = ids.reshape(-1), g.reshape(-1, g.shape[-1]).astype(jnp.float32)
        return jax.ops.segment_sum(flat_g, flat_ids, num_segments=rows).astype(dtype), None

    lookup.defvjp(fwd, bwd)
    return lookup


def step_setup(args: argparse.Namespace):
    if args.embed_grad == "segsum":
        from jaxgpt import model as model_lib

        lookup = fp32_segment_sum_lookup()
        model_lib.Embedding.__call__ = lambda self, ids: lookup(self.weight[...], ids)
    preset = cfg.get_preset("record")
    model_overrides = {"attention_backend": args.attention}
    if args.loss_chunk is not None:
        model_overrides["loss_chunk_tokens"] = args.loss_chunk or None
    preset = cfg.replace(preset, model=cfg.replace(preset.model, **model_overrides))
    mesh = jax.make_mesh((1,), (train.AXIS,))
    preset, graph, host = train.build_model(preset, train.RunOptions(), num_devices=1)
    optimizer = train.make_optimizer(preset)
    compiled = train.compile_steps(mesh, graph, optimizer)
    params = train.replicate(host, compiled.replicated)
    opt_state = jax.jit(optimizer.init, out_shardings=compiled.replicated)(params)
    if args.shard:  # real tokens: frequent ids repeat, as in training
        tokens = np.fromfile(args.shard, dtype=np.uint16)[512: 512 + args.tokens + 1].astype(np.int32)[None]
    else:
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, 50256, size=(1, args.tokens + 1)).astype(np.int32)
        tokens[0, rng.choice(args.tokens, args.tokens // 1000, replace=False)] = 50256  # ~1000-token documents
    inputs = jax.device_put(tokens[:, :-1], compiled.batch)
    targets = jax.device_put(tokens[:, 1:], compiled.batch)
    window = jax.device_put(np.int32(args.window), compiled.replicated)
    return compiled, params, opt_state, inputs, targets, window


def kernel_table(trace_dir: str) -> list[tuple[str, float, int]]:
    """(kernel name, total ms, calls) over the GPU tracks of the perfetto trace, largest first."""
    path = sorted(glob.glob(f"{trace_dir}/**/perfetto_trace.json.gz", recursive=True))[-1]
    with gzip.open(path) as handle:
        events = json.load(handle)
    events = events["traceEvents"] if isinstance(events, dict) else events
    process_names = {e["pid"]: e.get("args", {}).get("name", "") for e in events
                     if e.get("ph") == "M" and e.get("name") == "process_name"}
    gpu_pids = {pid for pid, name in process_names.items() if "GPU" in name or "gpu" in name}
    totals: dict[str, list[float]] = collections.defaultdict(list)
    for event in events:
        if event.get("ph") == "X" and event.get("pid") in gpu_pids:
            totals[event["name"]].append(event.get("dur", 0) / 1e3)
    return sorted(((name, sum(d), len(d)) for name, d in totals.items()), key=lambda row: -row[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attention", default="pallas")
    parser.add_argument("--loss-chunk", type=int, default=None, help="0: unchunked; default: the preset's")
    parser.add_argument("--tokens", type=int, default=65536)
    parser.add_argument("--window", type=int, default=14)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--shard", default=None, help="take the tokens from this .bin shard (default: uniform random)")
    parser.add_argument("--embed-grad", choices=("autodiff", "segsum"), default="autodiff")
    parser.add_argument("--trace", default=None)
    parser.add_argument("--top", type=int, default=45)
    args = parser.parse_args()
    compiled, params, opt_state, inputs, targets, window = step_setup(args)
    start = time.perf_counter()
    params, opt_state, loss = compiled.train(params, opt_state, inputs, targets, window)
    jax.block_until_ready(loss)
    print(f"first step (compile) {time.perf_counter() - start:.1f} s, loss {float(loss):.4f}", flush=True)
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        params, opt_state, loss = compiled.train(params, opt_state, inputs, targets, window)
        jax.block_until_ready(loss)
        times.append(1e3 * (time.perf_counter() - start))
    stats = jax.devices()[0].memory_stats() or {}
    print(f"RESULT shard={args.shard} embed_grad={args.embed_grad} attention={args.attention} loss_chunk={args.loss_chunk} window={args.window}: median step "
          f"{statistics.median(times):.1f} ms (min {min(times):.1f}), peak {stats.get('peak_bytes_in_use', 0) / 2**20:.0f} MiB",
          flush=True)
    if args.trace:
        jax.profiler.start_trace(args.trace, create_perfetto_trace=True)
        for _ in range(3):
            params, opt_state, loss = compiled.train(params, opt_state, inputs, targets, window)
        jax.block_until_ready(loss)
        jax.profiler.stop_trace()
        rows = kernel_table(args.trace)
        total = sum(ms for _, ms, _ in rows)
        with open(f"{args.trace}/kernels.json", "w") as handle:
            json.dump({"steps": 3, "total_ms": total, "kernels": rows}, handle)
        print(f"GPU kernel time over 3 steps: {total:.1f} ms ({total / 3:.1f} ms/step); top {args.top}:")
        for name, ms, calls in rows[: args.top]:
            print(f"{ms / 3:8.2f} ms/step {calls // 3:5d}x  {name[:110]}")


if __name__ == "__main__":
    main()
