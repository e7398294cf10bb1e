"""Training of the Sub3Min GPT on a data-parallel device mesh: `python -m jaxgpt.train`.

One jit-compiled step runs under `jax.shard_map` over a 1-D mesh with axis "data": each device
(the record's rank) computes the loss and gradients of its own sequences, the gradients are
averaged with `lax.pmean`, and the record's optimizer (distributed Muon + Adam groups) updates
parameters and optimizer state, which are replicated on every device and donated to the step.
The window (W_long) enters the step as an int32 value and the LR / momentum schedules are
count-based inside the optimizer, so the step compiles once for the whole run.

The command line is jaxgpt.cli, the log lines and timing jaxgpt.runlog, checkpoint files
jaxgpt.checkpoint. Docs: docs/TRAINING.md.
"""

from __future__ import annotations

import functools
import os
import shlex
import signal
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgpt import checkpoint, convert, data, optim, runlog
from jaxgpt import config as cfg
from jaxgpt import model as model_lib
from jaxgpt.kernels.flash_attention import default_interpret
from jaxgpt.cli import RunOptions, parse_args
from jaxgpt.data import DataPosition

AXIS = "data"  # the mesh axis: data parallel, device index = the record's rank

# ---------------------------------------------------------------------------------------------
# Devices, and checks that fail before anything is compiled


def maybe_initialize_distributed(options: RunOptions) -> None:
    """Join a multi-host run when flags or the environment ask for it (several processes,
    one per host; process p reads only its own sequences of every batch)."""
    from_env = os.environ.get("JAX_COORDINATOR_ADDRESS") or os.environ.get("JAXGPT_DISTRIBUTED") == "1"
    if options.coordinator is None and options.num_processes is None and not from_env:
        return
    kwargs = {"coordinator_address": options.coordinator, "num_processes": options.num_processes,
              "process_id": options.process_id}
    jax.distributed.initialize(**{name: value for name, value in kwargs.items() if value is not None})


def select_devices(requested: int | None) -> list:
    """The first `requested` devices (all when None); several hosts must use all of them."""
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
    if train.sequences_per_step % num_devices:
        raise ValueError(
            f"global batch of {train.batch_tokens} tokens = {train.sequences_per_step} sequences of {train.seq_len} "
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
    # Every shard the run can reach: headers, lengths, one batch each, token ids < vocab.
    train_files = data.list_shards(train.train_files)  # refuses a folder whose build never finished
    val_or_none = data.list_shards(train.val_files) if train.val_tokens else []
    for folder in data.check_shard_folders(train_files + val_or_none) if jax.process_index() == 0 else ():
        print(f"note: {folder} has no {data.COMPLETE_MARKER} marker (shards not written by make_shards); "
              "using them as they are", file=sys.stderr)
    reachable = train_files if train.cycle_data else train_files[start.shard_index:]
    data.check_shards(reachable, train.batch_tokens, preset.model.vocab_size)
    if train.val_tokens:
        val_files = data.list_shards(train.val_files)
        data.check_shards(val_files, train.batch_tokens, preset.model.vocab_size)
        if data.batches_available(val_files, train.batch_tokens) < train.val_tokens // train.batch_tokens:
            raise ValueError(
                f"validation needs {train.val_tokens} tokens (+1) from {train.val_files!r}, which holds fewer "
                f"whole batches of {train.batch_tokens}; lower --val-tokens"
            )
    if not train.cycle_data:
        needed = train.steps - start_step
        available = data.batches_available(train_files, train.batch_tokens, start)
        if available < needed:
            raise ValueError(
                f"training data exhausted: steps {start_step}..{train.steps - 1} need {needed} batches of {train.batch_tokens} "
                f"tokens, but the {len(train_files)} shard(s) matching {train.train_files!r} hold {available}; "
                "add shards, lower --steps, or pass --cycle-data"
            )


def check_writable(directory: Path, what: str) -> None:
    """Create `directory` if needed and prove a file can be written there; ValueError otherwise
    (checked before the first step, so no trained state is lost to a bad path at the end)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-test-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise ValueError(f"{what} {directory} is not writable: {error.strerror or error}") from None


def check_outputs(preset: cfg.Preset, options: RunOptions) -> None:
    """Every place the run writes to (--out-dir with its logs and checkpoints, --resume,
    --export-torch's folder) is writable; --export-torch does not name a folder."""
    check_writable(Path(preset.train.out_dir), "--out-dir")
    if options.resume is not None and Path(options.resume).is_dir():
        check_writable(Path(options.resume), "--resume directory")
    if options.export_torch is not None:
        target = Path(options.export_torch)
        if target.is_dir():
            raise ValueError(f"--export-torch {target} is a directory; give a file path such as {target / 'model.pt'}")
        check_writable(target.parent, "--export-torch folder")


def keep_saved_cadence(preset: cfg.Preset, saved_meta: dict[str, Any], overridden: Sequence[str]) -> cfg.Preset:
    """A resumed run keeps the saved run's checkpoint_every and keep_checkpoints unless the
    command line sets them again."""
    saved_train = saved_meta["config"]["train"]
    kept = {name: saved_train[name] for name in ("checkpoint_every", "keep_checkpoints")
            if f"train.{name}" not in overridden and name in saved_train}
    return cfg.Preset(model=preset.model, optim=preset.optim, train=cfg.replace(preset.train, **kept))


# ---------------------------------------------------------------------------------------------
# The model's parameters as a flat {record name: array} dict, and the compiled steps


def device_model_config(preset: cfg.Preset, num_devices: int) -> cfg.ModelConfig:
    """The model config the compiled step uses: the FP8 gradient scale sized for the tokens of
    one device's loss mean (cfg.fp8_grad_scale_for). The run's config keeps the record's 2^29."""
    local_tokens = preset.train.batch_tokens // num_devices
    return cfg.replace(preset.model, fp8_grad_scale=cfg.fp8_grad_scale_for(local_tokens, preset.model.fp8_grad_scale))


def init_preset(preset: cfg.Preset, options: RunOptions) -> tuple[cfg.Preset, dict[str, Any] | None]:
    """(preset with the model dims of the --init-from checkpoint, its state dict), read once;
    (preset, None) without --init-from. The start-up checks (vocabulary) use this model config."""
    if options.init_from is None:
        return preset, None
    state_dict = convert.load_checkpoint_state(options.init_from, flag="--init-from")
    model = convert.model_config_from_state_dict(state_dict, preset.model, head_dim=options.head_dim)
    return cfg.Preset(model=model, optim=preset.optim, train=preset.train), state_dict


def build_model(preset: cfg.Preset, options: RunOptions, *, num_devices: int = 1,
                state_dict: dict[str, Any] | None = None) -> tuple[cfg.Preset, model_lib.ModelGraph, dict[str, np.ndarray]]:
    """The model graph and its initial parameters {record name: host array}.

    With --init-from the model dims come from the checkpoint's shapes and the values are
    exactly the checkpoint's (cast to the policy's dtypes); otherwise a fresh init from --seed.
    `state_dict`: the --init-from checkpoint already read by `init_preset`.
    Returns (preset with the model config actually used, graph, params)."""
    if options.init_from is None:
        model = model_lib.GPT(device_model_config(preset, num_devices), rngs=nnx.Rngs(preset.train.seed))
        graph, params = model_lib.ModelGraph.split(model)
        return preset, graph, {name: np.asarray(value) for name, value in params.items()}
    if state_dict is None:
        preset, state_dict = init_preset(preset, options)
    else:  # the same dims again (idempotent), without reading the file twice
        preset = cfg.Preset(model=convert.model_config_from_state_dict(state_dict, preset.model, head_dim=options.head_dim),
                            optim=preset.optim, train=preset.train)
    loaded = convert.torch_state_dict_to_params(state_dict, preset.model)
    model = nnx.eval_shape(lambda: model_lib.GPT(device_model_config(preset, num_devices), rngs=nnx.Rngs(0)))
    graph, abstract = model_lib.ModelGraph.split(model)
    return preset, graph, {name: np.asarray(value).astype(abstract[name].dtype) for name, value in loaded.items()}


@dataclass(frozen=True)
class CompiledSteps:
    """The jitted steps over the mesh. train: (params, opt_state, inputs, targets, window) ->
    (params, opt_state, loss); evaluate: (params, inputs, targets, window) -> loss. inputs and
    targets are (S, T) int32 sharded over sequences; window is an int32 scalar (W_long)."""

    train: Any
    evaluate: Any
    replicated: NamedSharding  # params, optimizer state and scalars
    batch: NamedSharding  # (S, T) batches: sequences split over "data"


def compile_steps(mesh: Mesh, graph: model_lib.ModelGraph, optimizer: optax.GradientTransformation, *,
                  check_vma: bool = True) -> CompiledSteps:
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
        local_train_step, mesh=mesh, in_specs=(rep, rep, batch_spec, batch_spec, rep), out_specs=(rep, rep, rep),
        check_vma=check_vma,
    )
    eval_step = jax.shard_map(local_eval_step, mesh=mesh, in_specs=(rep, batch_spec, batch_spec, rep), out_specs=rep,
                              check_vma=check_vma)
    return CompiledSteps(
        # The old params and optimizer state are dead after the step: donate their buffers.
        train=jax.jit(train_step, donate_argnums=(0, 1)),
        evaluate=jax.jit(eval_step),
        replicated=NamedSharding(mesh, rep),
        batch=NamedSharding(mesh, batch_spec),
    )


def make_optimizer(preset: cfg.Preset) -> optax.GradientTransformation:
    """The record's optimizer for a mesh step; bf16 embedding moments follow the dtype policy
    unless OptimConfig.bf16_embeddings says otherwise."""
    bf16_embeddings = preset.optim.bf16_embeddings
    if bf16_embeddings is None:
        bf16_embeddings = preset.model.dtype_policy == "record"
    # --steps 0 takes no step; its schedules (never applied) are those of a 1-step run.
    return optim.record_optimizer(preset.optim, max(preset.train.steps, 1), axis_name=AXIS, bf16_embeddings=bf16_embeddings)


def replicate(tree: Any, sharding: NamedSharding) -> Any:
    """Host arrays -> global arrays replicated over the mesh (works on several hosts too)."""

    def place(value: Any) -> jax.Array:
        value = np.asarray(value)
        return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])

    return jax.tree.map(place, tree)


def evaluate(preset: cfg.Preset, compiled: CompiledSteps, params: Any, window: Any) -> float:
    """Mean val loss over the first val_tokens tokens of the val shards, sliced as the record
    (val_tokens / batch_tokens global batches; device d takes its own sequences of each)."""
    train = preset.train
    batches = data.val_batches(train.val_files, train.val_tokens, train.batch_tokens, train.seq_len,
                               process_index=jax.process_index(), process_count=jax.process_count())
    losses = [compiled.evaluate(params, *data.to_global_arrays(batch, compiled.batch), window) for batch in batches]
    return float(sum(losses)) / len(losses)



# ---------------------------------------------------------------------------------------------
# Interruptions: SIGINT / SIGTERM stop the run between steps, never inside a save


class Interrupted(Exception):
    """The run stopped on a signal; `exit_code` is 128 + the signal number (130 for SIGINT)."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


class StopRequest:
    """While active (a `with` block on the main thread), SIGINT and SIGTERM only record that a
    stop was asked for; the loop checks `signum` between steps, saves and exits cleanly. A
    second SIGINT falls back to Python's KeyboardInterrupt (the save in flight is still waited for)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print(f"\n{signal.Signals(signum).name}: stopping after this step (Ctrl-C again to abandon it)",
              file=sys.stderr, flush=True)

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _interrupted(signum: int, step: int, checkpointer: checkpoint.Checkpointer | None) -> Interrupted:
    where = (f"the state after step {step} is in {_shown_path(checkpointer.directory)} (continue with --resume "
             f"{_shown_path(checkpointer.directory)})" if checkpointer is not None and step in checkpointer.all_steps()
             else "no checkpoint was written (checkpointing is off: --checkpoint-every K or --save-checkpoint)")
    return Interrupted(signum, f"interrupted by {signal.Signals(signum).name} at step {step}; {where}")


# Test hook (tests/test_failures.py): deliver SIGINT to this process right after the save of the
# given step was started, so the signal arrives while the asynchronous write is in flight.
_TEST_INTERRUPT_AFTER_SAVE = "JAXGPT_TEST_INTERRUPT_AFTER_SAVE"

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
    maybe_initialize_distributed(options)
    devices = select_devices(preset.train.devices)
    run_id = options.run_id or str(uuid.uuid4())
    check_outputs(preset, options)
    checkpointer, start_step, position, saved_meta = checkpoint.open_run_checkpoints(
        preset, options.resume, run_id, options.save_checkpoint)
    if saved_meta is not None:
        preset = keep_saved_cadence(preset, saved_meta, options.overridden)
    preset, init_state = init_preset(preset, options)  # the checks below see the trained model's vocabulary
    check_run(preset, len(devices), jax.process_count(), start_step, position)
    if checkpointer is None and preset.train.steps > 0 and jax.process_index() == 0:
        print("note: this run writes no checkpoint (pass --checkpoint-every K or --save-checkpoint to keep its state)",
              file=sys.stderr)
    preset, graph, host_params = build_model(preset, options, num_devices=len(devices), state_dict=init_state)
    if saved_meta is not None:  # refused before anything compiles
        checkpoint.refuse_config_change(saved_meta, checkpoint.config_to_json(preset), checkpointer.directory)
    total_steps, train_cfg = preset.train.steps, preset.train
    optimizer = make_optimizer(preset)
    # Pallas's interpreter (the pallas backend on a CPU) cannot carry shard_map's varying-axes
    # types through its grid loop; the compiled GPU kernels can, and keep the check.
    interpreted = preset.model.attention_backend == "pallas" and default_interpret()
    compiled = compile_steps(Mesh(np.array(devices), (AXIS,)), graph, optimizer, check_vma=not interpreted)
    params = replicate(host_params, compiled.replicated)
    opt_state = jax.jit(optimizer.init, out_shardings=compiled.replicated)(params)
    if saved_meta is not None:
        state, _ = checkpointer.restore({"params": params, "opt_state": opt_state}, config=None, step=saved_meta["step"])
        params, opt_state = state["params"], state["opt_state"]
    loader = data.BatchLoader(train_cfg.train_files, train_cfg.batch_tokens, train_cfg.seq_len, position=position,
                              process_index=jax.process_index(), process_count=jax.process_count(), cycle=train_cfg.cycle_data)
    log = runlog.RunLog(train_cfg.out_dir, run_id, total_steps=total_steps, start_step=start_step,
                        progress=options.progress, enabled=jax.process_index() == 0)
    runlog.write_header(log, preset, options, devices, start_step)
    val_losses, train_losses, clock = {}, {}, runlog.TrainClock()
    interrupt_step = int(os.environ.get(_TEST_INTERRUPT_AFTER_SAVE, -1))
    try:
        with loader, StopRequest() as stop:
            for step in range(start_step, total_steps + 1):
                if stop.signum is not None:  # params hold `step` updates: save them, then stop
                    if checkpointer is not None and step != start_step:
                        checkpointer.save(step, {"params": params, "opt_state": opt_state},
                                          data_position=loader.position.to_dict(), config=checkpoint.config_to_json(preset))
                        checkpointer.close()
                    raise _interrupted(stop.signum, step, checkpointer)
                if step == log.clock_reset_step:
                    clock.reset()
                window = np.int32(optim.window_blocks(step, max(total_steps, 1), train_cfg.window_max_tokens)[0])
                if train_cfg.val_tokens and (step == total_steps or step % train_cfg.val_every == 0):
                    elapsed = clock.pause()
                    val_losses[step] = evaluate(preset, compiled, params, window)
                    log.val(step, val_losses[step], elapsed, int(window))
                    clock.resume()
                if checkpointer is not None and checkpoint.is_due(step, start_step, train_cfg, options.save_checkpoint):
                    clock.pause()
                    checkpointer.save(step, {"params": params, "opt_state": opt_state},
                                      data_position=loader.position.to_dict(), config=checkpoint.config_to_json(preset))
                    clock.resume()
                    if step == interrupt_step:
                        os.kill(os.getpid(), signal.SIGINT)
                if step == total_steps:
                    break
                inputs, targets = data.to_global_arrays(next(loader), compiled.batch)
                params, opt_state, loss = compiled.train(params, opt_state, inputs, targets, window)
                train_losses[step] = float(loss)  # waits for the step, as the record's synchronize
                log.train(step, train_losses[step], clock.elapsed_ms(), int(window))
    except BaseException:
        if checkpointer is not None:  # finish the save in flight: no *-tmp directory is left behind
            checkpointer.close()
        log.close()
        raise
    return finish_run(preset, options, log=log, checkpointer=checkpointer, compiled=compiled, params=params,
                      val_losses=val_losses, train_losses=train_losses)


def finish_run(preset: cfg.Preset, options: RunOptions, *, log: runlog.RunLog, checkpointer: checkpoint.Checkpointer | None,
               compiled: CompiledSteps, params: Any, val_losses: dict[int, float], train_losses: dict[int, float]) -> RunResult:
    """Wait for the last save, export, and report compilations and peak memory."""
    host_params = {name: np.asarray(value) for name, value in params.items()}
    compiles = (compiled.train._cache_size(), compiled.evaluate._cache_size())
    log.write(f"compilations: train step {compiles[0]}, eval step {compiles[1]}", console=False)
    stats = jax.local_devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        log.write(f"peak memory allocated: {stats['peak_bytes_in_use'] // 2**20} MiB")
    if checkpointer is not None:
        checkpointer.close()  # waits for the last save
        if preset.train.steps in checkpointer.all_steps():
            log.write(f"saved the final state to {_shown_path(checkpointer.directory)}; sample from it with:\n  "
                      + sample_command(checkpointer.directory))
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


def _shown_path(path: str | Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    path = Path(path).absolute()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def sample_command(checkpoint_dir: str | Path) -> str:
    """The shell command that samples text from a run's checkpoint directory."""
    return shlex.join([_shown_path(sys.executable), "-m", "jaxgpt.sample", "--checkpoint", _shown_path(checkpoint_dir),
                       "--prompt", "def ", "--max-new-tokens", "50"])


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry. Exit codes (the same in torch_ref.train): 2 for a usage error (a bad flag or
    an invalid config value, one `error: ...` line), 1 for a runtime error (missing, bad or
    exhausted data, a mismatched or damaged checkpoint, an unwritable path: one line, the
    traceback only with --debug), 128 + the signal for SIGINT (130) / SIGTERM (143)."""
    try:
        preset, options = parse_args(argv)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        train(preset, options)
    except Interrupted as interrupted:
        print(interrupted, file=sys.stderr)
        return interrupted.exit_code
    except (ValueError, OSError, data.ShardsExhaustedError) as error:
        if options.debug:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
