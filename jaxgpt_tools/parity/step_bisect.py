"""Where do jaxgpt's and torch_ref's trajectories part? (the library of `scripts/step_bisect.py`)

The trajectory setting of jaxgpt_tools.parity.checks_trajectory (4 layers, 64 wide, 20 steps, fp32 policy), with
torch_ref driving. At every step it prints:
- the val loss of torch_ref, of jaxgpt's optimizer fed torch_ref's gradients ("fed"), and of
  jaxgpt's own run ("free"), with their differences to torch_ref;
- the forward/backward at torch_ref's current params: jaxgpt's loss and worst per-parameter
  relative gradient difference;
- the optimizer: the worst per-parameter relative difference between the update jaxgpt's
  optimizer makes from torch_ref's gradients and torch_ref's own update.
--swap-step1-scalars gives the free run torch_ref's step-1 gradients of the scalars (lambdas,
skip weights) and nothing else; --init signal starts from checks' "signal" init.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from jaxgpt.config import NSDType
from jaxgpt_tools.parity import checks_trajectory as checks


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norm = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / norm) if norm > 0 else float(np.linalg.norm(a - b))


def _worst(pairs: dict[str, float]) -> str:
    name = max(pairs, key=lambda key: pairs[key])
    return f"{pairs[name]:.1e} ({name})"


def run(ns_dtype: NSDType, init: checks.Init, swap_step1_scalars: bool) -> None:
    import jax
    import jax.numpy as jnp
    import optax
    import torch

    from jaxgpt import optim, schedules
    from jaxgpt import step as jax_train
    from jaxgpt.run.cli import RunOptions
    from torch_ref import loop as torch_train
    from torch_ref.data import distributed_data_generator, val_batches
    from torch_ref.optim import build_lr_schedulers, build_optimizers, optimizer_step

    torch.set_num_threads(1)
    folder = Path(tempfile.mkdtemp(prefix="step-bisect-"))
    try:
        preset = checks.trajectory_preset(folder, ns_dtype, devices=1)
        train, steps, seq_len = preset.train, preset.train.steps, preset.train.seq_len
        init_path = checks.shared_init(folder, init)
        state = torch.load(init_path, map_location="cpu", weights_only=True)["model"]
        model = torch_train.build_model(preset.model, train.batch_tokens, 0, state, torch.device("cpu"))
        adam, muon = build_optimizers(model, preset.optim)
        schedulers = build_lr_schedulers((adam, muon), steps, preset.optim)
        _, graph, _ = jax_train.build_model(preset, RunOptions(init_from=str(init_path)))
        tx = optim.record_optimizer(preset.optim, steps, bf16_embeddings=False)
        value_and_grad = jax.jit(lambda p, x, y, w: jax.value_and_grad(lambda q: graph.bind(q)(x, y, w, train=True))(p))
        evaluate = jax.jit(lambda p, x, y, w: graph.bind(p)(x, y, w, train=False))
        update = jax.jit(tx.update)

        def torch_params() -> dict[str, np.ndarray]:
            """torch_ref's current parameters, {record name: fp32 host copy}."""
            return {name: p.detach().numpy().copy() for name, p in model.named_parameters()}

        fed = {name: jnp.asarray(value) for name, value in torch_params().items()}
        free = dict(fed)
        fed_state, free_state = tx.init(fed), tx.init(free)
        val = [(x.numpy().astype(np.int32)[None], y.numpy().astype(np.int32)[None])
               for x, y in val_batches(train.val_files, train.val_tokens, seq_len, 0, 1)]

        def torch_val(window: int) -> float:
            model.eval()
            with torch.no_grad():
                loss = np.mean([model(torch.from_numpy(x[0]), torch.from_numpy(y[0]), window).item() for x, y in val])
            model.train()
            return float(loss)

        def jax_val(params, window: int) -> float:
            return float(np.mean([evaluate(params, x, y, window) for x, y in val]))

        batches = distributed_data_generator(train.train_files, train.batch_tokens, 0, 1)
        print(f"ns {ns_dtype}, init {init}, swap step-1 scalars: {swap_step1_scalars}")
        for step in range(steps + 1):
            window = schedules.window_blocks(step, steps, train.window_max_tokens)[0]
            reference, fed_loss, free_loss = torch_val(window), jax_val(fed, window), jax_val(free, window)
            print(f"step {step:2d} W={window}: val torch_ref {reference:.6f}  fed {fed_loss - reference:+.1e}  "
                  f"free {free_loss - reference:+.1e}")
            if step == steps:
                break
            inputs, targets = next(batches)
            x, y = (jnp.asarray(t.numpy().astype(np.int32).reshape(-1, seq_len)) for t in (inputs, targets))
            before = torch_params()
            torch_loss = torch_train.forward_backward(model, inputs, targets, seq_len, window).item()
            grads = {name: p.grad.detach().numpy().copy() for name, p in model.named_parameters() if p.grad is not None}
            jax_loss, jax_grads = value_and_grad({n: jnp.asarray(v) for n, v in before.items()}, x, y, window)
            print(f"   fwd/bwd at torch_ref's params: loss {float(jax_loss) - torch_loss:+.1e}, worst gradient "
                  + _worst({n: _rel(jax_grads[n], g) for n, g in grads.items()}))
            optimizer_step(model, (adam, muon), schedulers, step, preset.optim)
            after = torch_params()
            fed_before = {name: np.asarray(value) for name, value in fed.items()}
            updates, fed_state = update({n: jnp.asarray(g) for n, g in grads.items()}, fed_state, fed)
            fed = optax.apply_updates(fed, updates)
            print("   optimizer on torch_ref's gradients: worst update " + _worst(
                {n: _rel(np.asarray(fed[n]) - fed_before[n], after[n] - before[n]) for n in after if np.any(after[n] != before[n])}))
            _, own = value_and_grad(free, x, y, window)
            if step == 1 and swap_step1_scalars:
                own = {n: (jnp.asarray(grads[n]) if grads[n].ndim < 2 else g) for n, g in own.items()}
            updates, free_state = update(own, free_state, free)
            free = optax.apply_updates(free, updates)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
