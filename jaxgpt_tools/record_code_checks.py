"""The lineage presets against each record's own code (jaxgpt_tools.record_code): the rows and
the record's-code column of docs/PARITY.md (through jaxgpt_tools.parity_checks), run by
parity_tests/test_record_code.py.

Setting: each record's own 12-layer patterns (its code hard-wires them: #18's and #20's
value-embedding lists, layer 7, #20's long/short mask list) at width 64, 2 heads of 32, over a
1000-token vocabulary whose last token is the EOT (head and #8-#18's tables padded to 1024),
T = 384 (3 blocks), all fp32. One initial state, in the record's own names: its own init with
every parameter perturbed (`parity_checks.perturb_parameters`: the zero-initialised projections
and head included), so that no gradient is zero by structure. jaxgpt runs the preset with the
dense attention backend (one masked softmax, the fastest to compile; the blocked backend's
equality with it is tests/test_attention*.py's); torch_ref runs SDPA with its explicit mask.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from jaxgpt_tools import record_code as rc
from jaxgpt_tools.machine import torch_threads

EOT = 999
DIMS = rc.Dims(vocab_size=1000, num_layers=12, num_heads=2, model_dim=64)
SEQ_LEN = 384
# Two windows per record as its forward takes them (#8/#9 have none: plain causal attention over
# each row): #15's token windows (odd multiples of 64, where its token and block bounds
# alternate inside a block), #18's block window, #20's W_long (W_short = W // 2, 0 at W 1).
WINDOWS = {"untie-embed": (None,), "shortcuts": (None,), "unet-value-embeds": (192, 320), "softcap": (1, 2),
           "record": (1, 3)}
TRAIN_STEPS = 6
TRAIN_SEQUENCES = 4  # per step: rows (#8/#9) or packed sequences, 2 per device in the 2-device run
# Bounds as the lineage rows of parity_checks (fp32: summation order and libm ulps only).
LOGITS_REL, LOSS_REL, MATRIX_REL, SCALAR_REL = 1e-5, 1e-6, 1e-4, 1e-3
FLOOR_FACTOR = 10.0
# A measured floor below fp32's resolution is taken as that resolution (parity_checks' rows).
MIN_LOSS_FLOOR, MIN_MATRIX_FLOOR = 2.4e-7, 1e-6


def model_config(name: str):
    """The preset's ModelConfig at DIMS, fp32 policy, dense attention, unchunked loss."""
    from jaxgpt import config as cfg

    model = cfg.get_preset(name).model
    return cfg.replace(model, vocab_size=DIMS.vocab_size, eot_id=EOT, num_layers=DIMS.num_layers,
                       num_heads=DIMS.num_heads, model_dim=DIMS.model_dim, dtype_policy="fp32", attention_backend="dense",
                       loss_chunk_tokens=None, max_window_blocks=SEQ_LEN // 128)


@functools.cache
def initial_state(name: str) -> dict:
    """The shared initial state in record `name`'s own names: its own init under
    torch.manual_seed(0), every parameter perturbed (its buffers, #15's bf16 inv_freq, as built)."""
    import torch

    from jaxgpt_tools.parity_checks import perturb_parameters

    torch.manual_seed(0)
    model = rc.build_model(rc.load(name, EOT), DIMS)
    perturb_parameters(model, 0)
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def tokens(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) int32 (SEQ_LEN,) of a record-like document layout (EOT = 999)."""
    from jaxgpt.testing import document_layout

    stream = document_layout("record_like", SEQ_LEN + 1, vocab_size=DIMS.vocab_size, eot_id=EOT, seed=seed)
    return stream[:-1].astype(np.int32), stream[1:].astype(np.int32)


def record_batch(name: str, inputs: np.ndarray, targets: np.ndarray):
    """(S, T) sequences as record `name`'s forward takes one batch: all rows for #8/#9, else the
    first sequence alone."""
    return (inputs, targets) if name in rc.ROWS else (inputs[0], targets[0])


# ---------------------------------------------------------------------------------------------
# The two frameworks on the record's state


def torch_ref_model(name: str, state: dict):
    """torch_ref's GPT of the preset (fp32, SDPA, eval mode) holding `state` (record names)."""
    from torch_ref import model as torch_model

    gpt = torch_model.GPT.from_config(model_config(name), attention="sdpa", fp8_head=False)
    torch_model.load_record_state_dict(gpt, state)
    return gpt.eval()


def jax_params(name: str, state: dict) -> dict:
    """jaxgpt's parameters of the preset from `state` (record names, through jaxgpt.convert)."""
    import jax.numpy as jnp

    from jaxgpt import convert

    converted = convert.torch_state_dict_to_params(convert.to_model_names(state), model_config(name))
    return {key: jnp.asarray(np.asarray(value, np.float32)) for key, value in converted.items()}


@functools.cache
def jax_loss_logits_grads(name: str):
    """A jitted (params, ids (1, T), targets (1, T), window int32) -> (loss, logits (T, Vp) fp32,
    grads) of the preset's GPT. The loss is capped_cross_entropy of the model's logits over the
    N tokens / N: GPT.__call__'s own computation without chunks, from one forward."""
    import jax
    from flax import nnx

    from jaxgpt import model as jax_model

    config = model_config(name)
    graph, _ = jax_model.ModelGraph.split(nnx.eval_shape(lambda: jax_model.GPT(config, rngs=nnx.Rngs(0))))

    def loss_fn(params, ids, targets, window):
        logits = graph.bind(params).logits(ids, window)
        flat = logits.reshape(-1, logits.shape[-1])
        loss = jax_model.capped_cross_entropy(flat, targets.reshape(-1), cap=config.logit_cap,
                                              temperature=config.logit_cap_temperature, cap_kind=config.soft_cap,
                                              cap_rounding=config.soft_cap_rounding) / flat.shape[0]
        return loss, flat

    @jax.jit
    def run(params, ids, targets, window):
        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, ids, targets, window)
        return loss, logits, grads

    return run


def framework_window(name: str, window: int | None) -> int:
    """The window value both frameworks take for the record's (0 where the preset has none)."""
    return 0 if window is None else window


# ---------------------------------------------------------------------------------------------
# Forward: logits, loss, gradients against the record's code


@dataclass(frozen=True)
class Gaps:
    """One framework against the record's code, worst over the windows: logits max|diff| (and
    over the record's max|logit|), loss relative, worst matrix and scalar gradient max|diff| over
    the record's max|grad| (with the parameter), exact zeros zero in both, same names."""

    logits_abs: float
    logits_rel: float
    loss_rel: float
    matrix_rel: tuple[float, str]
    scalar_rel: tuple[float, str]
    zeros_agree: bool
    same_names: bool

    @property
    def passed(self) -> bool:
        return (self.same_names and self.zeros_agree and self.logits_rel < LOGITS_REL and self.loss_rel < LOSS_REL
                and self.matrix_rel[0] < MATRIX_REL and self.scalar_rel[0] < SCALAR_REL)

    def describe(self) -> str:
        return (f"logits {self.logits_rel:.1e} of max|logit|, loss {self.loss_rel:.1e}, gradients {self.matrix_rel[0]:.1e} "
                f"({self.matrix_rel[1]}) / scalars {self.scalar_rel[0]:.1e} ({self.scalar_rel[1] or '-'})")


def gaps(reference: rc.Output, names: dict[str, str], loss: float, logits: np.ndarray, grads: dict) -> Gaps:
    """A framework's (loss, logits, grads by project name) against the record's Output (grads by
    record name; `names`: project name -> record name)."""
    from jaxgpt_tools.parity_checks import _gradient_gaps

    theirs = {project: reference.grads[record] for project, record in names.items()}
    same_names, zeros_agree, worst = _gradient_gaps(theirs, {key: np.asarray(value) for key, value in grads.items()})
    logits_abs = float(np.abs(np.asarray(logits, np.float32) - reference.logits).max())
    return Gaps(logits_abs, logits_abs / float(np.abs(reference.logits).max()),
                abs(loss - reference.loss) / abs(reference.loss), worst["matrix"], worst["scalar"], zeros_agree, same_names)


def worst(many: list[Gaps]) -> Gaps:
    """The worst of each measure over several windows."""
    return Gaps(max(g.logits_abs for g in many), max(g.logits_rel for g in many), max(g.loss_rel for g in many),
                max((g.matrix_rel for g in many)), max((g.scalar_rel for g in many)),
                all(g.zeros_agree for g in many), all(g.same_names for g in many))


def _torch_ref_output(gpt, inputs: np.ndarray, targets: np.ndarray, window: int) -> tuple[float, np.ndarray, dict]:
    """torch_ref's (loss, logits (T, Vp), grads by name) on one (T,) sequence."""
    from jaxgpt_tools.parity_checks import _torch_forward

    gpt.zero_grad(set_to_none=True)
    return _torch_forward(gpt, inputs, targets, window, backward=True)


@functools.cache
def forward_gaps(name: str) -> dict[str, Gaps]:
    """{"jaxgpt": ..., "torch_ref": ...}: each framework's worst gaps to the record's own code over
    WINDOWS[name], on one sequence (one row for #8/#9) from initial_state(name)."""
    import jax.numpy as jnp

    loaded, state = rc.load(name, EOT), initial_state(name)
    record_model = rc.build_model(loaded, DIMS)
    rc.load_state(record_model, state)
    names = rc.project_names(record_model)
    gpt, params, run = torch_ref_model(name, state), jax_params(name, state), jax_loss_logits_grads(name)
    inputs, targets = tokens(3)
    found: dict[str, list[Gaps]] = {"jaxgpt": [], "torch_ref": []}
    for window in WINDOWS[name]:
        with torch_threads(1):
            reference = rc.forward(loaded, record_model, *record_batch(name, inputs[None], targets[None]), window)
            torch_out = _torch_ref_output(gpt, inputs, targets, framework_window(name, window))
        found["torch_ref"].append(gaps(reference, names, *torch_out))
        loss, logits, grads = run(params, jnp.asarray(inputs)[None], jnp.asarray(targets)[None],
                                  jnp.int32(framework_window(name, window)))
        found["jaxgpt"].append(gaps(reference, names, float(loss), np.asarray(logits), grads))
    return {framework: worst(measured) for framework, measured in found.items()}
