"""The records'-code training rows: a few steps of both frameworks against each record's own
optimizers and schedules (jaxgpt_tools.parity.record_optim), bounded in units of the record's own
noise floors, and the record's own schedules over its whole run against the preset's; in the
setting of jaxgpt_tools.parity.record_code_checks."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from jaxgpt_tools.common.machine import torch_threads
from jaxgpt_tools.parity import floors as floors_lib
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity import record_optim
from jaxgpt_tools.parity.record_code_checks import (
    EOT,
    LAYERS,
    SEQ_LEN,
    dims,
    initial_state,
    jax_loss_logits_grads,
    jax_params,
    label,
    torch_ref_model,
)

TRAIN_STEPS = 3
TRAIN_SEQUENCES = 4  # per step: rows (#8/#9) or packed sequences, 2 per device in the 2-device run
OVERLAP_STRIDE = 32  # tokens between the starts of a step's sequences (train_batches)
# The training rows' bound, in units of the upper quantile of the record's own floor (floors.Spread
# of FLOOR_SAMPLES' 7 samples): both frameworks' gaps measured at 0.1x to 1.2x of it over the five
# records (the worst jaxgpt's #15 losses; Adam tables <= 1.1x, Muon matrices <= 1.1x), so 5x leaves
# a machine with other libm or SIMD paths a margin of 4.
FACTORS = {"losses": 5.0, "Muon matrices": 5.0, "Adam tables": 5.0}
FLOOR_REASON = ("Floors: the record's own run against itself under 7 perturbations of rounding size: on 1 vs 2 devices "
                "(each device's mean gradient over its 2 sequences, averaged as DDP; the sequences overlap so that "
                "every gradient sums over both devices), with float64 Newton-Schulz, and from 5 initial states one ulp "
                "apart (floors.ulp_perturbed, seeds 0-4). The last reach every term of every sum, where the runs are "
                "sensitive: an Adam element whose gradient is a near-cancellation below eps (#15's smallest head gradient, "
                "1.8e-9, is 0.2e-9 to 0.5e-9 off in fp32) takes a first step lr x g / (|g| + 1e-8) in proportion to "
                "its rounding error (docs/NUMERICS.md); "
                "reordering one final sum moves such an element 10x less than another evaluation order does")
# A measured floor below fp32's resolution is taken as that resolution (parity_checks' rows).
MIN_LOSS_FLOOR, MIN_MATRIX_FLOOR = 2.4e-7, 1e-6


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
    from jaxgpt import presets

    return round(presets.get_preset(name).optim.cooldown_frac * TRAIN_STEPS)


def _preset_schedules(name: str):
    """(the preset's OptimConfig with fp32 Newton-Schulz, its window at each step 0..TRAIN_STEPS)."""
    from jaxgpt import config as cfg
    from jaxgpt import presets, schedules

    preset = presets.get_preset(name)
    windows = tuple(schedules.window_value(step, TRAIN_STEPS, preset.train.window_max_tokens, preset.train.lineage.window_schedule)
                    for step in range(TRAIN_STEPS + 1))
    return cfg.replace(preset.optim, ns_dtype="fp32"), windows


@functools.cache
def record_run(name: str, devices: int, ns_dtype: str = "float32", ulp_seed: int | None = None) -> record_optim.Trajectory:
    """The record's own code: TRAIN_STEPS steps on `devices` (1 or 2) devices, its Newton-Schulz in
    `ns_dtype`, from the shared initial state or (`ulp_seed`) its floors.ulp_perturbed copy; params
    by project name."""
    loaded, state = rc.load(name, EOT), initial_state(name)
    if ulp_seed is not None:
        state = floors_lib.ulp_perturbed(state, ulp_seed)
    with torch_threads(1):
        run = record_optim.train(loaded, dims(name), state, train_batches(name), cooldown_steps=cooldown_steps(name),
                       devices=devices, ns_dtype=ns_dtype)
        names = rc.project_names(rc.build_model(loaded, dims(name)))
    return record_optim.Trajectory(run.losses, {project: run.params[record] for project, record in names.items()}, run.windows)


@functools.cache
def torch_ref_run(name: str) -> record_optim.Trajectory:
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
    return record_optim.Trajectory(np.array([*losses, np.mean(final)]), params, windows)


@functools.cache
def jaxgpt_run(name: str) -> record_optim.Trajectory:
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
    return record_optim.Trajectory(np.array(losses), {key: np.asarray(value, np.float32) for key, value in params.items()}, windows)


# ---------------------------------------------------------------------------------------------
# The rows


def _loss_rel(run: record_optim.Trajectory, ref: record_optim.Trajectory) -> float:
    return float((np.abs(np.asarray(run.losses) - ref.losses) / np.abs(ref.losses)).max())


MUON, TABLES = "Muon matrices", "Adam tables"  # blocks.* matrices; the embeddings and the head


def _kind(key: str) -> str:
    return MUON if key.startswith("blocks.") else TABLES


def _matrix_rel(run: record_optim.Trajectory, ref: record_optim.Trajectory) -> dict[str, tuple[float, str]]:
    """Per kind (MUON, TABLES): the worst relative Frobenius difference of a final matrix
    (ndim >= 2), with its name."""
    from jaxgpt_tools.parity.measures import rel_norm

    worst: dict[str, tuple[float, str]] = {MUON: (0.0, ""), TABLES: (0.0, "")}
    for key, value in ref.params.items():
        if value.ndim >= 2:
            worst[_kind(key)] = max(worst[_kind(key)], (rel_norm(run.params[key], value), key))
    return worst


# The floor's samples: (name, record_run's arguments after the record's name).
FLOOR_SAMPLES = (("1 vs 2 devices", (2,)), ("float64 NS", (1, "float64")),
                 *((f"ulp seed {seed}", (1, "float32", seed)) for seed in floors_lib.ULP_SEEDS))


@dataclass(frozen=True)
class Floors:
    """The record's own trajectory against itself, once per FLOOR_SAMPLES perturbation: the loss's
    spread, and each kind's (MUON, TABLES) worst final matrix; `loss.upper` and
    `matrices[kind].upper` are the bounds' units, each at least fp32's resolution."""

    loss: floors_lib.Spread
    matrices: dict[str, floors_lib.Spread]


def floors(name: str) -> Floors:
    one = record_run(name, 1)
    runs = [record_run(name, *args) for _, args in FLOOR_SAMPLES]
    worst = [_matrix_rel(run, one) for run in runs]
    return Floors(floors_lib.Spread(tuple(_loss_rel(run, one) for run in runs), MIN_LOSS_FLOOR),
                  {kind: floors_lib.Spread(tuple(w[kind][0] for w in worst), MIN_MATRIX_FLOOR) for kind in (MUON, TABLES)})


@dataclass(frozen=True)
class TrainingGaps:
    """One framework's short run against the record's 1-device run, in units of its floors."""

    loss: float  # worst relative difference of a step's loss
    matrices: dict[str, tuple[float, str]]  # per kind: worst final matrix, relative, and its name
    windows_equal: bool

    def ratios(self, floor: Floors) -> dict[str, float]:
        return {"losses": self.loss / floor.loss.upper, **{k: v[0] / floor.matrices[k].upper for k, v in self.matrices.items()}}


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
    from jaxgpt import presets, schedules

    loaded, preset = rc.load(name, EOT), presets.get_preset(name)
    values = record_optim.schedule(loaded, rc.Dims(1000, LAYERS[name], 1, 64))
    steps, optim, train = len(values), preset.optim, preset.train
    lr = max(abs(v[0] - schedules.lr_multiplier(s, steps, optim.cooldown_frac, optim.final_lr_frac,
                                                 optim.lineage.cooldown_whole_steps)) for s, v in enumerate(values))
    momentum = max(abs(v[1] - schedules.muon_momentum(s, optim.muon_momentum_start, optim.muon_momentum_end,
                                                      optim.muon_momentum_warmup_steps)) for s, v in enumerate(values))
    windows = sum((v[2] or 0) != schedules.window_value(s, steps, train.window_max_tokens, train.lineage.window_schedule)
                  for s, v in enumerate(values))
    return steps, lr, momentum, windows


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
        f"Record's code {label(name)}: training, {TRAIN_STEPS} steps of its own Muon, Adam and schedules "
        f"(fp32 Newton-Schulz, {TRAIN_SEQUENCES} sequences a step); its schedules over all {steps} steps",
        max(float(np.abs(r.losses - one.losses).max()) for r in (jaxgpt_run(name), torch_ref_run(name))),
        max(g.loss for g in found.values()),
        "each framework against the record's 1-device run, in units of the upper quantile of the record's own floor: "
        + ", ".join(f"{key} <= {factor:g}x" for key, factor in FACTORS.items())
        + f"; windows equal; over the record's {steps} steps its own LR multiplier, Muon momentum and window equal "
        "the preset's exactly",
        "one perturbed init (signal in every gradient). " + FLOOR_REASON,
        passed,
        f"floor spreads: losses {floor.loss.describe()}; "
        + "; ".join(f"{k} {floor.matrices[k].describe()}" for k in (MUON, TABLES))
        + f"; the record's loss {one.losses[0]:.3f} -> {one.losses[-1]:.3f}; schedules over {steps} steps: LR "
        f"{lr_gap:g}, momentum {momentum_gap:g}, windows differing {window_misses}",
        extra={"record": one.losses, "jax": jaxgpt_run(name).losses, "torch": torch_ref_run(name).losses},
        record_code=described,
    )
