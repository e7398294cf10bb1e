"""A few steps of a record's own optimizers and schedules on the CPU (the harness of
jaxgpt_tools.parity.record_code): `train` runs its own Muon, Adam(s), LR schedule, momentum warmup
and window schedule on given batches, the gradient of each step taken on one device or on two
(the record's data parallelism: each rank's mean gradient, averaged as DDP / all-reduce AVG do);
`schedule` gives its LR multiplier, Muon momentum and window at every step of its own whole run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jaxgpt_tools.parity.record_code import ROWS, Dims, LoadedRecord, build_model, call, load_state
from jaxgpt_tools.parity.record_standins import torchrun_env


@dataclass(frozen=True)
class Trajectory:
    """A short run: `losses` (steps + 1,) the mean loss of each step's batch before its update,
    then of the first batch after the last update (at the window of step `steps`, as the
    record's last validation); `params` the final parameters by record name (fp32 numpy);
    `windows` the window of each forward (None for #8/#9)."""

    losses: Any
    params: dict[str, Any]
    windows: tuple[int | None, ...]


def _schedules(loaded: LoadedRecord, model, steps: int | None, cooldown_steps: int | None) -> dict[str, Any]:
    """A namespace holding the record's `args` (num_iterations = steps; #8/#9's warmdown_iters and
    #15's cooldown_iters = cooldown_steps; None keeps the record's own), its optimizers and LR
    schedulers, built by its own statements over `model`, and its window function."""
    env = dict(vars(loaded.module), model=model, raw_model=model, rank=0, world_size=1)
    exec(loaded.snippets["hyperparameters"], env)  # noqa: S102 - the record's own statements (module docstring)
    args = env["args"]
    if steps is not None:
        args.num_iterations = steps
    env["train_steps"] = args.num_iterations
    for name in ("warmdown_iters", "cooldown_iters"):
        if hasattr(args, name) and cooldown_steps is not None:
            setattr(args, name, cooldown_steps)
    with torchrun_env():
        exec(loaded.snippets["optimizers"], env)  # noqa: S102
    if "window_blocks" in loaded.snippets:
        exec(loaded.snippets["window_blocks"], env)  # noqa: S102 - defines get_sliding_window_blocks
    return env


def own_optimizers(loaded: LoadedRecord, model, steps: int | None, cooldown_steps: int | None) -> dict[str, Any]:
    """The record's own `optimizers`, `schedulers`, `get_lr` and `args` over `model`, built by its
    own statements (a run of `steps` steps, #8-#15's cooldown of `cooldown_steps`; None keeps the
    record's own): the namespace its loop statements (`loaded.snippets`) run in."""
    return _schedules(loaded, model, steps, cooldown_steps)


def window_at(loaded: LoadedRecord, env: dict[str, Any], step: int) -> int | None:
    """The window the record's loop hands its forward at `step`: #15's tokens, #18's blocks, #20's
    window_size // 128 blocks (its sw_num_blks), None for #8/#9."""
    env["step"] = step
    if "window_tokens" in loaded.snippets:
        exec(loaded.snippets["window_tokens"], env)  # noqa: S102
        return int(env["sw_size"])
    if "window_blocks" in loaded.snippets:
        return int(env["get_sliding_window_blocks"](step))
    if "window_size" in loaded.snippets:
        exec(loaded.snippets["window_size"], env)  # noqa: S102
        return int(env["window_size"]) // 128
    return None


def schedule(loaded: LoadedRecord, dims: Dims) -> list[tuple[float, float, int | None]]:
    """(LR multiplier, Muon momentum, window) of every update 0..N-1 of the record's own run
    (its own num_iterations and cooldown), from its own statements: get_lr as its LambdaLR calls it,
    the momentum its loop sets, the window its loop hands the forward. The optimizers are built
    over a model at `dims` (any will do; nothing is trained)."""
    env = _schedules(loaded, build_model(loaded, dims), None, None)
    muon = next(opt for opt in env["optimizers"] if isinstance(opt, loaded.module.Muon))
    values = []
    for step in range(env["args"].num_iterations):
        window = window_at(loaded, env, step)
        if "momentum" in loaded.snippets:
            exec(loaded.snippets["momentum"], env)  # noqa: S102 - the record's loop statements
        values.append((float(env["get_lr"](step)), float(muon.param_groups[0]["momentum"]), window))
    return values


def _device_gradients(loaded: LoadedRecord, model, inputs, targets, window) -> tuple[list[Any], float]:
    """One device's mean gradient over its batch (per parameter, fp32) and mean loss: #8/#9's rows
    in one forward, #15-#20's sequences one forward each, their gradients summed in .grad in
    order and divided by their count (#8's accumulation rule)."""
    import torch

    model.zero_grad(set_to_none=True)
    chunks = [(inputs, targets)] if loaded.name in ROWS else list(zip(inputs, targets, strict=True))
    losses = []
    for chunk_inputs, chunk_targets in chunks:
        loss = call(loaded.name, model, chunk_inputs, chunk_targets, window)
        loss.backward()
        losses.append(float(loss.detach()))
    with torch.no_grad():
        grads = [p.grad / len(chunks) for p in model.parameters()]
    return grads, sum(losses) / len(losses)


def _mean_loss(loaded: LoadedRecord, model, inputs, targets, window) -> float:
    """The mean loss over a batch (rows or sequences), without gradients."""
    import torch

    with torch.no_grad():
        chunks = [(inputs, targets)] if loaded.name in ROWS else list(zip(inputs, targets, strict=True))
        return sum(float(call(loaded.name, model, x, y, window)) for x, y in chunks) / len(chunks)


def _step_gradients(loaded: LoadedRecord, model, inputs, targets, window, devices: int) -> float:
    """Set every .grad to the step's gradient on `devices` (1 or 2) devices: each device's mean
    gradient over its share of the batch, averaged as DDP does (each divided by the device count,
    then summed). Returns the mean loss."""
    import torch

    size = len(inputs) // devices
    shares = [(inputs[i * size:(i + 1) * size], targets[i * size:(i + 1) * size]) for i in range(devices)]
    results = [_device_gradients(loaded, model, share_inputs, share_targets, window) for share_inputs, share_targets in shares]
    with torch.no_grad():
        for index, param in enumerate(model.parameters()):
            total = results[0][0][index] / devices
            for grads, _ in results[1:]:
                total = total + grads[index] / devices
            param.grad = total
    return sum(loss for _, loss in results) / devices


@contextlib.contextmanager
def newton_schulz_dtype(loaded: LoadedRecord, dtype: str) -> Iterator[None]:
    """The record's Newton-Schulz iterates in `dtype` (a torch dtype's name; the bound NS_DTYPE)
    inside the block, fp32 again after it."""
    import torch

    loaded.module.NS_DTYPE = getattr(torch, dtype)
    try:
        yield
    finally:
        loaded.module.NS_DTYPE = torch.float32


def train(loaded: LoadedRecord, dims: Dims, state: dict[str, Any], batches: list[tuple[Any, Any]], *,
          cooldown_steps: int, devices: int = 1, ns_dtype: str = "float32") -> Trajectory:
    """len(batches) steps of the record's own optimizers and schedules from `state` (record names).
    Each batch is (inputs, targets) of S rows (#8/#9) or S sequences (#15-#20), int numpy (S, T).
    `cooldown_steps`: #8-#15's warmdown / cooldown length for this run (the presets' round(
    cooldown_frac x steps)); `devices`: 1 or 2 (see _step_gradients); `ns_dtype`: the Newton-Schulz
    iteration's dtype ("float64": the same update computed more accurately)."""
    if devices not in (1, 2) or any(len(inputs) % devices for inputs, _ in batches):
        raise ValueError(f"devices must be 1 or 2 and divide every batch, got {devices}")
    with newton_schulz_dtype(loaded, ns_dtype):
        return _train(loaded, dims, state, batches, cooldown_steps, devices)


def _train(loaded: LoadedRecord, dims: Dims, state: dict[str, Any], batches: list[tuple[Any, Any]],
           cooldown_steps: int, devices: int) -> Trajectory:
    import numpy as np

    model = build_model(loaded, dims)
    load_state(model, state)
    steps = len(batches)
    env = _schedules(loaded, model, steps, cooldown_steps)
    losses, windows = [], []
    for step, (inputs, targets) in enumerate(batches):
        window = window_at(loaded, env, step)
        losses.append(_step_gradients(loaded, model, inputs, targets, window, devices))
        windows.append(window)
        with torchrun_env():
            for key in ("momentum", "step"):
                if key in loaded.snippets:
                    exec(loaded.snippets[key], env)  # noqa: S102 - the record's loop statements
        model.zero_grad(set_to_none=True)
    window = window_at(loaded, env, steps)
    losses.append(_mean_loss(loaded, model, *batches[0], window))
    windows.append(window)
    params = {key: p.detach().float().numpy().copy() for key, p in model.named_parameters()}
    return Trajectory(np.array(losses), params, tuple(windows))
