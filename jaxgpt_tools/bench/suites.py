"""Benchmarks of jaxgpt: attention backends, Newton-Schulz, the train step, and torch_ref (the
library of `scripts/bench.py`, which says how to run them).

Every suite is a function returning a dict; `run_benchmarks` gathers them as {"machine": ...,
"suites": ...}. Times are the median of `repeats` runs after a first (compiling) run; memory is
what XLA plans for the compiled program (`compiled.memory_analysis()`), so it needs no run and
also covers sizes too large to time. Units are in the key names (`_ms`, `_s`, `_mib`). Results
and commands: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jaxgpt_tools.common import child
from jaxgpt_tools.common.log import logger
from jaxgpt_tools.common.machine import describe
from jaxgpt_tools.common.timing import time_calls

MIB = 1024 * 1024
SUITES = ("attention", "newton_schulz", "train_step", "torch_ref", "parity_step")
# Runs only when named: the record-size compile, normally started by train_step in a child
# process so that a time limit can be put on it; attention_gpu, which needs a CUDA GPU.
HIDDEN_SUITES = ("record_compile", "attention_gpu")


log = logger("bench")  # progress on stderr, so stdout stays one JSON object


def memory_mib(compiled: Any) -> dict[str, float]:
    """XLA's planned buffer sizes of a compiled program, in MiB (temp = scratch between ops)."""
    analysis = compiled.memory_analysis()
    if analysis is None:  # some backends do not report it
        return {}
    return {
        "temp_mib": analysis.temp_size_in_bytes / MIB,
        "argument_mib": analysis.argument_size_in_bytes / MIB,
        "output_mib": analysis.output_size_in_bytes / MIB,
    }


# ---------------------------------------------------------------------------------------------
# attention: dense (O(T^2)) vs blocked (O(T * W)) forward + backward


def bench_attention(
    seq_lens: Sequence[int],
    window_caps: Sequence[int],
    *,
    dense_time_max_t: int,
    dense_compile_max_t: int,
    heads: int = 2,
    head_dim: int = 128,
    dtypes: Sequence[str] = ("fp32", "bf16"),
    repeats: int = 3,
) -> dict[str, Any]:
    """Time and memory of jit(value_and_grad(sum of attention)) w.r.t. q, k, v.

    Inputs: B = 1, (1, T, heads, head_dim) random q, k, v in each dtype, documents of ~1000
    tokens, window_blocks = the cap (the full window). Dense is compiled (memory) up to
    dense_compile_max_t and timed up to dense_time_max_t; blocked is compiled and timed at every T.
    Returns {"config": ..., "rows": [{backend, dtype, seq_len, window_cap, temp_mib, median_ms, ...}]}.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxgpt.attention import attention

    rows = []
    for dtype_name in dtypes:
        dtype = {"fp32": jnp.float32, "bf16": jnp.bfloat16}[dtype_name]
        for seq_len in seq_lens:
            rng = np.random.default_rng(seq_len)
            q, k, v = (jnp.asarray(rng.standard_normal((1, seq_len, heads, head_dim)), dtype) for _ in range(3))
            doc_ids = jnp.asarray(np.arange(seq_len)[None] // 1000, jnp.int32)
            for cap in window_caps:
                for backend in ("dense", "blocked"):
                    if backend == "dense" and seq_len > dense_compile_max_t:
                        continue

                    def loss(q, k, v, backend=backend, cap=cap):
                        out = attention(q, k, v, doc_ids, cap, backend=backend, max_window_blocks=cap)
                        return jnp.sum(out.astype(jnp.float32))

                    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
                    start = time.perf_counter()
                    compiled = step.lower(q, k, v).compile()
                    row: dict[str, Any] = {
                        "backend": backend, "dtype": dtype_name, "seq_len": seq_len, "window_cap": cap,
                        "compile_s": time.perf_counter() - start, **memory_mib(compiled),
                    }
                    if backend == "blocked" or seq_len <= dense_time_max_t:
                        timing = time_calls(lambda: jax.block_until_ready(compiled(q, k, v)), repeats)
                        row.update(median_ms=timing["median_ms"], min_ms=timing["min_ms"])
                    else:
                        row["timed"] = False
                        row["why_not_timed"] = f"dense above T={dense_time_max_t}: memory only"
                    log(f"attention {backend:7s} {dtype_name} T={seq_len:6d} cap={cap:2d} "
                        f"temp={row.get('temp_mib', float('nan')):9.1f} MiB time={row.get('median_ms', float('nan')):9.1f} ms")
                    rows.append(row)
    return {
        "config": {"batch": 1, "heads": heads, "head_dim": head_dim, "doc_len": 1000, "repeats": repeats,
                   "what": "jit(value_and_grad(sum(attention(q,k,v)))) w.r.t. q, k, v; window = cap"},
        "rows": rows,
    }


# ---------------------------------------------------------------------------------------------
# Newton-Schulz: scripts/bench_ns.py's core, single device (split in a child process)


def bench_ns_suite(*, scale: int, repeats: int, split_devices: int | None) -> dict[str, Any]:
    """bench_newton_schulz on the record's Muon shapes with every dim divided by `scale`.

    split_devices: also run `bench_ns.py --devices N --json` in a child process (the virtual
    devices must be configured before JAX starts, so not in this process)."""
    from jaxgpt_tools.bench.newton_schulz import bench_newton_schulz, scaled_record_shapes

    shapes = scaled_record_shapes(scale)
    log(f"newton_schulz: single device, dims / {scale}")
    result: dict[str, Any] = {"scale": scale, "single": bench_newton_schulz(shapes, devices=1, repeats=repeats)}
    if split_devices:
        log(f"newton_schulz: split over {split_devices} virtual devices (child process)")
        # The virtual devices must be set before JAX starts: a fresh process.
        flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={split_devices}".strip()
        result["split"] = child.call("jaxgpt_tools.bench.newton_schulz:bench_newton_schulz",
                                     {"shapes": shapes, "devices": split_devices, "repeats": repeats},
                                     env={**os.environ, "XLA_FLAGS": flags})
    return result


# ---------------------------------------------------------------------------------------------
# train step: the tiny preset's compiled step on 1 device; record-size compile memory


def _tiny_step_setup(seq_len: int, sequences: int):
    """The tiny preset's mesh train step on device 0 (jaxgpt.train.one_device_steps), random tokens."""
    import jax
    import numpy as np

    from jaxgpt import config as cfg
    from jaxgpt import presets
    from jaxgpt import step as train_lib

    preset = presets.get_preset("tiny")
    preset = cfg.Preset(model=preset.model, optim=preset.optim,
                        train=cfg.replace(preset.train, seq_len=seq_len, batch_tokens=seq_len * sequences, devices=1))
    preset, steps, params, opt_state, _ = train_lib.one_device_steps(preset)
    tokens = np.random.default_rng(0).integers(0, preset.model.vocab_size, (sequences, seq_len + 1), dtype=np.int32)
    inputs = jax.device_put(tokens[:, :-1], steps.batch)
    targets = jax.device_put(tokens[:, 1:], steps.batch)
    window = np.int32(preset.model.max_window_blocks)
    return preset, steps, params, opt_state, inputs, targets, window


def bench_train_step(*, seq_len: int, sequences: int, steps_timed: int, record_timeout_s: float | None) -> dict[str, Any]:
    """ms per step of the tiny preset's full train step (forward, backward, Muon + Adam) on 1 device.

    record_timeout_s: also compile the record model's forward+backward at T=65536 in a child
    process (suite `record_compile`) and keep its memory analysis; None skips it, and a child
    that runs past the limit is stopped and the reason recorded."""
    import jax

    log(f"train_step: tiny preset, {sequences} x {seq_len} tokens, 1 device")
    preset, steps, params, opt_state, inputs, targets, window = _tiny_step_setup(seq_len, sequences)
    state = {"params": params, "opt": opt_state}

    def step() -> None:
        # The step donates params and opt_state, so each call takes the previous call's outputs.
        state["params"], state["opt"], state["loss"] = steps.train(state["params"], state["opt"], inputs, targets, window)
        jax.block_until_ready(state["loss"])

    timing = time_calls(step, steps_timed, warmup=1)
    first_s, median_s, loss = timing["first_s"], timing["median_ms"] / 1e3, state["loss"]
    model = preset.model
    result: dict[str, Any] = {
        "tiny": {
            "model_dim": model.model_dim, "num_layers": model.num_layers, "num_heads": model.num_heads,
            "padded_vocab": model.padded_vocab_size, "seq_len": seq_len, "sequences": sequences,
            "dtype_policy": model.dtype_policy, "window_blocks": int(window),
            "compile_and_first_step_s": first_s, "steps_timed": steps_timed,
            "median_step_ms": timing["median_ms"], "min_step_ms": timing["min_ms"],
            "tokens_per_s": seq_len * sequences / median_s, "final_loss": float(loss),
        }
    }
    log(f"train_step: {1e3 * median_s:.1f} ms/step, {seq_len * sequences / median_s:.0f} tokens/s")
    if record_timeout_s is None:
        result["record_compile"] = {"skipped": "not asked (--record-timeout 0)"}
        return result
    log(f"train_step: record model fwd+bwd compile at T=65536 in a child process (limit {record_timeout_s:.0f} s)")
    try:
        result["record_compile"] = child.call("jaxgpt_tools.bench.suites:bench_record_compile", {},
                                              timeout_s=record_timeout_s)
    except subprocess.TimeoutExpired:
        result["record_compile"] = {"skipped": f"lower+compile did not finish within {record_timeout_s:.0f} s on this machine"}
    except child.ChildFailed as error:
        result["record_compile"] = {"skipped": str(error)[-600:]}
    return result


def bench_record_compile(seq_len: int = 65536, **model_overrides: Any) -> dict[str, Any]:
    """Lower and compile (never run) the record model's loss + gradients for one device's
    (1, seq_len) batch from abstract inputs; XLA's planned memory is the result.
    `model_overrides` replace ModelConfig fields (e.g. loss_chunk_tokens, remat) for variants."""
    import jax
    import jax.numpy as jnp

    from jaxgpt import config as cfg
    from jaxgpt import model as model_lib
    from jaxgpt import params as params_lib
    from jaxgpt import presets
    from jaxgpt import step as train_lib
    from jaxgpt.attention import resolve_backend

    preset = presets.get_preset("record")
    preset = cfg.Preset(model=cfg.replace(preset.model, **model_overrides), optim=preset.optim, train=preset.train)
    model_config = train_lib.device_model_config(
        cfg.Preset(model=preset.model, optim=preset.optim, train=cfg.replace(preset.train, batch_tokens=seq_len, seq_len=seq_len)), 1
    )
    from flax import nnx

    graph, _ = params_lib.ModelGraph.split(nnx.eval_shape(lambda: model_lib.GPT(model_config, rngs=nnx.Rngs(0))))
    shapes = params_lib.param_shapes(model_config)
    tokens = jax.ShapeDtypeStruct((1, seq_len), jnp.int32)
    window = jax.ShapeDtypeStruct((), jnp.int32)

    def loss(params, inputs, targets, window):
        return graph.bind(params)(inputs, targets, window, train=True)

    start = time.perf_counter()
    lowered = jax.jit(jax.value_and_grad(loss)).lower(shapes, tokens, tokens, window)
    lower_s = time.perf_counter() - start
    compiled = lowered.compile()
    param_mib = sum(s.size * s.dtype.itemsize for s in shapes.values()) / MIB
    return {
        "seq_len": seq_len, "what": "jit(value_and_grad(record model loss)), 1 sequence, train=True (FP8 head)",
        "attention_backend": resolve_backend(model_config.attention_backend), "loss_chunk_tokens": model_config.loss_chunk_tokens,
        "remat": model_config.remat, "param_mib": param_mib,
        "lower_s": lower_s, "compile_s": time.perf_counter() - start - lower_s, **memory_mib(compiled),
    }


# ---------------------------------------------------------------------------------------------
# torch_ref: the PyTorch model's forward + backward at the tiny width on the CPU


def bench_torch_ref(*, seq_len: int, repeats: int) -> dict[str, Any]:
    """ms per forward+backward of torch_ref.model.GPT at the tiny preset's width (1 sequence,
    window = the tiny preset's max), CPU path (SDPA with a dense mask), fp32 parameters."""
    import torch

    from jaxgpt import config as cfg
    from jaxgpt import presets
    from torch_ref.model import GPT

    model_config = presets.get_preset("tiny").model
    torch.manual_seed(0)
    # The record's FP8 head gradient scale is sized for 65,536 tokens per mean; scale it with T
    # (as jaxgpt.train does) so that e5m2 does not overflow. On a CPU the FP8 head is emulated.
    model = GPT(model_config.vocab_size, model_config.num_layers, model_config.num_heads, model_config.model_dim,
                fp8_grad_scale=cfg.fp8_grad_scale_for(seq_len, model_config.fp8_grad_scale))
    tokens = torch.randint(0, model_config.vocab_size, (seq_len + 1,), generator=torch.Generator().manual_seed(0))
    inputs, targets = tokens[:-1], tokens[1:]
    window = torch.tensor(model_config.max_window_blocks, dtype=torch.int32)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(inputs, targets, window).backward()

    log(f"torch_ref: tiny width, T={seq_len}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    timing = time_calls(step, repeats)
    return {
        "model_dim": model_config.model_dim, "num_layers": model_config.num_layers, "seq_len": seq_len,
        "what": "forward + backward (no optimizer), training mode, FP8 head (emulated on CPU)",
        "threads": torch.get_num_threads(), "first_s": timing["first_s"],
        "median_ms": timing["median_ms"], "min_ms": timing["min_ms"],
        "tokens_per_s": seq_len / (timing["median_ms"] / 1e3),
    }


# ---------------------------------------------------------------------------------------------
# the suites by name


@dataclass(frozen=True)
class BenchOptions:
    """What `scripts/bench.py`'s flags choose; None: the suite's default for `quick`."""

    quick: bool = False
    repeats: int = 3
    dtypes: tuple[str, ...] = ("fp32", "bf16")
    ns_split: int | None = None
    record_timeout: float | None = None
    record_loss_chunk: int | None = None
    record_remat: str | None = None
    torch_compile: bool | None = None
    torch_threads: int | None = 1

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError(f"--repeats must be >= 1, got {self.repeats}")
        if not self.dtypes or any(dtype not in ("fp32", "bf16") for dtype in self.dtypes):
            raise ValueError(f"--dtypes must list fp32 and/or bf16, got {','.join(self.dtypes)!r}")


def parse_suites(text: str) -> list[str]:
    """The suites a comma-separated list names; ValueError naming any unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SUITES + HIDDEN_SUITES]
    if not names or unknown:
        raise ValueError(f"unknown suite(s) {unknown or text!r}; choose from {', '.join(SUITES)}")
    return names


def run_suite(name: str, options: BenchOptions) -> dict[str, Any]:
    quick, repeats = options.quick, options.repeats
    if name == "attention":
        if quick:  # dense is compiled at 4096 (memory) but only timed at 1024
            return bench_attention((1024, 4096), (14, 4), dense_time_max_t=1024, dense_compile_max_t=4096,
                                   dtypes=options.dtypes, repeats=repeats)
        return bench_attention((2048, 8192, 16384), (14, 4), dense_time_max_t=2048, dense_compile_max_t=8192,
                               dtypes=options.dtypes, repeats=repeats)
    if name == "newton_schulz":
        return bench_ns_suite(scale=4 if quick else 1, repeats=repeats, split_devices=options.ns_split)
    if name == "train_step":
        timeout = options.record_timeout if options.record_timeout is not None else (0 if quick else 300)
        return bench_train_step(seq_len=1024, sequences=1 if quick else 2, steps_timed=repeats,
                                record_timeout_s=timeout or None)
    if name == "torch_ref":
        return bench_torch_ref(seq_len=1024, repeats=repeats)
    if name == "parity_step":
        from jaxgpt_tools.bench.parity_step import FULL, QUICK, bench_parity_step

        compiled = options.torch_compile if options.torch_compile is not None else not quick
        return bench_parity_step(QUICK if quick else FULL, warmup=1 if quick else 2, repeats=repeats,
                                 compiled=compiled, torch_threads=options.torch_threads, log=log)
    if name == "attention_gpu":
        from jaxgpt_tools.bench.attention_gpu import bench_attention_gpu

        return bench_attention_gpu(quick=quick, repeats=max(repeats, 10))  # kernels of a few ms: 10 timed runs at least
    if name == "record_compile":
        overrides: dict[str, Any] = {}
        if options.record_loss_chunk is not None:
            overrides["loss_chunk_tokens"] = options.record_loss_chunk or None
        if options.record_remat is not None:
            overrides["remat"] = options.record_remat
        return bench_record_compile(**overrides)
    raise ValueError(f"unknown suite {name!r}")


def run_benchmarks(suites: Sequence[str], options: BenchOptions) -> dict[str, Any]:
    """{"machine", "quick", "suites": {name: result}} and the parity headline at the top."""
    result: dict[str, Any] = {"machine": describe(), "quick": options.quick, "suites": {}}
    for name in suites:
        start = time.perf_counter()
        result["suites"][name] = run_suite(name, options)
        result["suites"][name]["suite_wall_s"] = time.perf_counter() - start
        log(f"{name}: done in {time.perf_counter() - start:.1f} s")
    parity = result["suites"].get("parity_step", {})
    for key in ("ratio_jax_over_torch", "ratio_jax_over_torch_compiled"):  # the headline, also at the top
        if key in parity:
            result[key] = parity[key]
    return result
