"""The records'-code rows of the soft-cap where it bends: both frameworks' CAPPED fp32 logits
against each record's own code, on weights whose logits reach well past the cap's linear range.
In the setting of jaxgpt_tools.parity.record_code_checks.

At the shared initial state the logits stay within ~2.4 in size, where every cap is nearly the
identity (tanh(x) = x - x^3/3: 0.02% off at 2.4 / 30). Here the head is scaled by a power of two
(exact in fp32, the same weights for all three) until the largest |logit| before the cap is at
least BEND_FACTOR x the cap's scale: #9 and #15 cap 30 tanh(z / 30) (scale 30), #18 15 tanh(z / 15)
(15), #20 30 sigmoid(z / 7.5) = 15 + 15 tanh(z / 15) (15). #8 has no cap (its rows compare its
plain logits). The record's capped logits are the tensor its own forward hands F.cross_entropy
(kept by a TorchFunctionMode), after its own cap and casts.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from jaxgpt_tools.common.machine import torch_threads
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity.record_code_checks import (
    EOT,
    FORWARD_DOCUMENT_STARTS,
    WINDOWS,
    dims,
    documents_tokens,
    framework_window,
    initial_state,
    jax_loss_logits_grads,
    jax_params,
    label,
    model_config,
    record_batch,
    torch_ref_model,
)

CAPPED = ("shortcuts", "unet-value-embeds", "softcap", "record")
BEND_FACTOR = 2.0  # asserted: max |logit| before the cap >= this x the cap's scale
TARGET_FACTOR = 3.0  # the head's scale aims here (a power of two at or above it)
HEAD = "lm_head.weight"
# fp32 on all three: the logits before the cap agree to ~4e-7 of their max (the forward rows);
# the cap's slope is at most 1 (tanh; the sigmoid's is cap / (4 temperature) = 1), so a capped
# difference is at most the uncapped one plus the cap's own libm ulps, while the capped max is
# ~1/3..1/6 of the uncapped max here: ~2.5e-6 of the capped max expected, 1e-5 asserted. The loss:
# the forward rows' 1e-6.
CAPPED_REL, LOSS_REL = 1e-5, 1e-6


def cap_scale(name: str) -> float:
    """The z at which record `name`'s cap bends: tanh's cap, or twice the sigmoid's temperature."""
    config = model_config(name)
    if config.lineage.soft_cap == "sigmoid":
        return 2 * config.logit_cap_temperature
    if config.lineage.soft_cap != "tanh":
        raise ValueError(f"record {name!r} has no soft-cap ({config.lineage.soft_cap!r})")
    return config.logit_cap


@functools.cache
def _loss_input_keeper():
    """A TorchFunctionMode class whose instances keep the first argument (fp32 copy) of every
    F.cross_entropy call made inside them (torch imported on first use)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class KeepLossInput(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.kept: list = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.nn.functional.cross_entropy:
                self.kept.append(args[0].detach().float().clone())
            return func(*args, **(kwargs or {}))

    return KeepLossInput


def record_capped(loaded: rc.LoadedRecord, model, inputs: np.ndarray, targets: np.ndarray,
                  window: int | None) -> tuple[float, np.ndarray, np.ndarray]:
    """(loss, logits before the cap (N, Vp), capped logits (N, Vp)) of the record's own forward on
    one (T,) sequence (a one-row batch for #8/#9)."""
    import torch

    keep = _loss_input_keeper()()
    with torch.no_grad(), keep:
        out = rc.forward(loaded, model, *record_batch(loaded.name, inputs[None], targets[None]), window, backward=False)
    (capped,) = keep.kept
    return out.loss, out.logits, capped.reshape(-1, capped.shape[-1]).numpy()


@functools.cache
def bent_state(name: str) -> tuple[dict, float]:
    """(initial_state(name) with the head scaled by 2^k, 2^k): the smallest power of two that takes
    the largest |logit| of the first forward sequence to TARGET_FACTOR x cap_scale(name)."""
    state = dict(initial_state(name))
    loaded = rc.load(name, EOT)
    model = rc.build_model(loaded, dims(name))
    rc.load_state(model, state)
    inputs, targets = documents_tokens(next(iter(FORWARD_DOCUMENT_STARTS.values())), 3)
    with torch_threads(1):
        _, logits, _ = record_capped(loaded, model, inputs, targets, WINDOWS[name][0])
    factor = 2.0 ** math.ceil(math.log2(TARGET_FACTOR * cap_scale(name) / float(np.abs(logits).max())))
    state[HEAD] = state[HEAD] * factor
    return state, factor


@dataclass(frozen=True)
class CapGaps:
    """One framework against the record: capped logits max|diff| (and over the record's max
    capped |logit|), loss relative, worst over the sequences."""

    capped_abs: float
    capped_rel: float
    loss_rel: float

    @property
    def passed(self) -> bool:
        return self.capped_rel < CAPPED_REL and self.loss_rel < LOSS_REL

    def describe(self) -> str:
        return f"capped logits {self.capped_rel:.1e} of max|capped| ({self.capped_abs:.1e}), loss {self.loss_rel:.1e}"


def _gaps(capped: np.ndarray, loss: float, reference_capped: np.ndarray, reference_loss: float) -> CapGaps:
    diff = float(np.abs(np.asarray(capped, np.float32) - reference_capped).max())
    return CapGaps(diff, diff / float(np.abs(reference_capped).max()), abs(loss - reference_loss) / abs(reference_loss))


def _worst(many: list[CapGaps]) -> CapGaps:
    return CapGaps(max(g.capped_abs for g in many), max(g.capped_rel for g in many), max(g.loss_rel for g in many))


@functools.cache
def capped_gaps(name: str) -> tuple[dict[str, CapGaps], float]:
    """({framework: worst CapGaps over the FORWARD_DOCUMENT_STARTS sequences}, the smallest ratio of
    max |logit| before the cap to cap_scale(name) among them), at WINDOWS[name][0]."""
    import jax.numpy as jnp
    import torch

    from jaxgpt import loss as loss_lib

    state, _ = bent_state(name)
    loaded, config, window = rc.load(name, EOT), model_config(name), WINDOWS[name][0]
    record_model = rc.build_model(loaded, dims(name))
    rc.load_state(record_model, state)
    gpt, params, run = torch_ref_model(name, state), jax_params(name, state), jax_loss_logits_grads(name)
    found: dict[str, list[CapGaps]] = {"jaxgpt": [], "torch_ref": []}
    bends = []
    for seed, starts in enumerate(FORWARD_DOCUMENT_STARTS.values(), 3):
        inputs, targets = documents_tokens(starts, seed)
        with torch_threads(1):
            loss, logits, capped = record_capped(loaded, record_model, inputs, targets, window)
            with torch.no_grad():
                torch_loss = gpt(torch.from_numpy(inputs), torch.from_numpy(targets.astype(np.int64)),
                                 framework_window(name, window))
                torch_capped = gpt.capped(gpt.logits(torch.from_numpy(inputs), framework_window(name, window)))
        bends.append(float(np.abs(logits).max()) / cap_scale(name))
        found["torch_ref"].append(_gaps(torch_capped.numpy(), float(torch_loss), capped, loss))
        jax_loss, jax_logits, _ = run(params, jnp.asarray(inputs)[None], jnp.asarray(targets)[None],
                                      jnp.int32(framework_window(name, window)))
        jax_capped = loss_lib.soft_cap(jax_logits, config.logit_cap, config.logit_cap_temperature,
                                       config.lineage.soft_cap, config.lineage.soft_cap_rounding)
        found["jaxgpt"].append(_gaps(np.asarray(jax_capped), float(jax_loss), capped, loss))
    return {framework: _worst(gaps) for framework, gaps in found.items()}, min(bends)


def check_record_capped(name: str):
    """parity.measures.Result: both frameworks' capped fp32 logits (and loss) against record
    `name`'s own code where its cap bends. FileNotFoundError when its log is absent."""
    from jaxgpt_tools.parity.measures import Result

    found, bend = capped_gaps(name)
    _, factor = bent_state(name)
    config = model_config(name)
    cap = (f"{config.logit_cap:g} sigmoid(z / {config.logit_cap_temperature:g})" if config.lineage.soft_cap == "sigmoid"
           else f"{config.logit_cap:g} tanh(z / {config.logit_cap:g})")
    return Result(
        f"Record's code {label(name)}: capped fp32 logits where its cap {cap} bends (head x {factor:g}: max |logit| "
        f">= {BEND_FACTOR:g} x {cap_scale(name):g} before the cap), window {WINDOWS[name][0]}",
        max(g.capped_abs for g in found.values()),
        max(g.capped_rel for g in found.values()),
        f"each framework's capped logits against the record's own (the input of its cross-entropy): max|diff| < "
        f"{CAPPED_REL:g} of max|capped logit|; loss rel < {LOSS_REL:g}; max |logit| before the cap >= {BEND_FACTOR:g} x "
        f"{cap_scale(name):g}",
        "fp32 on all three: the uncapped logits agree to ~4e-7 of their max (the forward rows) and the cap's slope "
        "is at most 1, so a capped difference is at most the uncapped one plus the cap's libm ulps; the capped max is "
        "1/3 to 1/6 of the uncapped one here (~2.5e-6 expected)",
        all(g.passed for g in found.values()) and bend >= BEND_FACTOR,
        f"max |logit| before the cap {bend:.1f} x {cap_scale(name):g} (smallest over the {len(FORWARD_DOCUMENT_STARTS)} "
        "multi-document sequences); the head scaled by a power of two (exact), the same weights in all three",
        record_code="; ".join(f"{framework}: {g.describe()}" for framework, g in found.items()),
    )
