"""The records'-code column in bf16: #15, #18 and #20 run with their own precision, as written.

#15 converts its whole model with `.bfloat16()` and its CastedLinear modules back to fp32 (bf16
embeddings, scalars and stream, fp32 weight matrices cast to bf16 at use); #18 and #20 convert
their nn.Embedding modules to bf16 (#18 also casts the embeddings' outputs), which makes their
residual stream bf16. All three round by explicit casts, not autocast, so the CPU runs their
bf16 forward as written (record_code.load with precision "bf16": record_changes.bf16_changes),
eagerly, its FlexAttention as its kernel rounds (record_standins.kernel_flex_attention). Both
frameworks run the preset's own dtype policy ("bf16_model" for #15, "record" for #18 and #20) on
the same weights, in the setting of jaxgpt_tools.parity.record_code_checks, with the eager
reading of what the record compiled (record_code_checks' "preset_eager": the soft-cap on bf16
logits rounded after each op); jaxgpt compiled without XLA's excess precision (`eager_rounding`),
so that each side rounds where its program says.

torch_ref with the record's attention reading (`record_attention_in_torch_ref`) is held bitwise
equal to the record's code: logits, loss and every gradient. jaxgpt is held to the record's own
run-to-run floor: its bf16 forward on the same weights with the residual stream's coordinates and
every MLP's hidden units permuted (`permutation_axes`; the gradients permuted back), the same
function with every sum over D and over the hidden units in another order, so only fp32
accumulation order, and hence which bf16 roundings flip, differs (`floor_gaps`, over
FLOOR_PERMUTATIONS permutations, the worst taken); jaxgpt within FLOOR_FACTOR of it.

#8/#9 (autocast) have no bf16 column: CPU autocast casts a different op list from CUDA's
(AUTOCAST_NOTE). #20's FP8 head: the record's own custom op (its torch._scaled_mm call, run eagerly
on the CPU) against both frameworks' emulation on the same operands (`fp8_head_gaps`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from jaxgpt_tools.common.machine import torch_threads
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity.record_code_checks import (
    EOT,
    FORWARD_DOCUMENT_STARTS,
    LAYERS,
    SEQ_LEN,
    WINDOWS,
    dims,
    documents_tokens,
    framework_window,
    initial_state,
    jax_loss_logits_grads,
    jax_params,
    label,
    torch_ref_model,
)
from jaxgpt_tools.parity.record_code_forward import Gaps, gaps, torch_ref_output, worst
from jaxgpt_tools.parity.record_standins import kernel_attention

BF16_RECORDS = ("unet-value-embeds", "softcap", "record")
FLOOR_PERMUTATIONS = 8  # samples of the floor; the worst (its upper end) is the bound's base
FLOOR_FACTOR = 1.5  # each framework's gap over the record's own floor
TORCH_REF_FLEX = "torch_ref, record's attention"
AUTOCAST_NOTE = (
    "#8 and #9 compute under torch.autocast(bfloat16) on CUDA: which ops run in bf16 is CUDA autocast's op list "
    "(every linear and SDPA in bf16, the norms' and softmax's fp32 promotion by its own rules). CPU autocast has "
    "another list (matmuls in bf16, but not the same fp32 promotions, and SDPA on the CPU rounds differently), so "
    "the records' code under CPU autocast would not be their run: their bf16 is compared between jaxgpt and "
    "torch_ref only (the \"autocast\" policy), their fp32 against their own code."
)


def build_bf16_model(loaded: rc.LoadedRecord, dims_: rc.Dims):
    """The record's GPT as its main part converts it: #15 `.bfloat16()` then every CastedLinear
    back to fp32; #18 and #20 every nn.Embedding to bf16. Eval mode."""
    import torch

    ns, model = loaded.module, rc.build_model(loaded, dims_)
    if loaded.name == "unet-value-embeds":
        model.bfloat16()
        for module in model.modules():
            if isinstance(module, ns.CastedLinear):
                module.float()
    else:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding):
                module.bfloat16()
    return model.eval()


@functools.cache
def record_bf16(name: str):
    """(loaded, model, state): record `name`'s bf16 code and model holding initial_state(name) cast
    to its dtypes; `state` (record names, fp32 tensors) is what the model holds, so every side
    loads values its dtypes represent exactly."""
    loaded = rc.load(name, EOT, precision="bf16")
    model = build_bf16_model(loaded, dims(name))
    rc.load_state(model, initial_state(name))
    state = {key: value.detach().float().clone() for key, value in model.state_dict().items()}
    return loaded, model, state


# Where each parameter of a record's GPT holds the residual stream's D (c_proj: its output rows;
# every other matrix and table: its last axis) and the MLP's hidden units (c_fc: rows, mlp
# c_proj: columns). The value tables (#15's vte, #18/#20's value_embeds) live in the values'
# head space, not the stream's, and keep their order.
_MLP_FC, _MLP_PROJ = re.compile(r"mlp\.c_fc\.weight$"), re.compile(r"mlp\.c_proj\.weight$")
_VALUE_TABLES = re.compile(r"(^|\.)(vte|value_embeds)\.")


def permutation_axes(state: dict, model_dim: int, seed: int) -> dict[str, list[tuple[int, np.ndarray]]]:
    """{parameter: [(axis, order), ...]} of one reordering that leaves the record's function
    unchanged: the residual stream's D coordinates in one random order everywhere they appear, and
    each MLP's hidden units in its own. Scalars, value tables and head dims are untouched."""
    rng = np.random.default_rng(seed)
    stream = rng.permutation(model_dim)
    axes: dict[str, list[tuple[int, np.ndarray]]] = {}
    for key in sorted(state):
        shape = tuple(state[key].shape)
        if len(shape) < 2 or _VALUE_TABLES.search(key):
            continue
        stream_axis = 0 if key.endswith("c_proj.weight") else len(shape) - 1
        if shape[stream_axis] != model_dim:
            raise ValueError(f"{key} {shape}: axis {stream_axis} is not the stream's D {model_dim}")
        axes.setdefault(key, []).append((stream_axis, stream))
        if _MLP_FC.search(key):
            hidden = rng.permutation(shape[0])
            axes[key].append((0, hidden))
            axes.setdefault(key.replace(".c_fc.", ".c_proj."), []).append((1, hidden))
    if not any(_MLP_PROJ.search(key) for key in axes):
        raise ValueError("no MLP weights (mlp.c_fc.weight / mlp.c_proj.weight) in the state")
    return axes


def permuted(arrays: dict, axes: dict[str, list[tuple[int, np.ndarray]]], *, inverse: bool = False) -> dict:
    """`arrays` (tensors or numpy arrays by parameter) with permutation_axes applied (or undone)."""
    import torch

    out = dict(arrays)
    for key, moves in axes.items():
        if key not in out:
            continue
        value = out[key]
        for axis, order in moves:
            index = np.argsort(order) if inverse else order
            value = value.index_select(axis, torch.from_numpy(index)) if isinstance(value, torch.Tensor) else np.take(value, index, axis)
        out[key] = value
    return out


def sequences() -> list[tuple[np.ndarray, np.ndarray]]:
    """The fp32 forward rows' multi-document sequences (FORWARD_DOCUMENT_STARTS)."""
    return [documents_tokens(starts, seed) for seed, starts in enumerate(FORWARD_DOCUMENT_STARTS.values(), 3)]


def record_outputs(name: str, state: dict) -> list[rc.Output]:
    """The record's bf16 forward and backward with `state` loaded, per (sequence, window)."""
    loaded, model, _ = record_bf16(name)
    rc.load_state(model, state)
    with torch_threads(1):
        return [rc.forward(loaded, model, inputs, targets, window)
                for (inputs, targets), window in itertools.product(sequences(), WINDOWS[name])]


@functools.cache
def reference_outputs(name: str) -> list[rc.Output]:
    """record_outputs on the record's own bf16 state."""
    return record_outputs(name, record_bf16(name)[2])


@functools.cache
def floor_gaps(name: str) -> tuple[Gaps, ...]:
    """The record's own run-to-run floor: per permutation (FLOOR_PERMUTATIONS), its
    bf16 forward with permutation_axes(seed) applied against its own, worst over sequences and windows."""
    _, model, state = record_bf16(name)
    names = {key: key for key, _ in model.named_parameters()}
    samples = []
    for seed in range(1, FLOOR_PERMUTATIONS + 1):
        axes = permutation_axes(state, dims(name).model_dim, seed)
        outputs = record_outputs(name, permuted(state, axes))
        samples.append(worst([gaps(ref, names, out.loss, out.logits, permuted(out.grads or {}, axes, inverse=True))
                              for ref, out in zip(reference_outputs(name), outputs, strict=True)]))
    rc.load_state(model, state)
    return tuple(samples)


def eager_rounding(jitted):
    """`jitted` (a jax.jit function) compiled, on its first call's shapes, with XLA's excess
    precision off: every bf16 value rounded where the program rounds it, as eager torch does
    (XLA otherwise drops a bf16 round trip inside a fusion and keeps fp32)."""
    compiled: dict = {}

    def run(*args):
        if "run" not in compiled:
            compiled["run"] = jitted.lower(*args).compile(compiler_options={"xla_allow_excess_precision": False})
        return compiled["run"](*args)

    return run


@contextlib.contextmanager
def record_attention_in_torch_ref() -> Iterator[None]:
    """torch_ref's attention replaced, while inside, by the record column's FlexAttention reading
    (record_standins.kernel_attention, the pairs from torch_ref's own dense mask): torch_ref's CPU
    path runs SDPA, whose CPU kernel rounds otherwise; everything else is torch_ref's."""
    from unittest import mock

    from torch_ref import model as torch_model

    def attend(q, k, v, mask, scale: float):
        return kernel_attention(q, k, v, mask, scale)

    with mock.patch.object(torch_model, "attend", attend):
        yield


@functools.cache
def framework_gaps(name: str) -> dict[str, Gaps]:
    """Each side under the preset's own dtype policy, eager readings (record_code_checks'
    "preset_eager"), against the record's bf16 code, worst over sequences and windows:
    "jaxgpt" (compiled with `eager_rounding`), "torch_ref" (its CPU path: SDPA) and
    "torch_ref, record's attention" (`record_attention_in_torch_ref`)."""
    import jax.numpy as jnp

    _, model, state = record_bf16(name)
    names = rc.project_names(model)
    gpt = torch_ref_model(name, state, "preset_eager")
    params, run = jax_params(name, state, "preset_eager"), eager_rounding(jax_loss_logits_grads(name, "preset_eager"))
    found: dict[str, list[Gaps]] = {"jaxgpt": [], "torch_ref": [], TORCH_REF_FLEX: []}
    cases = itertools.product(sequences(), WINDOWS[name])
    for reference, ((inputs, targets), window) in zip(reference_outputs(name), cases, strict=True):
        with torch_threads(1):
            found["torch_ref"].append(gaps(reference, names, *torch_ref_output(gpt, inputs, targets,
                                                                                framework_window(name, window))))
            with record_attention_in_torch_ref():
                found[TORCH_REF_FLEX].append(gaps(reference, names, *torch_ref_output(
                    gpt, inputs, targets, framework_window(name, window))))
        loss, logits, grads = run(params, jnp.asarray(inputs)[None], jnp.asarray(targets)[None],
                                  jnp.int32(framework_window(name, window)))
        found["jaxgpt"].append(gaps(reference, names, float(loss), np.asarray(logits, np.float32),
                                    {key: np.asarray(value, np.float32) for key, value in grads.items()}))
    return {framework: worst(measured) for framework, measured in found.items()}


def exact(found: Gaps) -> bool:
    """Every measure zero: bitwise the record's logits, loss and gradients."""
    return (found.same_names and found.zeros_agree and found.logits_abs == 0 and found.loss_rel == 0
            and found.matrix_rel[0] == 0 and found.scalar_rel[0] == 0)


@dataclass(frozen=True)
class FloorBounds:
    """The bounds a framework's bf16 gaps are held to: FLOOR_FACTOR times the worst of the floor's
    samples, per measure (logits and loss; gradients: matrices and scalars)."""

    logits_rel: float
    loss_rel: float
    matrix_rel: float
    scalar_rel: float

    @classmethod
    def of(cls, floor: tuple[Gaps, ...]) -> FloorBounds:
        return cls(FLOOR_FACTOR * max(g.logits_rel for g in floor), FLOOR_FACTOR * max(g.loss_rel for g in floor),
                   FLOOR_FACTOR * max(g.matrix_rel[0] for g in floor),
                   FLOOR_FACTOR * max(g.scalar_rel[0] for g in floor))

    def ratios(self, found: Gaps) -> dict[str, float]:
        """Each measure of `found` over its bound (passing: every ratio <= 1)."""
        return {"logits": found.logits_rel / self.logits_rel, "loss": found.loss_rel / self.loss_rel,
                "matrices": found.matrix_rel[0] / self.matrix_rel, "scalars": found.scalar_rel[0] / self.scalar_rel}


def jaxgpt_within_floor(name: str) -> tuple[bool, dict[str, float]]:
    """(jaxgpt's logits, loss, matrix and scalar gradients within FloorBounds, ratios of the four
    measures to their bounds). The scalar gradients are torch autograd's sums
    (jaxgpt.layers.scale_by_scalar: SCALAR_GRADIENTS_NOTE)."""
    found = framework_gaps(name)["jaxgpt"]
    ratios = FloorBounds.of(floor_gaps(name)).ratios(found)
    return found.same_names and found.zeros_agree and all(ratio <= 1.0 for ratio in ratios.values()), ratios


SCALAR_GRADIENTS_NOTE = (
    "jaxgpt's scalar gradients (lambdas, skip weights) sum the bf16 products in fp32 and round once, as torch's "
    "autograd (jaxgpt.layers.scale_by_scalar); autodiff's own bf16 reduce, which XLA:CPU accumulates in bf16, "
    "was 3-7x the bound"
)


def check_record_bf16_forward(name: str):
    """parity.measures.Result: both frameworks' bf16 logits, loss and gradients (the preset's
    dtype policy, eager readings) against record `name`'s own bf16 code: torch_ref with the
    record's attention reading bitwise, jaxgpt within FLOOR_FACTOR of the record's own floor."""
    from jaxgpt_tools.parity.measures import Result

    floor, found = floor_gaps(name), framework_gaps(name)
    bounds = FloorBounds.of(floor)
    jax_ok, ratios = jaxgpt_within_floor(name)
    windows = ", ".join(str(w) for w in WINDOWS[name])
    spread = lambda pick: f"{min(map(pick, floor)):.1e}..{max(map(pick, floor)):.1e}"  # noqa: E731
    sdpa = bounds.ratios(found["torch_ref"])
    return Result(
        f"Record's code {label(name)} in bf16: logits, loss, gradients at windows {windows} on "
        f"{len(FORWARD_DOCUMENT_STARTS)} multi-document sequences ({LAYERS[name]} layers, D 64, T {SEQ_LEN})",
        max(found[k].logits_abs for k in ("jaxgpt", TORCH_REF_FLEX)),
        max(found[k].logits_rel for k in ("jaxgpt", TORCH_REF_FLEX)),
        f"torch_ref with the record's attention reading: bitwise; jaxgpt within {FLOOR_FACTOR:g}x the record's own "
        f"floor: logits {bounds.logits_rel:.1e} of max|logit|, loss rel {bounds.loss_rel:.1e}, matrix gradients "
        f"{bounds.matrix_rel:.1e} of max|grad|, scalar gradients {bounds.scalar_rel:.1e}",
        f"bf16 on all three sides (the record's casts as written, eager; the preset's dtype policy with the eager "
        f"soft-cap rounding, jaxgpt compiled without XLA's excess precision), so only where each side rounds "
        f"differs: the floor is the record's code against itself with its stream coordinates and MLP hidden units "
        f"permuted ({FLOOR_PERMUTATIONS} permutations; the same function, its sums in other orders): logits "
        f"{spread(lambda g: g.logits_rel)}, loss {spread(lambda g: g.loss_rel)}, matrices "
        f"{spread(lambda g: g.matrix_rel[0])}, scalars {spread(lambda g: g.scalar_rel[0])}",
        jax_ok and exact(found[TORCH_REF_FLEX]),
        "jaxgpt gap / bound: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items())
        + f" ({SCALAR_GRADIENTS_NOTE}); torch_ref's CPU path (SDPA, whose CPU kernel rounds otherwise) / bound: "
        + ", ".join(f"{k} {v:.2f}" for k, v in sdpa.items()),
        record_code="; ".join(f"{fw}: {'bitwise equal' if exact(g) else g.describe()}" for fw, g in found.items()),
    )


# ---------------------------------------------------------------------------------------------
# #20's FP8 head: the record's own custom op against both frameworks' emulation

FP8_SHAPE = (256, 64, 1024)  # (N tokens, D, Vp): the miniature's head, multiples of 16 as _scaled_mm wants


@dataclass(frozen=True)
class Fp8Gaps:
    """One framework's FP8 head against the record's op on the same operands: the share of
    logits and input-gradient elements (bf16) that differ and their worst difference in bf16
    ulps of the record's value, and the weight gradient's (fp32) max|diff| over max|grad|."""

    logits_differ: float
    logits_ulps: float
    dx_differ: float
    dx_ulps: float
    dw_rel: float

    def describe(self) -> str:
        return (f"logits {self.logits_differ:.1%} differ (worst {self.logits_ulps:g} ulp), input gradient "
                f"{self.dx_differ:.1%} (worst {self.dx_ulps:g} ulp), weight gradient {self.dw_rel:.1e} of max|grad|")


def _ulps(ours: np.ndarray, theirs: np.ndarray) -> tuple[float, float]:
    """(share of elements that differ, worst |difference| in bf16 ulps of `theirs`), both bf16
    values held in fp32 arrays; an ulp of v is 2^(floor(log2|v|) - 7), of 0 the smallest normal's."""
    diff = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    magnitude = np.maximum(np.abs(theirs.astype(np.float64)), np.finfo(np.float32).tiny)
    ulp = np.exp2(np.floor(np.log2(magnitude)) - 7)
    return float(np.mean(diff > 0)), float((diff / ulp).max())


def fp8_operands(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x (N, D) bf16-valued fp32 of unit RMS as the normed stream, w (Vp, D) fp32 at the head's
    scale, g (N, Vp) bf16-valued fp32 at the scale of a mean loss's logit gradient over the
    record's 65,536 tokens, so that 2^29 g fits e5m2)."""
    import ml_dtypes

    n, d, vocab = FP8_SHAPE
    rng = np.random.default_rng(seed)
    bf16 = lambda a: a.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    return (bf16(rng.standard_normal((n, d))), (rng.standard_normal((vocab, d)) * d**-0.5).astype(np.float32),
            bf16(rng.standard_normal((n, vocab)) * 2.0**-18))


def record_fp8_head(x: np.ndarray, w: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(logits (N, Vp), dx (N, D), dw (Vp, D)) of #20's own `lm_head_fp8` on the CPU (its custom op,
    eager: record_changes' "eager FP8" changes; torch._scaled_mm's CPU kernel accumulates in fp32,
    where the record's use_fast_accum=True forward on Hopper accumulated in the tensor cores'
    reduced precision), as fp32 arrays."""
    import torch

    ns = rc.load("record", EOT, precision="bf16").module
    x_t = torch.from_numpy(x).bfloat16().requires_grad_()
    w_t = torch.from_numpy(w).requires_grad_()
    with torch_threads(1):
        logits = ns.lm_head_fp8(x_t, w_t)
        logits.backward(torch.from_numpy(g).bfloat16())
    return logits.detach().float().numpy(), _grad(x_t), _grad(w_t)


def _grad(tensor) -> np.ndarray:
    """A leaf's gradient as fp32 numpy (ValueError when the backward left none)."""
    if tensor.grad is None:
        raise ValueError("the backward left no gradient")
    return tensor.grad.float().numpy()


@functools.cache
def fp8_head_gaps(seed: int = 0) -> dict[str, Fp8Gaps]:
    """{"jaxgpt": ..., "torch_ref": ...}: jaxgpt.fp8.fp8_head and torch_ref.fp8.fp8_matmul (its
    emulated backend: the CPU's) against record_fp8_head on fp8_operands(seed), at the record's
    scales (2, 32, 2^29)."""
    import jax
    import jax.numpy as jnp
    import torch

    from jaxgpt import fp8 as jax_fp8
    from torch_ref import fp8 as torch_fp8

    x, w, g = fp8_operands(seed)
    theirs = record_fp8_head(x, w, g)
    logits, pullback = jax.vjp(lambda a, b: jax_fp8.fp8_head(a, b, 2.0**29), jnp.asarray(x, jnp.bfloat16),
                               jnp.asarray(w))
    dx, dw = pullback(jnp.asarray(g, jnp.bfloat16))
    x_t, w_t = torch.from_numpy(x).bfloat16().requires_grad_(), torch.from_numpy(w).requires_grad_()
    with torch_threads(1):
        out = torch_fp8.fp8_matmul(x_t, w_t, backend="emulated", grad_scale=2.0**29)
        out.backward(torch.from_numpy(g).bfloat16())
    found = {"jaxgpt": (np.asarray(logits, np.float32), np.asarray(dx, np.float32), np.asarray(dw, np.float32)),
             "torch_ref": (out.detach().float().numpy(), _grad(x_t), _grad(w_t))}
    return {framework: Fp8Gaps(*_ulps(ours[0], theirs[0]), *_ulps(ours[1], theirs[1]),
                               float(np.abs(ours[2] - theirs[2]).max() / np.abs(theirs[2]).max()))
            for framework, ours in found.items()}


def check_record_fp8_head():
    """parity.measures.Result: both frameworks' FP8 head (forward, input and weight gradients)
    against #20's own FP8 custom op on the same operands, run on the CPU."""
    from jaxgpt_tools.parity.measures import Result

    found = fp8_head_gaps(0)
    worst_ulps = max(max(g.logits_ulps, g.dx_ulps) for g in found.values())
    worst_share = max(max(g.logits_differ, g.dx_differ) for g in found.values())
    worst_dw = max(g.dw_rel for g in found.values())
    n, d, vocab = FP8_SHAPE
    return Result(
        f"Record's code #20 record, FP8 head: its own custom op (nanogpt::mm and its backward) on the CPU, "
        f"N {n}, D {d}, Vp {vocab}, scales 2, 32, 2^29",
        0.0, worst_dw,
        "logits and input gradient (bf16): at most 1 bf16 ulp and under 1% of the elements differ; weight "
        "gradient (fp32): 1e-6 of max|grad|",
        "the quantised operands are exact on every side (e4m3/e5m2 casts round to nearest even), so only the fp32 "
        "accumulation order of the three GEMMs differs before the one rounding of each output: a bf16 output can "
        "flip by one ulp, the fp32 weight gradient differs in its last bits. The record's forward asks "
        "use_fast_accum=True, which on Hopper accumulates in the tensor cores' reduced precision: torch._scaled_mm's "
        "CPU kernel accumulates in fp32, so that rounding is not reproduced here (the device plan's FP8 checks run "
        "the CUDA kernel)",
        worst_ulps <= 1 and worst_share < 0.01 and worst_dw < 1e-6,
        f"worst: {worst_ulps:g} ulp, {worst_share:.2%} of elements differ, weight gradient {worst_dw:.1e}",
        record_code="; ".join(f"{fw}: {g.describe()}" for fw, g in found.items()),
    )
