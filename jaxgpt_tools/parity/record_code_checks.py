"""The lineage presets against each record's own code (jaxgpt_tools.parity.record_code): the rows and
the record's-code column of docs/PARITY.md (through jaxgpt_tools.parity.checks), run by
parity_tests/test_record_code.py.

Setting: width 64, 2 heads of 32, over a 1000-token vocabulary whose last token is the EOT (head
and #8-#18's tables padded to 1024), T = 384 (3 blocks), all fp32; 12 layers for #18 and #20,
whose code hard-wires the record's per-layer patterns (the value-embedding list, layer 7, #20's
long/short mask list), 4 for #8, #9 and #15, whose code takes any even count (#15's value chunks
then mirror as 0, 1, 1, 0), which keeps the compile of jaxgpt's step short. One initial state, in the record's own names: its own init with
every parameter perturbed (`parity.measures.perturb_parameters`: the zero-initialised projections
and head included), so that no gradient is zero by structure. jaxgpt runs the preset with the
dense attention backend (one masked softmax, the fastest to compile; the blocked backend's
equality with it is tests/test_attention*.py's); torch_ref runs SDPA with its explicit mask.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from jaxgpt_tools.common.machine import torch_threads
from jaxgpt_tools.parity import record_code as rc

EOT = 999
LAYERS = {"untie-embed": 4, "shortcuts": 4, "unet-value-embeds": 4, "softcap": 12, "record": 12}
SEQ_LEN = 384
# Two windows per record as its forward takes them (#8/#9 have none: plain causal attention over
# each row): #15's token windows (odd multiples of 64, where its token and block bounds
# alternate inside a block), #18's block window, #20's W_long (W_short = W // 2, 0 at W 1).
WINDOWS = {"untie-embed": (None,), "shortcuts": (None,), "unet-value-embeds": (192, 320), "softcap": (1, 2),
           "record": (1, 3)}
TRAIN_STEPS = 3
TRAIN_SEQUENCES = 4  # per step: rows (#8/#9) or packed sequences, 2 per device in the 2-device run
OVERLAP_STRIDE = 32  # tokens between the starts of a step's sequences (train_batches)
# Bounds as the lineage rows of parity_checks (fp32: summation order and libm ulps only).
LOGITS_REL, LOSS_REL, MATRIX_REL, SCALAR_REL = 1e-5, 1e-6, 1e-4, 1e-3
# The training rows' bounds, in units of the record's own floors: 10x for the losses and the Muon
# matrices (the goal set for these rows), 20x for the Adam-updated tables (TABLES_REASON).
FACTORS = {"losses": 10.0, "Muon matrices": 10.0, "Adam tables": 20.0}
TABLES_REASON = ("Adam tables at 20x: where an element's Adam steps nearly cancel (embeddings at lr 0.3-0.6), its final "
                 "value follows the last bits of its gradients; the floors reorder sums or refine Newton-Schulz but keep "
                 "torch's Adam arithmetic, while jaxgpt's optax Adam rounds differently at every step: measured up to "
                 "11.5x (jaxgpt, #15, a handful of embed.weight rows), torch_ref <= 2.6x")
# A measured floor below fp32's resolution is taken as that resolution (parity_checks' rows).
MIN_LOSS_FLOOR, MIN_MATRIX_FLOOR = 2.4e-7, 1e-6


def dims(name: str) -> rc.Dims:
    """The dims record `name`'s GPT is built with here."""
    return rc.Dims(vocab_size=1000, num_layers=LAYERS[name], num_heads=2, model_dim=64)


def model_config(name: str):
    """The preset's ModelConfig at dims(name), fp32 policy, dense attention, unchunked loss; at 4
    layers the per-layer patterns as the record's code builds them (#15's chunks min(i, L-1-i),
    one window for every layer, no layer without attention)."""
    from jaxgpt import config as cfg

    model, size = cfg.get_preset(name).model, dims(name)
    patterns = {}
    if size.num_layers != model.num_layers:
        layers = size.num_layers
        chunks = model.lineage.value_embed_layout == "chunks" and model.num_value_embeds
        patterns = dict(value_embed_slots=tuple(min(i, layers - 1 - i) if chunks else None for i in range(layers)),
                        long_window_layers=tuple(range(layers)), attention_free_layers=())
    return cfg.replace(model, vocab_size=size.vocab_size, eot_id=EOT, num_layers=size.num_layers, num_heads=size.num_heads,
                       model_dim=size.model_dim, dtype_policy="fp32", attention_backend="dense", loss_chunk_tokens=None,
                       max_window_blocks=SEQ_LEN // 128, **patterns)


@functools.cache
def initial_state(name: str) -> dict:
    """The shared initial state in record `name`'s own names: its own init under
    torch.manual_seed(0), every parameter perturbed (its buffers, #15's bf16 inv_freq, as built)."""
    import torch

    from jaxgpt_tools.parity.measures import perturb_parameters

    torch.manual_seed(0)
    model = rc.build_model(rc.load(name, EOT), dims(name))
    perturb_parameters(model, 0)
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def tokens(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) int32 (SEQ_LEN,) of a record-like document layout (EOT = 999)."""
    from jaxgpt.testing import document_layout

    stream = document_layout("record_like", SEQ_LEN + 1, vocab_size=1000, eot_id=EOT, seed=seed)
    return stream[:-1].astype(np.int32), stream[1:].astype(np.int32)


def record_batch(name: str, inputs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S, T) sequences as record `name`'s forward takes one batch: all rows for #8/#9, else the
    first sequence alone."""
    return (inputs, targets) if name in rc.ROWS else (inputs[0], targets[0])


# ---------------------------------------------------------------------------------------------
# The two frameworks on the record's state


def torch_ref_model(name: str, state: dict):
    """torch_ref's GPT of the preset (fp32, SDPA, eval mode) holding `state` (record names)."""
    from torch_ref import model as torch_model
    from torch_ref.run import convert as torch_convert

    gpt = torch_model.GPT.from_config(model_config(name), attention="sdpa", fp8_head=False)
    torch_convert.load_record_state_dict(gpt, state)
    return gpt.eval()


def jax_params(name: str, state: dict) -> dict:
    """jaxgpt's parameters of the preset from `state` (record names, through jaxgpt.run.convert)."""
    import jax.numpy as jnp

    from jaxgpt.run import convert

    converted = convert.torch_state_dict_to_params(convert.to_model_names(state), model_config(name))
    return {key: jnp.asarray(np.asarray(value, np.float32)) for key, value in converted.items()}


@functools.cache
def jax_loss_logits_grads(name: str):
    """A jitted (params, ids (1, T), targets (1, T), window int32) -> (loss, logits (T, Vp) fp32,
    grads) of the preset's GPT. The loss is capped_cross_entropy of the model's logits over the
    N tokens / N: GPT.__call__'s own computation without chunks, from one forward."""
    import jax
    from flax import nnx

    from jaxgpt import loss as loss_lib
    from jaxgpt import model as jax_model
    from jaxgpt import params as params_lib

    config = model_config(name)
    graph, _ = params_lib.ModelGraph.split(nnx.eval_shape(lambda: jax_model.GPT(config, rngs=nnx.Rngs(0))))

    def loss_fn(params, ids, targets, window):
        logits = graph.bind(params).logits(ids, window)
        flat = logits.reshape(-1, logits.shape[-1])
        loss = loss_lib.capped_cross_entropy(flat, targets.reshape(-1), cap=config.logit_cap,
                                              temperature=config.logit_cap_temperature, cap_kind=config.lineage.soft_cap,
                                              cap_rounding=config.lineage.soft_cap_rounding) / flat.shape[0]
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
    from jaxgpt_tools.parity.measures import gradient_gaps

    assert reference.grads is not None, "the record's forward ran without its backward"
    theirs = {project: reference.grads[record] for project, record in names.items()}
    same_names, zeros_agree, worst = gradient_gaps(theirs, {key: np.asarray(value) for key, value in grads.items()})
    logits_abs = float(np.abs(np.asarray(logits, np.float32) - reference.logits).max())
    return Gaps(logits_abs, logits_abs / float(np.abs(reference.logits).max()),
                abs(loss - reference.loss) / abs(reference.loss), worst["matrix"], worst["scalar"], zeros_agree, same_names)


def worst(many: list[Gaps]) -> Gaps:
    """The worst of each measure over several windows."""
    return Gaps(max(g.logits_abs for g in many), max(g.logits_rel for g in many), max(g.loss_rel for g in many),
                max(g.matrix_rel for g in many), max(g.scalar_rel for g in many),
                all(g.zeros_agree for g in many), all(g.same_names for g in many))


def _torch_ref_output(gpt, inputs: np.ndarray, targets: np.ndarray, window: int) -> tuple[float, np.ndarray, dict]:
    """torch_ref's (loss, logits (T, Vp), grads by name) on one (T,) sequence."""
    from jaxgpt_tools.parity.measures import torch_forward

    gpt.zero_grad(set_to_none=True)
    return torch_forward(gpt, inputs, targets, window, backward=True)


@functools.cache
def forward_gaps(name: str) -> dict[str, Gaps]:
    """{"jaxgpt": ..., "torch_ref": ...}: each framework's worst gaps to the record's own code over
    WINDOWS[name], on one sequence (one row for #8/#9) from initial_state(name)."""
    import jax.numpy as jnp

    loaded, state = rc.load(name, EOT), initial_state(name)
    record_model = rc.build_model(loaded, dims(name))
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


# ---------------------------------------------------------------------------------------------
# Training: a few steps of each against the record's own optimizers and schedules


def train_batches(name: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """TRAIN_STEPS batches of TRAIN_SEQUENCES (S, T) int32 sequences (rows for #8/#9): windows of
    one document stream per step starting OVERLAP_STRIDE tokens apart, so that most tokens (and
    positions' contexts) occur in every sequence: then the two devices' gradients of every
    parameter, embedding rows included, are sums over both devices' sequences, and the 1-vs-2
    device floor perturbs every gradient (with disjoint sequences an embedding row used on one
    device only gets the same bits either way)."""
    from jaxgpt.testing import document_layout

    del name  # the same token batches for every record
    span = SEQ_LEN + OVERLAP_STRIDE * (TRAIN_SEQUENCES - 1) + 1
    batches = []
    for step in range(TRAIN_STEPS):
        stream = document_layout("record_like", span, vocab_size=1000, eot_id=EOT, seed=100 + step)
        starts = [OVERLAP_STRIDE * i for i in range(TRAIN_SEQUENCES)]
        batches.append((np.stack([stream[s:s + SEQ_LEN] for s in starts]).astype(np.int32),
                        np.stack([stream[s + 1:s + SEQ_LEN + 1] for s in starts]).astype(np.int32)))
    return batches


def cooldown_steps(name: str) -> int:
    """The LR cooldown of a TRAIN_STEPS run as #8-#15's warmdown_iters / cooldown_iters: the
    preset's round(cooldown_frac x steps) (OptimConfig.lineage.cooldown_whole_steps)."""
    from jaxgpt import config as cfg

    return round(cfg.get_preset(name).optim.cooldown_frac * TRAIN_STEPS)


def _preset_schedules(name: str):
    """(the preset's OptimConfig with fp32 Newton-Schulz, its window at each step 0..TRAIN_STEPS)."""
    from jaxgpt import config as cfg
    from jaxgpt import schedules

    preset = cfg.get_preset(name)
    windows = tuple(schedules.window_value(step, TRAIN_STEPS, preset.train.window_max_tokens, preset.train.lineage.window_schedule)
                    for step in range(TRAIN_STEPS + 1))
    return cfg.replace(preset.optim, ns_dtype="fp32"), windows


@functools.cache
def record_run(name: str, devices: int, ns_dtype: str = "float32") -> rc.Trajectory:
    """The record's own code: TRAIN_STEPS steps on `devices` (1 or 2) devices, its Newton-Schulz in
    `ns_dtype`; params by project name."""
    loaded, state = rc.load(name, EOT), initial_state(name)
    with torch_threads(1):
        run = rc.train(loaded, dims(name), state, train_batches(name), cooldown_steps=cooldown_steps(name),
                       devices=devices, ns_dtype=ns_dtype)
        names = rc.project_names(rc.build_model(loaded, dims(name)))
    return rc.Trajectory(run.losses, {project: run.params[record] for project, record in names.items()}, run.windows)


@functools.cache
def torch_ref_run(name: str) -> rc.Trajectory:
    """torch_ref's optimizers and schedules (torch_ref.optim) from the same state and batches."""
    import torch

    from torch_ref import optim as torch_optim
    from torch_ref.train import forward_backward

    optim, windows = _preset_schedules(name)
    gpt = torch_ref_model(name, initial_state(name))
    optimizers = torch_optim.build_optimizers(gpt, optim)
    schedulers = torch_optim.build_lr_schedulers(optimizers, TRAIN_STEPS, optim)
    batches, losses = train_batches(name), []
    with torch_threads(1):
        for step, (inputs, targets) in enumerate(batches):
            flat = torch.from_numpy(inputs.reshape(-1)), torch.from_numpy(targets.reshape(-1)).long()
            losses.append(float(forward_backward(gpt, *flat, SEQ_LEN, windows[step])))
            torch_optim.optimizer_step(gpt, optimizers, schedulers, step, optim)
        with torch.no_grad():
            final = [float(gpt(torch.from_numpy(x), torch.from_numpy(y).long(), windows[-1])) for x, y in zip(*batches[0], strict=True)]
    params = {key: p.detach().float().numpy().copy() for key, p in gpt.named_parameters()}
    return rc.Trajectory(np.array([*losses, np.mean(final)]), params, windows)


@functools.cache
def jaxgpt_run(name: str) -> rc.Trajectory:
    """jaxgpt's optimizer (jaxgpt.optim.record_optimizer) from the same state and batches; each
    step's gradient the mean of its sequences' (one compiled loss-and-gradient function)."""
    import jax
    import jax.numpy as jnp
    import optax

    from jaxgpt import optim as jax_optim

    optim, windows = _preset_schedules(name)
    params, run = jax_params(name, initial_state(name)), jax_loss_logits_grads(name)
    optimizer = jax_optim.record_optimizer(optim, TRAIN_STEPS, bf16_embeddings=False, bf16_scalars=False)
    opt_state = optimizer.init(params)

    @jax.jit
    def update(params, opt_state, grads):
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def mean_loss_and_grads(inputs, targets, window):
        outs = [run(params, jnp.asarray(x)[None], jnp.asarray(y)[None], jnp.int32(window)) for x, y in zip(inputs, targets, strict=True)]
        grads = jax.tree.map(lambda *g: sum(g) / len(outs), *[out[2] for out in outs])
        return float(np.mean([float(out[0]) for out in outs])), grads

    batches, losses = train_batches(name), []
    for step, (inputs, targets) in enumerate(batches):
        loss, grads = mean_loss_and_grads(inputs, targets, windows[step])
        losses.append(loss)
        params, opt_state = update(params, opt_state, grads)
    losses.append(mean_loss_and_grads(*batches[0], windows[-1])[0])
    return rc.Trajectory(np.array(losses), {key: np.asarray(value, np.float32) for key, value in params.items()}, windows)


# ---------------------------------------------------------------------------------------------
# The rows


def _loss_rel(run: rc.Trajectory, ref: rc.Trajectory) -> float:
    return float((np.abs(np.asarray(run.losses) - ref.losses) / np.abs(ref.losses)).max())


MUON, TABLES = "Muon matrices", "Adam tables"  # blocks.* matrices; the embeddings and the head


def _kind(key: str) -> str:
    return MUON if key.startswith("blocks.") else TABLES


def _matrix_rel(run: rc.Trajectory, ref: rc.Trajectory) -> dict[str, tuple[float, str]]:
    """Per kind (MUON, TABLES): the worst relative Frobenius difference of a final matrix
    (ndim >= 2), with its name."""
    from jaxgpt_tools.parity.measures import rel_norm

    worst: dict[str, tuple[float, str]] = {MUON: (0.0, ""), TABLES: (0.0, "")}
    for key, value in ref.params.items():
        if value.ndim >= 2:
            worst[_kind(key)] = max(worst[_kind(key)], (rel_norm(run.params[key], value), key))
    return worst


@dataclass(frozen=True)
class Floors:
    """The record's own trajectory against itself: on 1 vs 2 devices (losses, and matrices per
    kind) and with its Newton-Schulz in float64 (matrices per kind). `loss` and `matrices(kind)`
    are the bounds' units, each at least fp32's resolution."""

    devices_loss: float
    devices_matrices: dict[str, float]
    ns64_matrices: dict[str, float]

    @property
    def loss(self) -> float:
        return max(self.devices_loss, MIN_LOSS_FLOOR)

    def matrices(self, kind: str) -> float:
        return max(self.devices_matrices[kind], self.ns64_matrices[kind], MIN_MATRIX_FLOOR)


def floors(name: str) -> Floors:
    one, two, ns64 = record_run(name, 1), record_run(name, 2), record_run(name, 1, "float64")
    return Floors(_loss_rel(two, one), {k: v[0] for k, v in _matrix_rel(two, one).items()},
                  {k: v[0] for k, v in _matrix_rel(ns64, one).items()})


@dataclass(frozen=True)
class TrainingGaps:
    """One framework's short run against the record's 1-device run, in units of its floors."""

    loss: float  # worst relative difference of a step's loss
    matrices: dict[str, tuple[float, str]]  # per kind: worst final matrix, relative, and its name
    windows_equal: bool

    def ratios(self, floor: Floors) -> dict[str, float]:
        return {"losses": self.loss / floor.loss, **{k: v[0] / floor.matrices(k) for k, v in self.matrices.items()}}


def training_gaps(name: str) -> dict[str, TrainingGaps]:
    """{framework: its TrainingGaps} against the record's 1-device run (a framework's window 0
    stands for #8/#9's None: no window)."""
    one = record_run(name, 1)
    runs = {"jaxgpt": jaxgpt_run(name), "torch_ref": torch_ref_run(name)}
    return {framework: TrainingGaps(_loss_rel(run, one), _matrix_rel(run, one),
                                    tuple(w or None for w in run.windows) == one.windows) for framework, run in runs.items()}


def schedule_gaps(name: str) -> tuple[int, float, float, int]:
    """The record's own schedules over its whole run (record_code.schedule) against the preset's
    (jaxgpt.schedules): (steps, worst |LR multiplier difference|, worst |momentum difference|, steps
    whose window differs)."""
    from jaxgpt import config as cfg
    from jaxgpt import schedules

    loaded, preset = rc.load(name, EOT), cfg.get_preset(name)
    values = rc.schedule(loaded, rc.Dims(1000, LAYERS[name], 1, 64))
    steps, optim, train = len(values), preset.optim, preset.train
    lr = max(abs(v[0] - schedules.lr_multiplier(s, steps, optim.cooldown_frac, optim.final_lr_frac,
                                                 optim.lineage.cooldown_whole_steps)) for s, v in enumerate(values))
    momentum = max(abs(v[1] - schedules.muon_momentum(s, optim.muon_momentum_start, optim.muon_momentum_end,
                                                      optim.muon_momentum_warmup_steps)) for s, v in enumerate(values))
    windows = sum((v[2] or 0) != schedules.window_value(s, steps, train.window_max_tokens, train.lineage.window_schedule)
                  for s, v in enumerate(values))
    return steps, lr, momentum, windows


def _label(name: str) -> str:
    return f"#{rc.RECORD_LOGS[name].number} {name}"


def check_record_forward(name: str):
    """parity.measures.Result: both frameworks' fp32 logits, loss and gradients against record
    `name`'s own code at WINDOWS[name]. FileNotFoundError when its log is absent."""
    from jaxgpt_tools.parity.measures import Result

    found = forward_gaps(name)
    jax_gaps, torch_gaps = found["jaxgpt"], found["torch_ref"]
    windows = ", ".join("none" if w is None else str(w) for w in WINDOWS[name])
    unit = {"unet-value-embeds": " tokens", "softcap": " blocks", "record": " blocks (W_long)"}.get(name, "")
    return Result(
        f"Record's code {_label(name)}: fp32 logits, loss, gradients at windows {windows}{unit} "
        f"({LAYERS[name]} layers, D 64, T {SEQ_LEN})",
        max(jax_gaps.logits_abs, torch_gaps.logits_abs),
        max(g.logits_rel for g in (jax_gaps, torch_gaps)),
        f"each framework against the record's code: logits < {LOGITS_REL:g} of max|logit|, loss rel < {LOSS_REL:g}, "
        f"gradients < {MATRIX_REL:g} (matrices) / {SCALAR_REL:g} (scalars) of max|grad|, exact zeros zero in both",
        "fp32 on both sides: summation order and libm ulps only (the lineage rows' bounds); the record's "
        "explicit bf16 roundings (NUMERICS.md) are in all three",
        jax_gaps.passed and torch_gaps.passed,
        f"jaxgpt vs torch_ref in the record's-code column; changes to the script: {len(rc.load(name, EOT).applied)} "
        "(record_code.changes)",
        record_code=f"jaxgpt: {jax_gaps.describe()}; torch_ref: {torch_gaps.describe()}",
    )


def check_record_training(name: str):
    """parity.measures.Result: TRAIN_STEPS steps of both frameworks against record `name`'s own
    optimizers and schedules, each measure bounded by FACTORS x the record's own noise floor; and
    the record's own schedules over its whole run equal to the preset's."""
    from jaxgpt_tools.parity.measures import Result

    floor, one = floors(name), record_run(name, 1)
    found = training_gaps(name)
    steps, lr_gap, momentum_gap, window_misses = schedule_gaps(name)
    ratios = {framework: gaps.ratios(floor) for framework, gaps in found.items()}
    learned = bool(one.losses[-1] < one.losses[0] - 0.3)
    passed = (learned and lr_gap == 0 and momentum_gap == 0 and window_misses == 0
              and all(g.windows_equal for g in found.values())
              and all(r[key] <= FACTORS[key] for r in ratios.values() for key in FACTORS))
    described = "; ".join(
        f"{fw}: " + ", ".join(f"{key} {ratio:.1f}x" for key, ratio in ratios[fw].items())
        + f" (worst {found[fw].matrices[TABLES][1]}, {found[fw].matrices[MUON][1]})" for fw in found)
    return Result(
        f"Record's code {_label(name)}: training, {TRAIN_STEPS} steps of its own Muon, Adam and schedules "
        f"(fp32 Newton-Schulz, {TRAIN_SEQUENCES} sequences a step); its schedules over all {steps} steps",
        max(float(np.abs(r.losses - one.losses).max()) for r in (jaxgpt_run(name), torch_ref_run(name))),
        max(g.loss for g in found.values()),
        "each framework against the record's 1-device run, in units of the record's own floor: "
        + ", ".join(f"{key} <= {factor:g}x" for key, factor in FACTORS.items())
        + f"; windows equal; over the record's {steps} steps its own LR multiplier, Muon momentum and window equal "
        "the preset's exactly",
        "one perturbed init (signal in every gradient). Floors: the record's code on 1 vs 2 devices (each device's "
        "mean gradient over its 2 sequences, averaged as DDP; the sequences overlap so that every gradient sums over "
        "both devices) and with float64 Newton-Schulz, the larger, at least fp32's resolution. " + TABLES_REASON,
        passed,
        f"floors: losses {floor.loss:.2e}; " + ", ".join(f"{k} {floor.matrices(k):.2e} (1 vs 2 devices "
                                                         f"{floor.devices_matrices[k]:.2e}, float64 NS {floor.ns64_matrices[k]:.2e})"
                                                         for k in (MUON, TABLES))
        + f"; the record's loss {one.losses[0]:.3f} -> {one.losses[-1]:.3f}; schedules over {steps} steps: LR "
        f"{lr_gap:g}, momentum {momentum_gap:g}, windows differing {window_misses}",
        extra={"record": one.losses, "jax": jaxgpt_run(name).losses, "torch": torch_ref_run(name).losses},
        record_code=described,
    )


# ---------------------------------------------------------------------------------------------
# The record's-code column of the other rows (parity_checks): filled where the row's own setting
# runs in the record's code, else why not


NOT_FILLED = {
    "ns_one_iteration": "not filled: one iteration from a given bf16 iterate has no counterpart in the record's code "
                        "(its function always starts from G); the 5-step rows carry the column",
    "record_shape": "not filled: the record's code at these shapes would hold another 1.1 GB model and its gradients; "
                    "the #20 rows \"Record's code #20 record\" compare its code at the miniature",
    "trajectory": "not filled: the row runs the two trainers on their own data streams (the records' loaders need "
                  "their shards and process groups) and a 4-layer miniature that #18's and #20's code cannot build; the "
                  "\"Record's code ... training\" rows run each record's own optimizers and schedules",
}


def ns_column(steps: int, fp32: bool, seed: int, outputs: dict[str, dict[str, np.ndarray]]) -> tuple[str, bool]:
    """(text, within the row's bound) of both frameworks' `steps`-step Newton-Schulz `outputs`
    ({framework: {NS_SHAPES name: result}}, each from the fp32 standard normal matrix of `seed`)
    against #20's own zeropower_via_newtonschulz5 (eager, bf16 as written or fp32) on the same
    matrices; the bound is the row's own (relative Frobenius 2e-2 in bf16, 1e-5 in fp32)."""
    import torch

    from jaxgpt_tools.parity.measures import NS_SHAPES, rel_norm

    loaded = rc.load("record", EOT)
    worst = dict.fromkeys(outputs, 0.0)
    with rc._ns_dtype(loaded, "float32" if fp32 else "bfloat16"), torch_threads(1):
        for name, shape in NS_SHAPES.items():
            g = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
            own = loaded.module.zeropower_via_newtonschulz5(torch.from_numpy(g), steps).float().numpy()
            for framework, results in outputs.items():
                worst[framework] = max(worst[framework], rel_norm(results[name], own))
    bound = 1e-5 if fp32 else 2e-2
    text = "against #20's own function: " + ", ".join(f"{fw} {rel:.2e}" for fw, rel in worst.items())
    return text, max(worst.values()) <= bound


def lineage_column(name: str, state: dict, inputs: np.ndarray, targets: np.ndarray, window: int | None,
                   outputs: dict[str, tuple[float, np.ndarray, dict]]) -> tuple[str, bool]:
    """(text, within the row's fp32 bounds) of the frameworks' fp32 `outputs` ({framework: (loss,
    logits, grads by project name)}) against record `name`'s own code on the same weights (`state`:
    torch_ref's state dict), one (T,) sequence, at `window` (the record's form: None for #8/#9)."""
    from jaxgpt_tools.parity.measures import lineage_model_config

    config = lineage_model_config(name, "fp32")
    loaded = rc.load(name, config.eot_id)
    model = rc.build_model(loaded, rc.Dims(config.vocab_size, config.num_layers, config.num_heads, config.model_dim))
    names = rc.project_names(model)
    rc.load_state(model, {record: state[project] for project, record in names.items()})
    with torch_threads(1):
        reference = rc.forward(loaded, model, *record_batch(name, inputs[None], targets[None]), window)
    found = {framework: gaps(reference, names, *out) for framework, out in outputs.items()}
    text = f"against #{rc.RECORD_LOGS[name].number}'s own code: " + "; ".join(
        f"{framework}: {g.describe()}" for framework, g in found.items())
    return text, all(g.passed for g in found.values())


def column(fill: Callable[[], tuple[str, bool]]) -> tuple[str, bool]:
    """`fill()`, or ("not run: <why>", True) when a record's log is absent (the row then stands on
    its two-framework comparison alone)."""
    try:
        return fill()
    except FileNotFoundError as missing:
        return f"not run: {missing}", True
