"""Which launch settings make each Pallas attention kernel fastest on this GPU? (the library of
`scripts/tile_sweep.py`, which says how to run it)

Sweeps each kernel's settings on its own, the other two kernels at their defaults: for the Triton
kernels (`pallas`) a `KernelTiles` (block_q, block_k, num_warps, num_stages), for the Mosaic GPU
kernels (`mosaic`) a `MosaicKernelTiles` (step, stages; the forward also pingpong, its two
compute warpgroups taking turns on the tensor cores, and query_blocks, blocks walked per CTA).
At the record's shapes (B 1, T 65,536, H 6, Dh 128, bf16; documents from
jaxgpt_tools.bench.attention_gpu.document_tokens with mean 1,000 tokens) for windows 4 and 14:
  forward  the forward alone (median ms);
  dq       forward + backward with the default forward and dK/dV (only dQ's setting changes);
  dkdv     forward + backward with the default forward and dQ (only dK/dV's setting changes);
then times the best of each (least W 4 + W 14 time) together against the defaults (`Tiles()`,
`MosaicTiles()`), forward and forward + backward. One JSON object per line to --out (and RESULT
lines on stdout); a setting the compiler refuses (e.g. shared memory) is a result too. Stops
starting new settings after --budget-s seconds and still times the combination of the best found.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KERNELS = ("forward", "dq", "dkdv")
IMPLEMENTATIONS = ("pallas", "mosaic")
TILE_PAIRS = ((64, 64), (128, 64), (64, 128), (128, 128))  # (block_q, block_k)
WARPS = (4, 8)
STAGES = (1, 2, 3)
MOSAIC_STEPS, MOSAIC_STAGES = (64, 128), (2, 3, 4)
# The forward's variants: 4 stages fit only at step 64 and the compile-only spills rise with
# stages (docs/BENCHMARKS.md), so 2 and 3; the new schedules first, so that a spent budget
# leaves the known free-running one-block settings untried.
MOSAIC_FORWARD_STAGES, MOSAIC_FORWARD_PINGPONG, MOSAIC_FORWARD_QUERY_BLOCKS = (2, 3), (True, False), (2, 1)


def candidates(implementation: str = "pallas", kernel: str = "forward") -> list[tuple[Any, ...]]:
    """Every setting tried for `kernel`: (block_q, block_k, num_warps, num_stages) for `pallas`
    (the same for each kernel), (step, stages) for `mosaic`'s dq and dkdv and (step, stages,
    pingpong, query_blocks) for its forward, in the order tried."""
    if implementation == "mosaic":
        if kernel == "forward":
            return [(step, stages, pingpong, query_blocks) for pingpong, query_blocks, step, stages
                    in itertools.product(MOSAIC_FORWARD_PINGPONG, MOSAIC_FORWARD_QUERY_BLOCKS, MOSAIC_STEPS,
                                         MOSAIC_FORWARD_STAGES)]
        return list(itertools.product(MOSAIC_STEPS, MOSAIC_STAGES))
    return [(bq, bk, w, s) for (bq, bk), w, s in itertools.product(TILE_PAIRS, WARPS, STAGES)]


def _turns(implementation: str, kernels: list[str], limit: int | None) -> list[tuple[tuple[Any, ...], str]]:
    """(setting, kernel) in the order tried: the kernels take turns, so that a spent budget
    leaves each with as many settings tried; `limit`: the first N settings of each kernel."""
    lists = [[(setting, kernel) for setting in candidates(implementation, kernel)[:limit]] for kernel in kernels]
    return [turn for turns in itertools.zip_longest(*lists) for turn in turns if turn is not None]


def _kernel_api(implementation: str) -> tuple[Any, Any, Callable[..., Any]]:
    """(one kernel's settings class, the three kernels' settings class, the attention function)."""
    if implementation == "mosaic":
        from jaxgpt.kernels.mosaic_attention import MosaicKernelTiles, MosaicTiles, mosaic_attention

        return MosaicKernelTiles, MosaicTiles, mosaic_attention
    from jaxgpt.kernels.flash_attention import KernelTiles, Tiles, flash_attention

    return KernelTiles, Tiles, flash_attention


@dataclass(frozen=True)
class _Operands:
    """The attention's operands at the sweep's shape: arrays, or (compile-only) abstract values
    (ShapeDtypeStruct) on one H100 for lowering, with the traced window's abstract value."""

    q: Any
    k: Any
    v: Any
    cot: Any  # the output's cotangent, for forward + backward
    doc_ids: Any
    window: Any = None  # compile-only: the window's abstract value (arrays: each swept window's)


def _operands(shape: tuple[int, ...], compile_only: bool) -> _Operands:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxgpt import masks
    from jaxgpt_tools.bench.attention_gpu import document_tokens
    from jaxgpt_tools.gpu import compile_plan as gpu_plan

    seq_len = shape[1]
    if compile_only:
        from jax.sharding import SingleDeviceSharding

        device = SingleDeviceSharding(gpu_plan.compile_only_mesh("h100", 1, "x").devices.flat[0])
        spec = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=device)
        tensor = spec(shape, jnp.bfloat16)
        return _Operands(tensor, tensor, tensor, tensor, spec((1, seq_len), jnp.int32), spec((), jnp.int32))
    rng = np.random.default_rng(1)
    q, k, v, cot = (jnp.asarray(rng.standard_normal(shape), jnp.bfloat16) for _ in range(4))
    return _Operands(q, k, v, cot, masks.document_ids(jnp.asarray(document_tokens(seq_len, 1000))[None]))


def _programs(attend: Callable[..., Any], tiles: Any) -> dict[str, Any]:
    """The forward and forward + backward with these tiles, jitted (.lower, or a call)."""
    import jax
    import jax.numpy as jnp

    def fwd(q, k, v, ids, w):
        return attend(q, k, v, ids, w, tiles=tiles)

    def fwd_bwd(q, k, v, ids, w, cot):
        loss = lambda q, k, v: jnp.vdot(fwd(q, k, v, ids, w), cot).astype(jnp.float32)
        return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)

    return {"fwd": jax.jit(fwd), "fwd_bwd": jax.jit(fwd_bwd)}


def _measure(attend: Callable[..., Any], operands: _Operands, tiles: Any, which: list[str], *, windows: list[int],
             repeats: int, compile_only: bool) -> dict[str, Any]:
    """Median ms per window of each program in `which`, or (compile-only) its compile time."""
    import jax
    import jax.numpy as jnp

    from jaxgpt.kernels.flash_attention import compiled_kernels
    from jaxgpt_tools.common.timing import time_calls

    result: dict[str, Any] = {}
    for name in which:
        program = _programs(attend, tiles)[name]
        head = (operands.q, operands.k, operands.v, operands.doc_ids)
        tail = (operands.cot,) if name == "fwd_bwd" else ()
        if compile_only:
            start = time.perf_counter()
            with compiled_kernels():  # kernels for the H100, not the CPU interpreter
                lowered = program.lower(*head, operands.window, *tail)
            lowered.compile()
            result[f"{name}_compile_s"] = round(time.perf_counter() - start, 2)
            continue
        for window in windows:
            w = jnp.int32(window)  # traced: one compile serves every window
            call = lambda: jax.block_until_ready(program(*head, w, *tail))
            result[f"W{window}_{name}_ms"] = round(time_calls(call, repeats)["median_ms"], 4)
    return result


class _Report:
    """Each record as a RESULT line on stdout and, given a path, a JSON line in that file."""

    def __init__(self, out_path: Path | None):
        self._out = out_path.open("w") if out_path else None

    def __call__(self, record: dict[str, Any]) -> None:
        print("RESULT " + json.dumps(record), flush=True)
        if self._out:
            self._out.write(json.dumps(record) + "\n")
            self._out.flush()

    def close(self) -> None:
        if self._out:
            self._out.close()


def _best_settings(implementation: str, kernels: list[str], limit: int | None, measure: Callable[..., dict[str, Any]],
                   report: _Report, *, windows: list[int], budget_s: float, started: float,
                   compile_only: bool) -> dict[str, Any]:
    """Each kernel's settings tried in turn (each a record), until `budget_s` after `started`:
    {kernel: the launch with the least time summed over `windows`} (empty when compile-only)."""
    launch_type, tiles_type, _ = _kernel_api(implementation)
    best: dict[str, tuple[float, Any]] = {}
    for setting, kernel in _turns(implementation, kernels, limit):
        if time.perf_counter() - started > budget_s:
            report({"stopped": f"budget of {budget_s} s spent", "next": [kernel, setting]})
            break
        which = ["fwd"] if kernel == "forward" else ["fwd_bwd"]
        launch = launch_type(*setting)
        record: dict[str, Any] = {"kernel": kernel, "setting": setting,
                                  "default": launch == getattr(tiles_type(), kernel)}
        try:
            record.update(measure(tiles_type(**{kernel: launch}), which))
        except Exception as error:  # noqa: BLE001 - a setting the compiler refuses is a result too
            record["failed"] = f"{type(error).__name__}: {str(error)[:300]}"
        report(record)
        if "failed" not in record and not compile_only:
            value = sum(record.get(f"W{w}_{which[0]}_ms", float("inf")) for w in windows)
            if kernel not in best or value < best[kernel][0]:
                best[kernel] = (value, launch)
    return {kernel: launch for kernel, (_, launch) in best.items()}


def sweep(*, kernels: list[str], windows: list[int], seq_len: int, repeats: int, limit: int | None,
          budget_s: float, compile_only: bool, out_path: Path | None, implementation: str = "pallas") -> None:
    """Run the sweep, each result a RESULT line on stdout (and a JSON line in `out_path`). With
    `compile_only`, call jaxgpt_tools.gpu.compile_plan.compile_only_environment() before jax is first imported."""
    import jax

    _, tiles_type, attend = _kernel_api(implementation)
    shape = (1, seq_len, 6, 128)
    operands = _operands(shape, compile_only)
    measure = functools.partial(_measure, attend, operands, windows=windows, repeats=repeats, compile_only=compile_only)
    report = _Report(out_path)
    started = time.perf_counter()
    report({"device": str(jax.devices()[0]) if not compile_only else "h100 (compile-only)", "jax": jax.__version__,
            "implementation": implementation, "shape": shape, "windows": windows, "repeats": repeats,
            "compile_only": compile_only})
    best = _best_settings(implementation, kernels, limit, measure, report, windows=windows, budget_s=budget_s,
                          started=started, compile_only=compile_only)
    if not compile_only and best:
        for label, tiles in (("default", tiles_type()), ("best_of_each", tiles_type(**best))):
            report({"combination": label, "tiles": repr(tiles), **measure(tiles, ["fwd", "fwd_bwd"])})
    report({"elapsed_s": round(time.perf_counter() - started, 1)})
    report.close()
