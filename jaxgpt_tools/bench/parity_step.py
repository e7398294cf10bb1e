"""bench.py suite `parity_step`: one training step of jaxgpt beside the same step of torch_ref.

Both frameworks start from the same weights (jaxgpt's init, handed to torch_ref through the
record's state-dict format), read the same token batches, and run the whole step: forward,
backward, the Muon + Adam update. Steps alternate between the frameworks (jax, torch eager,
torch compiled, jax, ...) so that a change in the shared machine's load hits every column
alike; each column's time is the median of its timed steps after its warm-up steps.

torch_ref's step is its trainer's (torch_ref.train.forward_backward, Muon momentum, both
optimizers and their LR schedulers, zero_grad); the compiled column wraps the model in
torch.compile as the record does (the optimizers stay eager, as in the record).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jaxgpt_tools.common import machine
from jaxgpt_tools.common.timing import timed

Step = Callable[[], float]  # runs one training step on the next batch, returns its loss


@dataclass(frozen=True)
class ParityConfig:
    """The step both frameworks run: the tiny preset's width and heads, `num_layers` layers
    (12 keeps every per-layer pattern of the record), `sequences` x `seq_len` tokens per step."""

    num_layers: int = 12
    model_dim: int = 128
    num_heads: int = 2
    vocab_size: int = 50257
    seq_len: int = 1024
    sequences: int = 2
    dtype_policy: str = "record"
    qkv_layout: str = "merged"
    seed: int = 0


QUICK = ParityConfig(num_layers=4, seq_len=256, sequences=1)
FULL = ParityConfig()


def layer_patterns(num_layers: int) -> dict[str, Any]:
    """The record's per-layer patterns shrunk to `num_layers` (even): value embeddings on the
    first and last min(3, L/2) layers, long windows on the first and last layer, and from 4
    layers on no attention in layer L/2 + 1 (the record's 7 of 12)."""
    if num_layers == 12:
        return {}  # the record's own patterns (the config defaults)
    ve = min(3, num_layers // 2)
    slots: list[int | None] = [None] * num_layers
    for i in range(ve):
        slots[i] = i
        slots[num_layers - ve + i] = i
    return {
        "value_embed_slots": tuple(slots),
        "long_window_layers": (0, num_layers - 1),
        "attention_free_layers": (num_layers // 2 + 1,) if num_layers >= 4 else (),
    }


def jax_preset(config: ParityConfig):
    from jaxgpt import config as cfg
    from jaxgpt import presets

    tiny = presets.get_preset("tiny")
    model = cfg.replace(tiny.model, vocab_size=config.vocab_size, num_layers=config.num_layers, model_dim=config.model_dim,
                        num_heads=config.num_heads, dtype_policy=config.dtype_policy,
                        qkv_layout=config.qkv_layout, eot_id=min(tiny.model.eot_id, config.vocab_size - 1),
                        **layer_patterns(config.num_layers))
    train = cfg.replace(tiny.train, seq_len=config.seq_len, batch_tokens=config.seq_len * config.sequences,
                        devices=1, seed=config.seed)
    return cfg.Preset(model=model, optim=tiny.optim, train=train)


def _tokens(config: ParityConfig, vocab_size: int, steps: int):
    """One (sequences, seq_len + 1) int32 batch per step, the same for both frameworks."""
    import numpy as np

    rng = np.random.default_rng(config.seed)
    return [rng.integers(0, vocab_size, (config.sequences, config.seq_len + 1), dtype=np.int32) for _ in range(steps)]


def jax_step(preset, batches) -> tuple[Step, dict[str, Any]]:
    """jaxgpt's compiled mesh train step on device 0, and its initial params {name: host array}.
    The returned step consumes the next batch and blocks until the loss is ready."""
    import jax
    import numpy as np

    from jaxgpt.step import one_device_steps

    preset, steps, params, opt_state, host_params = one_device_steps(preset)
    state = {"params": params, "opt": opt_state}
    window = np.int32(step_window(preset.model))
    feed = iter(batches)

    def step() -> float:
        tokens = next(feed)
        inputs = jax.device_put(tokens[:, :-1], steps.batch)
        targets = jax.device_put(tokens[:, 1:], steps.batch)
        # The step donates params and optimizer state: each call takes the previous outputs.
        state["params"], state["opt"], loss = steps.train(state["params"], state["opt"], inputs, targets, window)
        return float(loss)  # waits for the step

    return step, host_params


def step_window(model) -> int:
    """The window a timed step passes: the largest block window (`max_window_blocks`), #15's
    token window of that many blocks, or none for #8/#9's causal attention."""
    return {"document_blocks": model.max_window_blocks, "document_tokens": 128 * model.max_window_blocks,
            "causal": 0}[model.lineage.attention_mask]


def torch_step(preset, host_params: dict[str, Any], batches, *, compiled: bool) -> Step:
    """torch_ref's trainer step on the CPU from jaxgpt's initial params (same values, same layout).
    The preset's configs go to torch_ref as they are: its config classes read the same field names
    (parity_tests/test_config_parity.py), lineage switches included."""
    import torch

    from jaxgpt.run import convert
    from torch_ref import compilation
    from torch_ref import loop as ttrain
    from torch_ref import optim as toptim

    m = preset.model
    train = preset.train
    raw = ttrain.build_model(m, train.batch_tokens, train.seed, convert.params_to_torch_state_dict(host_params),
                             torch.device("cpu"))
    model = compilation.compile_model(raw) if compiled else raw
    tconfig = preset.optim
    optimizers = toptim.build_optimizers(raw, tconfig)
    schedulers = toptim.build_lr_schedulers(optimizers, max(train.steps, 1), tconfig)
    window = step_window(m)
    feed = iter(batches)
    count = [0]

    def step() -> float:
        tokens = torch.from_numpy(next(feed).astype("int64"))
        inputs, targets = tokens[:, :-1].reshape(-1), tokens[:, 1:].reshape(-1)
        loss = ttrain.forward_backward(model, inputs, targets, train.seq_len, window).item()
        toptim.optimizer_step(raw, optimizers, schedulers, count[0], tconfig)
        count[0] += 1
        return loss

    return step


def bench_parity_step(config: ParityConfig, *, warmup: int, repeats: int, compiled: bool, torch_threads: int | None = 1,
                      log: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Seconds per training step of jaxgpt, torch_ref eager and (if `compiled`) torch_ref under
    torch.compile, interleaved; medians over `repeats` steps after `warmup` steps (the first of
    which compiles). A torch.compile failure is recorded with its reason, not raised.

    torch_threads: torch's intra-op threads for the run (None: torch's default). Default 1: on
    this shared 2-core machine torch's OpenMP threads spin-wait between ops, slowing the eager
    quick step several-fold and the interleaved jax steps too (docs/BENCHMARKS.md, "Numbers behind
    choices in the code")."""
    with machine.torch_threads(torch_threads):
        return _bench(config, warmup, repeats, compiled, log)


def _bench(config: ParityConfig, warmup: int, repeats: int, compiled: bool, log: Callable[[str], None]) -> dict[str, Any]:
    import torch

    preset = jax_preset(config)
    batches = _tokens(config, preset.model.vocab_size, warmup + repeats)
    first: dict[str, float] = {}
    start = time.perf_counter()
    jax_fn, host_params = jax_step(preset, batches)
    columns: dict[str, Step] = {"jax": jax_fn}
    columns["torch"] = torch_step(preset, host_params, batches, compiled=False)
    setup_s = time.perf_counter() - start
    compile_error = None
    if compiled:
        try:
            columns["torch_compiled"] = torch_step(preset, host_params, batches, compiled=True)
        except Exception as error:  # noqa: BLE001 - recorded in the result
            compile_error = f"{type(error).__name__}: {error}"[:500]
    times: dict[str, list[float]] = {name: [] for name in columns}
    losses: dict[str, list[float]] = {}
    for i in range(warmup + repeats):
        latest: dict[str, float] = {}
        for name in list(columns):
            try:
                seconds, loss = timed(columns[name])
            except Exception as error:  # noqa: BLE001 - torch.compile may fail at the first call
                if name != "torch_compiled":
                    raise
                compile_error = f"{type(error).__name__}: {error}"[:500]
                del columns[name], times[name]
                continue
            latest[name] = seconds
            losses.setdefault(name, []).append(loss)
            if i == 0:
                first[name] = seconds
            if i >= warmup:
                times[name].append(seconds)
        log(f"parity_step step {i} ({'timed' if i >= warmup else 'warm-up'}): "
            + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in latest.items()))
    result: dict[str, Any] = {
        "config": {**config.__dict__, "padded_vocab": preset.model.padded_vocab_size,
                   "window_blocks": preset.model.max_window_blocks, "warmup_steps": warmup, "timed_steps": repeats,
                   "torch_threads": torch.get_num_threads(),
                   "what": "forward + backward + Muon/Adam update, same init and batches, interleaved"},
        "setup_s": setup_s,
        "jax_first_step_s": first["jax"], "torch_first_step_s": first["torch"],
    }
    for name, values in times.items():
        result[f"{name}_step_s"] = statistics.median(values)
        result[f"{name}_steps_s"] = values
        # Same init and batches: the losses of a column pair agree to the dtype policy's rounding.
        result[f"{name}_losses"] = losses[name]
    result["ratio_jax_over_torch"] = result["jax_step_s"] / result["torch_step_s"]
    if "torch_compiled" in times:
        result["torch_compiled_first_step_s"] = first["torch_compiled"]
        result["ratio_jax_over_torch_compiled"] = result["jax_step_s"] / result["torch_compiled_step_s"]
    elif compiled:
        result["torch_compiled_skipped"] = compile_error or "torch.compile failed"
    return result
