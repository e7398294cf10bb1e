"""Which launch settings make each Pallas attention kernel fastest on this GPU? (a probe)

Sweeps each kernel's `KernelTiles` (block_q, block_k, num_warps, num_stages) on its own, the other
two kernels at their defaults, at the record's shapes (B 1, T 65,536, H 6, Dh 128, bf16; documents
from jaxgpt_tools.bench_attention_gpu.document_tokens with mean 1,000 tokens) for windows 4 and 14:
  forward  the forward alone (median ms);
  dq       forward + backward with the default forward and dK/dV (only dQ's setting changes);
  dkdv     forward + backward with the default forward and dQ (only dK/dV's setting changes);
then times the best of each (least W 4 + W 14 time) together against `Tiles()`, forward and
forward + backward. One JSON object per line to --out (and RESULT lines on stdout); a setting
Triton refuses (e.g. shared memory) is a result too. Stops starting new settings after
--budget-s seconds and still times the combination of the best found.

On a GPU (the sweep stops after --budget-s = 210 s; then the combination and the exit, within 5 minutes):
    JAX_PLATFORMS=cuda PYTHONPATH=. python3 docs/gpu/probes/tile_sweep.py --out $OUT/tile_sweep.jsonl
With no GPU, on a CPU with the jax CUDA plugin (which settings Triton accepts for an H100; no
timings, "compiled without a GPU, no autotuning"):
    PYTHONPATH=. python docs/gpu/probes/tile_sweep.py --compile-only --out runs/tile_sweep_compile.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any, Callable

KERNELS = ("forward", "dq", "dkdv")
TILE_PAIRS = ((64, 64), (128, 64), (64, 128), (128, 128))  # (block_q, block_k)
WARPS = (4, 8)
STAGES = (1, 2, 3)


def candidates() -> list[tuple[int, int, int, int]]:
    """(block_q, block_k, num_warps, num_stages) of every setting tried for each kernel."""
    return [(bq, bk, w, s) for (bq, bk), w, s in itertools.product(TILE_PAIRS, WARPS, STAGES)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS), help="kernels to sweep")
    parser.add_argument("--windows", nargs="+", type=int, default=[4, 14], help="windows in 128-token blocks")
    parser.add_argument("--seq-len", type=int, default=65536)
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per median (after warm-up)")
    parser.add_argument("--limit", type=int, default=None, help="try only the first N settings per kernel")
    parser.add_argument("--budget-s", type=float, default=210.0,
                        help="start no new setting after this many seconds (the best-of combination still runs)")
    parser.add_argument("--compile-only", action="store_true",
                        help="no GPU: compile for a compile-only H100 (jax CUDA plugin); report which settings compile")
    parser.add_argument("--out", type=Path, default=None, help="JSON lines file for the results")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from jaxgpt import gpu_plan

    if args.compile_only:
        gpu_plan.compile_only_environment()  # before jax initialises its backends
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxgpt import masks
    from jaxgpt.kernels.flash_attention import KernelTiles, Tiles, compiled_kernels, flash_attention
    from jaxgpt_tools.timing import time_calls
    from jaxgpt_tools.bench_attention_gpu import document_tokens

    shape = (1, args.seq_len, 6, 128)
    tokens = document_tokens(args.seq_len, 1000)
    if args.compile_only:
        from jax.sharding import SingleDeviceSharding

        device = SingleDeviceSharding(gpu_plan.compile_only_mesh("h100", 1, "x").devices.flat[0])
        spec = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=device)
        q = k = v = cot = spec(shape, jnp.bfloat16)
        doc_ids, window_arg = spec((1, args.seq_len), jnp.int32), spec((), jnp.int32)
    else:
        rng = np.random.default_rng(1)
        q, k, v, cot = (jnp.asarray(rng.standard_normal(shape), jnp.bfloat16) for _ in range(4))
        doc_ids = masks.document_ids(jnp.asarray(tokens)[None])

    def programs(tiles: Tiles) -> dict[str, Callable[..., Any]]:
        def fwd(q, k, v, ids, w):
            return flash_attention(q, k, v, ids, w, tiles=tiles)

        def fwd_bwd(q, k, v, ids, w, cot):
            loss = lambda q, k, v: jnp.vdot(fwd(q, k, v, ids, w), cot).astype(jnp.float32)
            return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)

        return {"fwd": jax.jit(fwd), "fwd_bwd": jax.jit(fwd_bwd)}

    def measure(tiles: Tiles, which: list[str]) -> dict[str, Any]:
        """Median ms per window of each program in `which`, or (compile-only) its compile time."""
        result: dict[str, Any] = {}
        for name in which:
            program = programs(tiles)[name]
            operands = (q, k, v, doc_ids) + ((cot,) if name == "fwd_bwd" else ())
            if args.compile_only:
                start = time.perf_counter()
                with compiled_kernels():  # Triton for the H100, not the CPU interpreter
                    lowered = program.lower(*operands[:4], window_arg, *operands[4:])
                lowered.compile()
                result[f"{name}_compile_s"] = round(time.perf_counter() - start, 2)
                continue
            for window in args.windows:
                w = jnp.int32(window)  # traced: one compile serves every window
                call = lambda: jax.block_until_ready(program(*operands[:4], w, *operands[4:]))
                result[f"W{window}_{name}_ms"] = round(time_calls(call, args.repeats)["median_ms"], 4)
        return result

    out = args.out.open("w") if args.out else None

    def report(record: dict[str, Any]) -> None:
        print("RESULT " + json.dumps(record), flush=True)
        if out:
            out.write(json.dumps(record) + "\n")
            out.flush()

    def score(result: dict[str, Any], name: str) -> float:
        return sum(result.get(f"W{w}_{name}_ms", float("inf")) for w in args.windows)

    start = time.perf_counter()
    report({"device": str(jax.devices()[0]) if not args.compile_only else "h100 (compile-only)", "jax": jax.__version__,
            "shape": shape, "windows": args.windows, "repeats": args.repeats, "compile_only": args.compile_only})
    best: dict[str, tuple[float, KernelTiles]] = {}
    # Kernels take turns, so that a spent budget leaves each with as many settings tried.
    for setting, kernel in itertools.product(candidates()[: args.limit], args.kernels):
        if time.perf_counter() - start > args.budget_s:
            report({"stopped": f"budget of {args.budget_s} s spent", "next": [kernel, setting]})
            break
        which = ["fwd"] if kernel == "forward" else ["fwd_bwd"]
        launch = KernelTiles(*setting)
        record: dict[str, Any] = {"kernel": kernel, "setting": setting, "default": launch == KernelTiles()}
        try:
            record.update(measure(Tiles(**{kernel: launch}), which))
        except Exception as error:  # noqa: BLE001 - a setting Triton refuses is a result too
            record["failed"] = f"{type(error).__name__}: {str(error)[:300]}"
        report(record)
        if "failed" not in record and not args.compile_only:
            value = score(record, which[0])
            if kernel not in best or value < best[kernel][0]:
                best[kernel] = (value, launch)
    if not args.compile_only and best:
        chosen = Tiles(**{kernel: launch for kernel, (_, launch) in best.items()})
        for label, tiles in (("default", Tiles()), ("best_of_each", chosen)):
            report({"combination": label, "tiles": repr(tiles), **measure(tiles, ["fwd", "fwd_bwd"])})
    report({"elapsed_s": round(time.perf_counter() - start, 1)})
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
