"""Training of the Sub3Min GPT on a data-parallel device mesh: `python -m jaxgpt.train`.

One jit-compiled step runs under `jax.shard_map` over a 1-D mesh with axis "data": each device
(the record's rank) computes the loss and gradients of its own sequences, the gradients are
averaged with `lax.pmean`, and the record's optimizer (distributed Muon + Adam groups) updates
parameters and optimizer state, which are replicated on every device and donated to the step.
The window (W_long) enters the step as an int32 value and the LR / momentum schedules are
count-based inside the optimizer, so the step compiles once for the whole run.

Sections: command line; run set-up and checks; logging and timing; the compiled steps;
the loop (`train`); `main`. Docs: docs/TRAINING.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import platform
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from jaxgpt import checkpoint, convert, data, optim
from jaxgpt import config as cfg
from jaxgpt import model as model_lib
from jaxgpt.data import DataPosition

AXIS = "data"  # the mesh axis: data parallel, device index = the record's rank
RECORD_DEVICE_TOKENS = 65536  # tokens per rank in the record (its FP8 gradient scale assumes it)

# Flags whose name is not the field's name (the fixed CLI of INTERFACES.md).
_FLAG_ALIASES = {"dtype_policy": "dtype"}
# Per-layer tuples are not settable from the command line; presets and --init-from set them.
_TUPLE_FIELDS = {"value_embed_slots", "long_window_layers", "attention_free_layers"}
_SECTIONS = (("model", cfg.ModelConfig), ("optim", cfg.OptimConfig), ("train", cfg.TrainConfig))


@dataclass(frozen=True)
class RunOptions:
    """What a run does besides its config: where it starts from and what it writes."""

    init_from: str | None = None  # record-format torch checkpoint to start from
    resume: str | None = None  # checkpoint directory to continue from (and keep saving into)
    export_torch: str | None = None  # write the final params as {"model": state_dict} here
    run_id: str | None = None  # None: a fresh uuid4
    progress: bool = True  # tqdm bar when stdout is a terminal
    save_checkpoint: bool = False  # save the final state even when checkpoint_every is 0
    coordinator: str | None = None  # multi-host: jax.distributed coordinator "host:port"
    num_processes: int | None = None
    process_id: int | None = None
    head_dim: int | None = None  # --init-from: heads = model_dim / head_dim (None: the preset's)


def _flag(field_name: str) -> str:
    return "--" + _FLAG_ALIASES.get(field_name, field_name).replace("_", "-")


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _optional(parse):
    def parse_or_none(text: str):
        return None if text.lower() == "none" else parse(text)

    parse_or_none.__name__ = parse.__name__
    return parse_or_none


def _field_parser(default: Any, type_text: str):
    """A parser for one dataclass field from its default value and annotation text."""
    optional = "None" in type_text
    if isinstance(default, bool) or "bool" in type_text:
        base = _parse_bool
    elif isinstance(default, int) or type_text.startswith("int"):
        base = int
    elif isinstance(default, float) or type_text.startswith("float"):
        base = float
    else:
        base = str
    return _optional(base) if optional else base


_FIXED_HELP = {
    "train_files": "glob of training shards (sorted; read in order)",
    "val_files": "glob of validation shards (the first --val-tokens tokens are used)",
    "steps": "training steps N; the LR decay (last 40%%) and window warmup 1728*s/N follow N",
    "seq_len": "tokens per packed sequence T (a multiple of 128)",
    "batch_tokens": "global batch in tokens per step (a multiple of seq_len * devices)",
    "val_every": "validate at step 0, every K steps and after the last step",
    "val_tokens": "validation tokens per evaluation (a multiple of batch_tokens)",
    "dtype_policy": "record: bf16 + FP8 head as the record; fp32: all-fp32 policy for parity",
    "devices": "use the first D devices (default: all)",
    "attention_backend": "attention implementation",
    "seed": "parameter init seed (ignored with --init-from)",
    "out_dir": "where logs/, metrics and checkpoints go",
    "checkpoint_every": "save a checkpoint every K steps and at the end (0: never, see --save-checkpoint)",
    "keep_checkpoints": "keep only the newest K checkpoints",
    "cycle_data": "start again at the first training shard when the shards run out",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jaxgpt.train",
        description="Train the Sub3Min GPT with JAX on a data-parallel device mesh "
        "(the record's optimizers, schedules, validation and log lines).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--preset", choices=sorted(cfg.PRESETS), default="record", help="starting config; flags below override it")
    parser.add_argument("--init-from", metavar="CKPT.pt", help="start from this record-format torch checkpoint {'model': state_dict}; model dims are inferred from it")
    parser.add_argument("--resume", metavar="DIR", help="continue the run whose checkpoints are in DIR (same config required); new checkpoints go there too")
    parser.add_argument("--export-torch", metavar="PATH", help="after training, write the params as a record-format torch checkpoint")
    parser.add_argument("--save-checkpoint", action="store_true", help="save the final state even when --checkpoint-every is 0")
    parser.add_argument("--head-dim", type=int, help="with --init-from: head width used to infer the number of heads (default: the preset's)")
    parser.add_argument("--run-id", help="name of this run's log files (default: a random uuid)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (it is only shown on a terminal anyway)")

    fixed = parser.add_argument_group("run config (override the preset)")
    others = parser.add_argument_group("other config fields (override the preset)")
    for section, klass in _SECTIONS:
        for field in dataclasses.fields(klass):
            if field.name in _TUPLE_FIELDS:
                continue
            default = field.default
            parse = _field_parser(default, str(field.type))
            group = fixed if field.name in _FIXED_HELP else others
            choices = None
            if field.name == "dtype_policy":
                choices = ["record", "fp32"]
            elif field.name == "attention_backend":
                choices = ["dense", "blocked", "pallas"]
            elif field.name == "ns_dtype":
                choices = ["bf16", "fp32"]
            help_text = _FIXED_HELP.get(field.name, f"{klass.__name__}.{field.name}")
            if field.name == "cycle_data":
                group.add_argument(_flag(field.name), dest=f"{section}.{field.name}", action="store_const", const=True, default=None, help=help_text)
                continue
            group.add_argument(
                _flag(field.name),
                dest=f"{section}.{field.name}",
                type=parse,
                choices=choices,
                default=None,
                metavar=None if choices else field.name.split("_")[-1].upper(),
                help=help_text + " (default: from the preset)",
            )

    hosts = parser.add_argument_group("several hosts (jax.distributed)")
    hosts.add_argument("--coordinator", metavar="HOST:PORT", help="coordinator address; also read from JAX_COORDINATOR_ADDRESS")
    hosts.add_argument("--num-processes", type=int, help="number of processes (hosts)")
    hosts.add_argument("--process-id", type=int, help="index of this process")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> tuple[cfg.Preset, RunOptions]:
    """Parse the command line into a validated Preset and the RunOptions.

    Raises ValueError (naming the field) for an invalid combination of values."""
    args = parser_args = build_parser().parse_args(argv)
    preset = cfg.get_preset(args.preset)
    overrides: dict[str, dict[str, Any]] = {"model": {}, "optim": {}, "train": {}}
    for dest, value in vars(parser_args).items():
        if "." in dest and value is not None:
            section, name = dest.split(".", 1)
            overrides[section][name] = value
    preset = cfg.Preset(
        model=cfg.replace(preset.model, **overrides["model"]),
        optim=cfg.replace(preset.optim, **overrides["optim"]),
        train=cfg.replace(preset.train, **overrides["train"]),
    )
    options = RunOptions(
        init_from=args.init_from,
        resume=args.resume,
        export_torch=args.export_torch,
        run_id=args.run_id,
        progress=not args.no_progress,
        save_checkpoint=args.save_checkpoint,
        coordinator=args.coordinator,
        num_processes=args.num_processes,
        process_id=args.process_id,
        head_dim=args.head_dim,
    )
    return preset, options


# ---------------------------------------------------------------------------------------------
# Run set-up: devices, checks that fail before anything is compiled


def maybe_initialize_distributed(options: RunOptions) -> None:
    """Join a multi-host run when flags or the environment ask for it (several processes,
    one per host; process p reads only its own sequences of every batch)."""
    import jax

    from_env = os.environ.get("JAX_COORDINATOR_ADDRESS") or os.environ.get("JAXGPT_DISTRIBUTED") == "1"
    if options.coordinator is None and options.num_processes is None and not from_env:
        return
    kwargs = {}
    if options.coordinator is not None:
        kwargs["coordinator_address"] = options.coordinator
    if options.num_processes is not None:
        kwargs["num_processes"] = options.num_processes
    if options.process_id is not None:
        kwargs["process_id"] = options.process_id
    jax.distributed.initialize(**kwargs)


def select_devices(requested: int | None) -> list:
    """The first `requested` devices (all when None); several hosts must use all of them."""
    import jax

    available = jax.devices()
    if requested is None:
        return available
    if requested < 1 or requested > len(available):
        raise ValueError(f"--devices {requested} asked for, but {len(available)} device(s) are visible")
    if jax.process_count() > 1 and requested != len(available):
        raise ValueError(f"with {jax.process_count()} processes all {len(available)} devices must be used")
    return available[:requested]


def check_run(preset: cfg.Preset, num_devices: int, process_count: int, start_step: int, start: DataPosition) -> None:
    """Reject geometry and data problems with a clear message before anything compiles."""
    train = preset.train
    num_sequences = train.sequences_per_step
    if num_sequences % num_devices:
        raise ValueError(
            f"global batch of {train.batch_tokens} tokens = {num_sequences} sequences of {train.seq_len} "
            f"cannot be split over {num_devices} devices: batch_tokens must be a multiple of "
            f"seq_len * devices = {train.seq_len * num_devices}"
        )
    if num_devices % process_count:
        raise ValueError(f"{num_devices} devices cannot be split evenly over {process_count} processes")
    if train.seq_len > preset.model.rope_max_len:
        raise ValueError(f"seq_len {train.seq_len} exceeds the rotary table length {preset.model.rope_max_len}")
    if train.val_tokens % train.batch_tokens:
        raise ValueError(
            f"val_tokens {train.val_tokens} must be a multiple of batch_tokens {train.batch_tokens} "
            "(each evaluation reads whole global batches, as the record)"
        )
    train_files = data.list_shards(train.train_files)
    if train.val_tokens:
        val_files = data.list_shards(train.val_files)
        if data_batches_available(val_files, train.batch_tokens, DataPosition()) < train.val_tokens // train.batch_tokens:
            raise ValueError(
                f"validation needs {train.val_tokens} tokens (+1) from {train.val_files!r}, which holds fewer "
                f"whole batches of {train.batch_tokens}; lower --val-tokens"
            )
    if not train.cycle_data:
        needed = train.steps - start_step
        available = data_batches_available(train_files, train.batch_tokens, start)
        if available < needed:
            raise ValueError(
                f"training data exhausted: steps {start_step}..{train.steps - 1} need {needed} batches of {train.batch_tokens} "
                f"tokens, but the {len(train_files)} shard(s) matching {train.train_files!r} hold {available}; "
                "add shards, lower --steps, or pass --cycle-data"
            )


def data_batches_available(files: Sequence[Path], batch_tokens: int, start: DataPosition) -> int:
    """Batches the record's generator yields from `files` starting at `start` before it runs
    out (a shard serves batches while pos + batch + 1 < its length; RECORD.md 8.3)."""
    total = 0
    for index in range(start.shard_index, len(files)):
        length = data.read_shard_header(files[index])
        pos = start.pos if index == start.shard_index else 0
        if pos + batch_tokens + 1 < length:
            total += (length - batch_tokens - 2 - pos) // batch_tokens + 1
    return total


def device_model_config(preset: cfg.Preset, num_devices: int) -> cfg.ModelConfig:
    """The model config the compiled step uses. The record's FP8 gradient scale 2^29 is sized
    for a per-device mean over 65,536 tokens; it is scaled with the tokens per device so the
    quantised gradients stay the record's and inside e5m2's range (2^29 with 2,048 tokens per
    device overflows to inf). Same rule as torch_ref.train. The run's config keeps 2^29."""
    local_tokens = preset.train.batch_tokens // num_devices
    scale = preset.model.fp8_grad_scale * local_tokens / RECORD_DEVICE_TOKENS
    return cfg.replace(preset.model, fp8_grad_scale=scale)


def environment_lines(devices: Sequence[Any]) -> list[str]:
    import flax
    import jax
    import jaxlib
    import optax

    return [
        f"Running Python {sys.version}",
        f"Running JAX {jax.__version__} (jaxlib {jaxlib.__version__}), flax {flax.__version__}, optax {optax.__version__}",
        f"Backend {jax.default_backend()}; processes {jax.process_count()} (this is {jax.process_index()}); "
        f"devices used {len(devices)} of {jax.device_count()}: " + ", ".join(str(d) for d in devices),
        f"Host {platform.node()} {platform.platform()}",
    ]


# ---------------------------------------------------------------------------------------------
# Logging and timing


def timed_steps(step: int, warmup_end: int) -> float:
    """Steps the clock has seen at `step`: the record resets the clock at step 10 (warmup_end)
    and counts step - 9 from step 12 on, NaN before (its `<= 11` guard for the val line)."""
    return float("nan") if step <= warmup_end + 1 else float(step - warmup_end + 1)


def val_line(step: int, total: int, loss: float, train_time_ms: float, step_avg_ms: float) -> str:
    return f"step:{step}/{total} val_loss:{loss:.4f} train_time:{train_time_ms:.0f}ms step_avg:{step_avg_ms:.2f}ms"


def train_line(step: int, total: int, train_time_ms: float, step_avg_ms: float, loss: float) -> str:
    """The record's train line, then this port's train loss as an extra trailing field."""
    return f"step:{step}/{total} train_time:{train_time_ms:.0f}ms step_avg:{step_avg_ms:.2f}ms train_loss:{loss:.4f}"


class TrainClock:
    """Wall time of training only: paused around validation, reset once at `warmup_end`."""

    def __init__(self) -> None:
        self.elapsed_ms = 0.0
        self._started = time.perf_counter()

    def reset(self) -> None:
        self.elapsed_ms, self._started = 0.0, time.perf_counter()

    def pause(self) -> float:
        self.elapsed_ms += 1000.0 * (time.perf_counter() - self._started)
        return self.elapsed_ms

    def restart(self) -> None:
        self._started = time.perf_counter()

    def now_ms(self) -> float:
        return self.elapsed_ms + 1000.0 * (time.perf_counter() - self._started)


class RunLog:
    """The record's log lines on stdout and in `<out_dir>/logs/<run_id>.txt`, one JSON object
    per line in `<out_dir>/logs/<run_id>.jsonl`, and a tqdm bar when stdout is a terminal.
    Only process 0 writes (`enabled=False` elsewhere)."""

    def __init__(self, out_dir: str, run_id: str, *, total_steps: int, start_step: int, progress: bool, enabled: bool) -> None:
        self.enabled = enabled
        log_dir = Path(out_dir) / "logs"
        self.text_path = log_dir / f"{run_id}.txt"
        self.metrics_path = log_dir / f"{run_id}.jsonl"
        self._bar = None
        if not enabled:
            return
        log_dir.mkdir(parents=True, exist_ok=True)
        self._text = self.text_path.open("a", encoding="utf-8")
        self._metrics = self.metrics_path.open("a", encoding="utf-8")
        if progress and sys.stdout.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True, leave=False)

    def write(self, line: str, *, console: bool = True) -> None:
        if not self.enabled:
            return
        self._text.write(line + "\n")
        self._text.flush()
        if console:
            if self._bar is not None:
                self._bar.write(line)
            else:
                print(line, flush=True)

    def metrics(self, **record: Any) -> None:
        if self.enabled:
            self._metrics.write(json.dumps(record) + "\n")
            self._metrics.flush()

    def advance(self, loss: float) -> None:
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{loss:.4f}", refresh=False)

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        self._text.close()
        self._metrics.close()


# ---------------------------------------------------------------------------------------------
# Parameters as a flat {record name: array} dict, and the compiled steps


@dataclass(frozen=True)
class ModelGraph:
    """The NNX graph of the model and where each record-named parameter sits in it."""

    graphdef: Any
    paths: dict[str, tuple]  # record name -> NNX state path

    def bind(self, params: dict[str, Any]) -> Any:
        """A GPT module over `params` (usable inside jit: no copies, no checks)."""
        from flax import nnx

        state = nnx.from_flat_state({self.paths[name]: value for name, value in params.items()})
        return nnx.merge(self.graphdef, state)


def build_model(preset: cfg.Preset, options: RunOptions, *, num_devices: int = 1) -> tuple[cfg.Preset, ModelGraph, dict[str, np.ndarray]]:
    """The model graph and its initial parameters {record name: host array}.

    With --init-from the model dims come from the checkpoint's shapes and the values are
    exactly the checkpoint's (cast to the policy's dtypes); otherwise a fresh init from --seed.
    Returns (preset with the model config actually used, graph, params)."""
    from flax import nnx

    if options.init_from is not None:
        preset, loaded = load_init_checkpoint(preset, Path(options.init_from), options.head_dim)
        model = nnx.eval_shape(lambda: model_lib.GPT(device_model_config(preset, num_devices), rngs=nnx.Rngs(0)))
        shapes = {name: value.dtype for name, value in model_lib.param_dict(model).items()}
        params = {name: np.asarray(value).astype(shapes[name]) for name, value in loaded.items()}
    else:
        model = model_lib.GPT(device_model_config(preset, num_devices), rngs=nnx.Rngs(preset.train.seed))
        params = {name: np.asarray(value) for name, value in model_lib.param_dict(model).items()}
    graphdef, state = nnx.split(model)
    paths = {model_lib.path_to_name(path): path for path, _ in nnx.to_flat_state(state)}
    return preset, ModelGraph(graphdef, paths), params


def load_init_checkpoint(preset: cfg.Preset, path: Path, head_dim: int | None) -> tuple[cfg.Preset, dict[str, np.ndarray]]:
    """Read a record-format torch checkpoint {"model": state_dict} (keys possibly `_orig_mod.`).

    When its shapes are not the preset's model, the model dims (vocab, width, depth, heads,
    attention-free layers) are inferred from them by jaxgpt.convert; shapes do not say how D
    splits into heads, so heads = D / head_dim with head_dim from --head-dim, else the preset's
    (128 for record, 64 for tiny). Raises ValueError naming every key that does not fit."""
    import torch

    if not path.is_file():
        raise FileNotFoundError(f"--init-from checkpoint not found: {path}")
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(checkpoint, dict) or "model" not in checkpoint:
        raise ValueError(f"{path} is not a record-format checkpoint (a dict with a 'model' state dict)")
    state_dict = convert.strip_compile_prefix(checkpoint["model"])
    preset_head_dim = preset.model.head_dim
    if head_dim in (None, preset_head_dim):
        try:  # the preset's model already fits: keep all of its fields (also per-layer patterns)
            return preset, convert.torch_state_dict_to_params(state_dict, preset.model)
        except ValueError:
            pass
    inferred = convert.config_from_state_dict(state_dict, head_dim=head_dim or preset_head_dim)
    dims = ("vocab_size", "num_layers", "num_heads", "model_dim", "attention_free_layers")
    model_config = cfg.replace(preset.model, **{name: getattr(inferred, name) for name in dims})
    preset = dataclasses.replace(preset, model=model_config)
    return preset, convert.torch_state_dict_to_params(state_dict, model_config)


@dataclass(frozen=True)
class CompiledSteps:
    """The jitted steps over the mesh. train: (params, opt_state, inputs, targets, window) ->
    (params, opt_state, loss); evaluate: (params, inputs, targets, window) -> loss. inputs and
    targets are (S, T) int32 sharded over sequences; window is an int32 scalar (W_long)."""

    train: Any
    evaluate: Any
    replicated: Any  # NamedSharding for params, optimizer state and scalars
    batch: Any  # NamedSharding of (S, T) batches: sequences split over "data"


def compile_steps(mesh: Any, graph: ModelGraph, optimizer: Any) -> CompiledSteps:
    import jax
    import optax
    from jax import lax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def local_loss(params, inputs, targets, window, *, train: bool):
        return graph.bind(params)(inputs, targets, window, train=train)

    def local_train_step(params, opt_state, inputs, targets, window):
        # Mark the replicated params as per-device values for the backward pass, so that every
        # gradient (custom_vjp FP8 head included) is a local one; pmean then averages them.
        local_params = jax.tree.map(lambda p: lax.pcast(p, AXIS, to="varying"), params)
        loss, grads = jax.value_and_grad(functools.partial(local_loss, train=True))(local_params, inputs, targets, window)
        # Every device holds the same number of tokens, so the mean of the per-device means is
        # the global token mean, as the record's all-reduce AVG.
        loss, grads = lax.pmean((loss, grads), AXIS)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def local_eval_step(params, inputs, targets, window):
        return lax.pmean(local_loss(params, inputs, targets, window, train=False), AXIS)

    batch_spec, rep = P(AXIS), P()
    train_step = jax.shard_map(
        local_train_step, mesh=mesh, in_specs=(rep, rep, batch_spec, batch_spec, rep), out_specs=(rep, rep, rep)
    )
    eval_step = jax.shard_map(local_eval_step, mesh=mesh, in_specs=(rep, batch_spec, batch_spec, rep), out_specs=rep)
    return CompiledSteps(
        # The old params and optimizer state are dead after the step: donate their buffers.
        train=jax.jit(train_step, donate_argnums=(0, 1)),
        evaluate=jax.jit(eval_step),
        replicated=NamedSharding(mesh, rep),
        batch=NamedSharding(mesh, batch_spec),
    )


def make_optimizer(preset: cfg.Preset) -> Any:
    """The record's optimizer for a mesh step; bf16 embedding moments follow the dtype policy
    unless OptimConfig.bf16_embeddings says otherwise."""
    bf16_embeddings = preset.optim.bf16_embeddings
    if bf16_embeddings is None:
        bf16_embeddings = preset.model.dtype_policy == "record"
    return optim.record_optimizer(preset.optim, preset.train.steps, axis_name=AXIS, bf16_embeddings=bf16_embeddings)


def replicate(tree: Any, sharding: Any) -> Any:
    """Host arrays -> global arrays replicated over the mesh (works on several hosts too)."""
    import jax

    def place(value: Any) -> Any:
        value = np.asarray(value)
        return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])

    return jax.tree.map(place, tree)


def validate(preset: cfg.Preset, steps: CompiledSteps, params: Any, window: Any) -> float:
    """Mean val loss over the first val_tokens tokens of the val shards, sliced as the record
    (val_tokens / batch_tokens global batches; device d takes its own sequences of each)."""
    import jax

    train = preset.train
    total = None
    count = 0
    batches = data.val_batches(
        train.val_files, train.val_tokens, train.batch_tokens, train.seq_len,
        process_index=jax.process_index(), process_count=jax.process_count(),
    )
    for batch in batches:
        inputs, targets = data.to_global_arrays(batch, steps.batch)
        loss = steps.evaluate(params, inputs, targets, window)
        total = loss if total is None else total + loss
        count += 1
    return float(total) / count


# ---------------------------------------------------------------------------------------------
# The run


@dataclass
class RunResult:
    """What a finished run hands back to Python callers (tests, notebooks)."""

    val_losses: dict[int, float]  # step -> val loss
    train_losses: dict[int, float]  # step s -> loss of the batch of step s (before update s)
    params: dict[str, np.ndarray]  # final parameters by record name, host copies
    preset: cfg.Preset  # the config actually run (model dims from --init-from included)
    log_path: Path
    metrics_path: Path
    checkpoint_dir: Path | None
    train_step_compiles: int  # distinct compilations of the train step (1 when nothing recompiles)
    eval_step_compiles: int


def train(preset: cfg.Preset, options: RunOptions = RunOptions()) -> RunResult:
    """Run (or resume) training as configured; returns the losses and final parameters."""
    import jax
    from jax.sharding import Mesh

    maybe_initialize_distributed(options)
    devices = select_devices(preset.train.devices)
    mesh = Mesh(np.array(devices), (AXIS,))
    run_id = options.run_id or str(uuid.uuid4())
    checkpointer, start_step, position, saved_meta = open_checkpoints(preset, options, run_id)
    check_run(preset, len(devices), jax.process_count(), start_step, position)
    preset, graph, host_params = build_model(preset, options, num_devices=len(devices))
    if saved_meta is not None:
        refuse_config_change(saved_meta, preset, checkpointer.directory)
    total_steps, train_cfg = preset.train.steps, preset.train
    optimizer = make_optimizer(preset)
    steps = compile_steps(mesh, graph, optimizer)
    params = replicate(host_params, steps.replicated)
    opt_state = jax.jit(optimizer.init, out_shardings=steps.replicated)(params)
    if saved_meta is not None:
        state, _ = checkpointer.restore({"params": params, "opt_state": opt_state}, config=checkpoint.config_to_json(preset))
        params, opt_state = state["params"], state["opt_state"]
    loader = data.BatchLoader(
        train_cfg.train_files, train_cfg.batch_tokens, train_cfg.seq_len, process_index=jax.process_index(),
        process_count=jax.process_count(), cycle=train_cfg.cycle_data, position=position,
    )
    log = RunLog(train_cfg.out_dir, run_id, total_steps=total_steps, start_step=start_step,
                 progress=options.progress, enabled=jax.process_index() == 0)
    write_header(log, preset, options, devices, start_step)
    val_losses, train_losses = {}, {}
    clock, warmup_end = TrainClock(), start_step + 10  # the record times steps 10.. (compile excluded)
    with loader:
        for step in range(start_step, total_steps + 1):
            if step == warmup_end:
                clock.reset()
            window = np.int32(optim.window_blocks(step, total_steps, train_cfg.window_max_tokens)[0])
            if train_cfg.val_tokens and (step == total_steps or step % train_cfg.val_every == 0):
                elapsed = clock.pause()
                val_losses[step] = validate(preset, steps, params, window)
                avg = elapsed / (timed_steps(step, warmup_end) - 1)
                log.write(val_line(step, total_steps, val_losses[step], elapsed, avg))
                log.metrics(kind="val", step=step, val_loss=val_losses[step], train_time_ms=elapsed, step_avg_ms=avg, window_blocks=int(window))
                clock.restart()
            if checkpointer is not None and checkpoint_due(step, start_step, train_cfg, options):
                clock.pause()
                checkpointer.save(step, {"params": params, "opt_state": opt_state},
                                  data_position=loader.position.to_dict(), config=checkpoint.config_to_json(preset))
                clock.restart()
            if step == total_steps:
                break
            inputs, targets = data.to_global_arrays(next(loader), steps.batch)
            params, opt_state, loss = steps.train(params, opt_state, inputs, targets, window)
            train_losses[step] = float(loss)  # waits for the step, as the record's synchronize
            elapsed = clock.now_ms()
            avg = elapsed / timed_steps(step, warmup_end)
            log.write(train_line(step + 1, total_steps, elapsed, avg, train_losses[step]))
            log.metrics(kind="train", step=step + 1, train_loss=train_losses[step], train_time_ms=elapsed, step_avg_ms=avg, window_blocks=int(window))
            log.advance(train_losses[step])
    return finish_run(preset, options, log, checkpointer, steps, params, val_losses, train_losses)


def open_checkpoints(preset: cfg.Preset, options: RunOptions, run_id: str):
    """(checkpointer or None, start step, data position, saved meta or None).

    --resume DIR continues from DIR's newest step and keeps saving there; otherwise checkpoints
    go to <out_dir>/checkpoints/<run_id> when any are asked for."""
    train_cfg = preset.train
    if options.resume is not None:
        directory = Path(options.resume)
        if not directory.is_dir():
            raise FileNotFoundError(f"--resume directory not found: {directory}")
        checkpointer = checkpoint.Checkpointer(directory, max_to_keep=train_cfg.keep_checkpoints)
        meta = checkpointer.read_meta()  # FileNotFoundError when DIR holds no checkpoint
        return checkpointer, int(meta["step"]), DataPosition.from_dict(meta["data_position"]), meta
    if train_cfg.checkpoint_every > 0 or options.save_checkpoint:
        directory = Path(train_cfg.out_dir) / "checkpoints" / run_id
        return checkpoint.Checkpointer(directory, max_to_keep=train_cfg.keep_checkpoints), 0, DataPosition(), None
    return None, 0, DataPosition(), None


def refuse_config_change(saved_meta: dict[str, Any], preset: cfg.Preset, directory: Path) -> None:
    differences = checkpoint.config_differences(saved_meta["config"], checkpoint.config_to_json(preset))
    if differences:
        raise ValueError(
            f"cannot resume from {directory}: it was saved by a run with a different config; "
            "differing fields (saved -> now):\n  " + "\n  ".join(differences)
        )


def checkpoint_due(step: int, start_step: int, train_cfg: cfg.TrainConfig, options: RunOptions) -> bool:
    """Save after every checkpoint_every updates and after the last one (never the state
    the run started from: it is already on disk or is the init)."""
    if step == start_step:
        return False
    if step == train_cfg.steps:
        return train_cfg.checkpoint_every > 0 or options.save_checkpoint
    return train_cfg.checkpoint_every > 0 and step % train_cfg.checkpoint_every == 0


def write_header(log: RunLog, preset: cfg.Preset, options: RunOptions, devices: Sequence[Any], start_step: int) -> None:
    """Config and environment at the top of the text log (the record logs its source instead)."""
    log.write(str(log.text_path))
    log.write("=" * 100, console=False)
    log.write("config: " + json.dumps(checkpoint.config_to_json(preset), sort_keys=True), console=False)
    log.write("options: " + json.dumps(dataclasses.asdict(options), sort_keys=True), console=False)
    if start_step:
        log.write(f"resumed at step {start_step} from {options.resume}", console=False)
    for line in environment_lines(devices):
        log.write(line, console=False)
    log.write("=" * 100, console=False)


def finish_run(preset, options, log, checkpointer, steps, params, val_losses, train_losses) -> RunResult:
    import jax

    host_params = {name: np.asarray(value) for name, value in params.items()}
    compiles = (steps.train._cache_size(), steps.evaluate._cache_size())
    log.write(f"compilations: train step {compiles[0]}, eval step {compiles[1]}", console=False)
    stats = jax.local_devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        log.write(f"peak memory allocated: {stats['peak_bytes_in_use'] // 2**20} MiB")
    if checkpointer is not None:
        checkpointer.close()
    if options.export_torch is not None and jax.process_index() == 0:
        path = checkpoint.export_torch(host_params, options.export_torch)
        log.write(f"exported {path}", console=False)
    log.close()
    return RunResult(
        val_losses=val_losses, train_losses=train_losses, params=host_params, preset=preset,
        log_path=log.text_path, metrics_path=log.metrics_path,
        checkpoint_dir=None if checkpointer is None else checkpointer.directory,
        train_step_compiles=compiles[0], eval_step_compiles=compiles[1],
    )


# ---------------------------------------------------------------------------------------------
# Entry point


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: errors in the input (bad flags, missing or exhausted data, a mismatched
    resume directory) print `error: ...` on stderr and return 1 instead of a traceback."""
    try:
        preset, options = parse_args(argv)
        train(preset, options)
    except (ValueError, FileNotFoundError, data.ShardsExhaustedError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
