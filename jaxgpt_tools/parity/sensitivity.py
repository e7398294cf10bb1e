"""Why a record-init run moves with the implementation and the CPU it runs on (the library of
`scripts/parity_sensitivity.py`), measured on the tiny preset (the record's 12 layers at
width 128) under the fp32 policy with the record's bf16 Newton-Schulz.

1. The step-1 gradient of the block lambdas and skip weights, after one shared update from the
   record's init (zero c_proj and lm_head): torch_ref in fp32, torch_ref in float64 (the true
   value, up to float64 rounding) and jaxgpt in fp32. Every block still outputs zero, so the
   final RMSNorm sees a scalar multiple of x0 and these gradients are zero up to the norm's eps:
   fp32 rounding decides their sign, and Adam (eps 1e-10) turns any sign into a 0.78 x lr step.
2. Validation loss every 5 steps over 30 steps of: torch_ref, torch_ref with its RMSNorm in
   float64 (more accurate, so any change is amplified rounding), and jaxgpt on 2 devices.

`sensitivity_report` prints a markdown summary. Several minutes of CPU: run it under the heavy
lock on a shared box.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.common.machine import cpu_flags, torch_threads
from jaxgpt_tools.parity.checks_trajectory import NormPrecision, torch_ref_norm

SCALARS = ("blocks.0.lambdas", "blocks.5.lambdas", "blocks.11.lambdas", "skip_weights")


def sensitivity_preset(folder: Path, steps: int):
    from jaxgpt import config as cfg
    from jaxgpt import presets

    tiny = presets.get_preset("tiny")
    train = cfg.replace(
        tiny.train, train_files=str(REPO_ROOT / tiny.train.train_files), val_files=str(REPO_ROOT / tiny.train.val_files),
        steps=steps, val_every=5, val_tokens=4 * 1024, devices=2, out_dir=str(folder / "out"),
    )
    return cfg.Preset(model=cfg.replace(tiny.model, dtype_policy="fp32"), optim=tiny.optim, train=train)


def step1_scalar_gradients(preset, init_path: Path) -> dict[str, dict[str, float]]:
    """{implementation: {scalar name: gradient of its first entry}} at the params after step 0."""
    import jax
    import jax.numpy as jnp
    import torch

    from jaxgpt import step as jax_train
    from jaxgpt.run.cli import RunOptions
    from torch_ref import loop as torch_train
    from torch_ref.data import distributed_data_generator
    from torch_ref.optim import build_optimizers, set_muon_momentum

    train = preset.train
    state = torch.load(init_path, map_location="cpu", weights_only=True)["model"]
    model = torch_train.build_model(preset.model, train.batch_tokens, 0, state, torch.device("cpu"))
    adam, muon = build_optimizers(model, preset.optim)
    batches = distributed_data_generator(train.train_files, train.batch_tokens, 0, 1)
    first, second = next(batches), next(batches)
    torch_train.forward_backward(model, *first, train.seq_len, 1)
    set_muon_momentum(muon, 0, preset.optim)
    adam.step()
    muon.step()
    model.zero_grad(set_to_none=True)
    after_step0 = {name: p.detach().clone() for name, p in model.named_parameters()}

    torch_train.forward_backward(model, *second, train.seq_len, 1)
    found = {"torch_ref fp32": {name: p.grad[0].item() for name, p in model.named_parameters()
                                if name in SCALARS and p.grad is not None}}
    model.zero_grad(set_to_none=True)
    model64 = model.double()
    # torch_ref casts to fp32 where the record does (.float()); make those float64 for this pass.
    as_fp32 = torch.Tensor.float
    torch.Tensor.float = lambda self, *args, **kwargs: self.to(torch.float64)  # type: ignore[method-assign]  # for this pass
    try:
        torch_train.forward_backward(model64, *second, train.seq_len, 1)
    finally:
        torch.Tensor.float = as_fp32  # type: ignore[method-assign]  # restored
    found["float64 (true value)"] = {name: p.grad[0].item() for name, p in model64.named_parameters()
                                     if name in SCALARS and p.grad is not None}

    _, graph, _ = jax_train.build_model(preset, RunOptions(init_from=str(init_path)))
    params = {name: jnp.asarray(value.float().numpy()) for name, value in after_step0.items()}
    inputs, targets = (jnp.asarray(t.numpy().astype(np.int32).reshape(-1, train.seq_len)) for t in second)
    grads = jax.jit(jax.grad(lambda p: graph.bind(p)(inputs, targets, 1, train=True)))(params)
    found["jaxgpt fp32"] = {name: float(grads[name][0]) for name in SCALARS}
    return found


def val_losses(preset, init_path: Path, framework: str, norm: NormPrecision = "fp32") -> dict[int, float]:
    from jaxgpt import loop as jax_train
    from jaxgpt.run.cli import RunOptions
    from torch_ref import loop as torch_train
    from torch_ref.run.cli import RunOptions as TorchRunOptions

    if framework == "torch_ref":
        with torch_ref_norm(norm), torch_threads(1):
            options = TorchRunOptions(device="cpu", init_from=str(init_path))
            return torch_train.train(preset, options).val_losses
    return jax_train.train(preset, RunOptions(init_from=str(init_path), run_id="sensitivity", progress=False)).val_losses


def sensitivity_report(steps: int, gradients_only: bool) -> None:
    """Both parts (part 1 alone with `gradients_only`), printed as markdown tables on stdout."""
    import torch

    from torch_ref import loop as torch_train

    folder = Path(tempfile.mkdtemp(prefix="sensitivity-"))
    try:
        preset = sensitivity_preset(folder, steps)
        init_path = folder / "init.pt"
        model = torch_train.build_model(preset.model, preset.train.batch_tokens, 0, None, torch.device("cpu"))
        torch.save({"model": model.state_dict()}, init_path)
        flags = cpu_flags()
        print(f"CPU flags: {', '.join(f for f in ('avx2', 'avx512f', 'avx512_bf16', 'amx_bf16') if f in flags)}; "
              f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', '')!r}\n")
        with torch_threads(1):
            gradients = step1_scalar_gradients(preset, init_path)
        print("| step-1 gradient (first entry) | " + " | ".join(SCALARS) + " |")
        print("|---" * (len(SCALARS) + 1) + "|")
        for label, values in gradients.items():
            print(f"| {label} | " + " | ".join(f"{values[name]:+.2e}" for name in SCALARS) + " |")
        if gradients_only:
            return
        runs = {
            "torch_ref": val_losses(preset, init_path, "torch_ref"),
            "torch_ref, float64 RMSNorm": val_losses(preset, init_path, "torch_ref", "float64"),
            "jaxgpt, 2 devices": val_losses(preset, init_path, "jaxgpt"),
        }
        steps_logged = sorted(runs["torch_ref"])
        print("\n| val loss at step | " + " | ".join(str(s) for s in steps_logged) + " |")
        print("|---" * (len(steps_logged) + 1) + "|")
        for label, losses in runs.items():
            print(f"| {label} | " + " | ".join(f"{losses[s]:.4f}" for s in steps_logged) + " |")
        for label in ("torch_ref, float64 RMSNorm", "jaxgpt, 2 devices"):
            gap = [abs(runs[label][s] - runs["torch_ref"][s]) for s in steps_logged]
            print(f"| abs gap, {label} vs torch_ref | " + " | ".join(f"{g:.1e}" for g in gap) + " |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
