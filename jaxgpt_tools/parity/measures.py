"""What the parity checks (jaxgpt_tools.parity.checks) and the record's-code rows
(record_code_forward, record_code_training) both measure with: a row's result, relative norms, gradient gaps of two
frameworks, a torch_ref forward with its logits, perturbed parameters, the lineage's parity
width."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Result:
    name: str
    max_abs: float
    max_rel: float
    tolerance: str  # what is asserted, in words and numbers
    reason: str  # why that tolerance
    passed: bool
    notes: str = ""
    extra: dict = field(default_factory=dict)
    # The third column: the same quantities against the record's own code (record_code_columns),
    # or why the row cannot have it.
    record_code: str = ""


NS_SHAPES = {"96x96": (96, 96), "64x160": (64, 160), "160x64": (160, 64), "768x768": (768, 768)}


def rel_norm(x: np.ndarray, ref: np.ndarray) -> float:
    """||x - ref|| / ||ref|| (Frobenius, in float64) of two arrays of one shape."""
    return float(np.linalg.norm((x - ref).astype(np.float64)) / np.linalg.norm(ref.astype(np.float64)))


def gradient_gaps(torch_grads: dict, jax_grads: dict) -> tuple[bool, bool, dict[str, tuple[float, str]]]:
    """(same names, exact zeros zero in both, {"matrix"|"scalar": (worst max|diff| / max|grad|,
    where)}) of two frameworks' gradients by parameter name."""
    same_names, zeros_agree = set(jax_grads) == set(torch_grads), True
    worst = {"matrix": (0.0, ""), "scalar": (0.0, "")}
    for name, torch_grad in torch_grads.items():
        ours = np.asarray(jax_grads[name])
        scale = float(np.abs(torch_grad).max())
        if scale == 0:  # e.g. attn.lambdas[1] without a value embedding, #9's layer-0 lamb (v - v)
            zeros_agree &= not np.any(ours)
            continue
        kind = "matrix" if torch_grad.ndim >= 2 else "scalar"
        worst[kind] = max(worst[kind], (float(np.abs(ours - torch_grad).max()) / scale, name))
    return same_names, zeros_agree, worst


def lineage_model_config(name: str, dtype_policy: str | None = None):
    """The preset's ModelConfig at the parity width (its own dtype policy unless given)."""
    from jaxgpt import config as cfg
    from jaxgpt import presets

    model = presets.get_preset(name).model
    return cfg.replace(model, vocab_size=1000, eot_id=999, num_heads=2, model_dim=64, max_window_blocks=4,
                       attention_backend="blocked", loss_chunk_tokens=None,
                       dtype_policy=dtype_policy or model.dtype_policy)


def perturb_parameters(model, seed: int) -> None:
    """Matrices get N(0, (0.5/sqrt(fan_in))^2) added (the init's scale), scalars N(0, 0.1^2), so
    that no path of a torch_ref GPT is silent (zero-initialised projections and head included)."""
    import torch

    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float32)
            if param.ndim >= 2 and "embed" not in name:
                param.add_(noise * (0.5 / param.shape[-1] ** 0.5))
            elif param.ndim <= 1:
                param.add_(noise * 0.1)
            # Embedding tables are already N(0, 1): left as sampled.


def torch_forward(torch_gpt, inputs, targets, window, *, backward: bool):
    """(loss, logits (T, Vp) fp32 before the soft-cap, {name: grad} or None) of one torch forward."""
    import torch

    captured: dict = {}

    def keep_logits(_module, _inputs, output) -> None:  # returns None: the output stays in the graph
        captured["logits"] = output.detach()

    hook = torch_gpt.lm_head.register_forward_hook(keep_logits)
    try:
        with torch.enable_grad() if backward else torch.no_grad():
            loss = torch_gpt(torch.from_numpy(inputs), torch.from_numpy(targets.astype(np.int64)), window)
            if backward:
                loss.backward()
    finally:
        hook.remove()
    grads = {name: p.grad.float().numpy() for name, p in torch_gpt.named_parameters()} if backward else None
    return float(loss), captured["logits"][0].float().numpy(), grads


def torch_model_config(config: Any) -> Any:
    """torch_ref's ModelConfig with the values of jaxgpt's `config`: torch_ref states each of its
    fields itself (parity_tests/test_config_parity.py checks they are jaxgpt's), so the two
    packages' configs are converted field by field, never passed across."""
    from torch_ref import config as torch_cfg

    return _convert_section(torch_cfg.ModelConfig, torch_cfg.ModelLineage, config)


def _convert_section(cls: Any, lineage_cls: Any, values: Any) -> Any:
    """torch_ref's `cls` (a section's config) with the values of jaxgpt's `values`, field by field,
    its `lineage` (a `lineage_cls`) converted the same way."""
    import dataclasses

    lineage = lineage_cls(**dataclasses.asdict(values.lineage))
    return cls(**{f.name: getattr(values, f.name) for f in dataclasses.fields(cls) if f.name != "lineage"}, lineage=lineage)


def torch_preset(preset: Any) -> Any:
    """torch_ref's Preset with the values of jaxgpt's `preset` (as `torch_model_config`)."""
    from torch_ref import config as torch_cfg

    return torch_cfg.Preset(model=torch_model_config(preset.model),
                            optim=_convert_section(torch_cfg.OptimConfig, torch_cfg.OptimLineage, preset.optim),
                            train=_convert_section(torch_cfg.TrainConfig, torch_cfg.TrainLineage, preset.train))


def draw_zero_matrices(model) -> None:
    """Replace every all-zero matrix (attention and MLP c_proj, lm_head) by U(-b, b) with the
    record's linear-init bound b = sqrt(3) * 0.5 / sqrt(fan_in), from a fixed generator."""
    import torch

    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim >= 2 and not param.any():
                bound = 3**0.5 * 0.5 / param.shape[-1] ** 0.5
                param.copy_((torch.rand(param.shape, generator=generator) * 2 - 1) * bound)
