"""Training of the Sub3Min GPT on a data-parallel device mesh: `python -m jaxgpt.train`.

One jit-compiled step runs under `jax.shard_map` over a 1-D mesh with axis "data": each device
(the record's rank) computes the loss and gradients of its own sequences, the gradients are
averaged with `lax.pmean`, and the record's optimizer (distributed Muon + Adam groups) updates
parameters and optimizer state, which are replicated on every device and donated to the step.
The window (W_long) enters the step as an int32 value and the LR / momentum schedules are
count-based inside the optimizer, so the step compiles once for the whole run. The loop never
waits for the step it has just dispatched (the train loss is read one step late).

The command line is jaxgpt.run.cli, where a run starts and its checks jaxgpt.run.preflight, signals
jaxgpt.run.interrupt, the log files jaxgpt.run.runlog, checkpoint files jaxgpt.run.checkpoint; the
parts torch_ref's trainer shares (the record's log lines and clock, when a save is due) runkit.
Docs: docs/TRAINING.md.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgpt import config as cfg
from jaxgpt import data, lineage, optim, schedules
from jaxgpt import layers as layers_lib
from jaxgpt import model as model_lib
from jaxgpt import params as params_lib
from jaxgpt.kernels.flash_attention import default_interpret
from jaxgpt.muon import Collective
from jaxgpt.run import checkpoint, convert, interrupt, peers, preflight, profiling, quiet, runlog
from jaxgpt.run.cli import RunOptions, parse_args, print_error
from runkit.checkpoint import is_due
from runkit.full_disk import LogWriteError
from runkit.interrupt import Interrupted
from runkit.runlog import NonFiniteError, TrainClock, nonfinite_loss

AXIS = "data"  # the mesh axis: data parallel, device index = the record's rank

# ---------------------------------------------------------------------------------------------
# The model's parameters as a flat {record name: array} dict, and the compiled steps


def device_model_config(preset: cfg.Preset, num_devices: int) -> cfg.ModelConfig:
    """The model config the compiled step uses: the FP8 gradient scale sized for the tokens of
    one device's loss mean (cfg.fp8_grad_scale_for). The run's config keeps the record's 2^29."""
    local_tokens = preset.train.batch_tokens // num_devices
    return cfg.replace(preset.model, fp8_grad_scale=cfg.fp8_grad_scale_for(local_tokens, preset.model.fp8_grad_scale))


def build_model(preset: cfg.Preset, options: RunOptions, *, num_devices: int = 1,
                state_dict: dict[str, Any] | None = None) -> tuple[cfg.Preset, params_lib.ModelGraph, dict[str, np.ndarray]]:
    """The model graph and its initial parameters {record name: host array}.

    With --init-from the model dims come from the checkpoint's shapes and the values are
    exactly the checkpoint's (cast to the policy's dtypes); otherwise a fresh init from --seed.
    `state_dict`: the --init-from checkpoint when already read (convert.init_preset).
    Returns (preset with the model config actually used, graph, params)."""
    if options.init_from is None:
        model = model_lib.GPT(device_model_config(preset, num_devices), rngs=nnx.Rngs(preset.train.seed))
        graph, params = params_lib.ModelGraph.split(model)
        return preset, graph, {name: np.asarray(value) for name, value in params.items()}
    preset, state_dict = convert.init_preset(preset, options.init_from, options.head_dim, state_dict)
    assert state_dict is not None  # init_preset reads the --init-from file it is given
    loaded = convert.torch_state_dict_to_params(state_dict, preset.model)
    model = nnx.eval_shape(lambda: model_lib.GPT(device_model_config(preset, num_devices), rngs=nnx.Rngs(0)))
    graph, abstract = params_lib.ModelGraph.split(model)
    return preset, graph, {name: np.asarray(value).astype(abstract[name].dtype) for name, value in loaded.items()}


@dataclass(frozen=True)
class CompiledSteps:
    """The jitted steps over the mesh. train: (params, opt_state, inputs, targets, window) ->
    (params, opt_state, loss); evaluate: (params, inputs, targets, window) -> loss. inputs and
    targets are (S, T) int32 sharded over sequences; window is an int32 scalar (W_long).
    train_with_stop, the trainer's step: train with one more input, stop_flags (D,) int32 sharded
    over "data" (each process's signal flag, interrupt.StopRequest.flag), and one more output,
    their maximum over every device (an int32 scalar, one extra all-reduce of 4 bytes)."""

    train: Any
    train_with_stop: Any
    evaluate: Any
    replicated: NamedSharding  # params, optimizer state and scalars
    batch: NamedSharding  # (S, T) batches: sequences split over "data"


def compile_steps(mesh: Mesh, graph: params_lib.ModelGraph, optimizer: optax.GradientTransformation, *,
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

    def local_train_step_with_stop(params, opt_state, inputs, targets, window, stop_flags):
        params, opt_state, loss = local_train_step(params, opt_state, inputs, targets, window)
        return params, opt_state, loss, lax.pmax(stop_flags[0], AXIS)

    def local_eval_step(params, inputs, targets, window):
        return lax.pmean(local_loss(params, inputs, targets, window, train=False), AXIS)

    batch_spec, rep = P(AXIS), P()
    train_step = jax.shard_map(
        local_train_step, mesh=mesh, in_specs=(rep, rep, batch_spec, batch_spec, rep), out_specs=(rep, rep, rep),
        check_vma=check_vma,
    )
    train_step_with_stop = jax.shard_map(
        local_train_step_with_stop, mesh=mesh, in_specs=(rep, rep, batch_spec, batch_spec, rep, batch_spec),
        out_specs=(rep, rep, rep, rep), check_vma=check_vma,
    )
    eval_step = jax.shard_map(local_eval_step, mesh=mesh, in_specs=(rep, batch_spec, batch_spec, rep), out_specs=rep,
                              check_vma=check_vma)
    return CompiledSteps(
        # The old params and optimizer state are dead after the step: donate their buffers.
        train=jax.jit(train_step, donate_argnums=(0, 1)),
        train_with_stop=jax.jit(train_step_with_stop, donate_argnums=(0, 1)),
        evaluate=jax.jit(eval_step),
        replicated=NamedSharding(mesh, rep),
        batch=NamedSharding(mesh, batch_spec),
    )


def make_optimizer(preset: cfg.Preset, muon_collective: Collective = "all_gather") -> optax.GradientTransformation:
    """The record's optimizer for a mesh step; bf16 embedding moments follow the dtype policy
    unless OptimConfig.bf16_embeddings says otherwise, bf16 scalar moments go with bf16 scalars
    (#15's "bf16_model"). `muon_collective`: Muon's exchange of Newton-Schulz results
    (optim.record_optimizer), the record's all_gather unless a plan asks."""
    bf16_embeddings = preset.optim.bf16_embeddings
    if bf16_embeddings is None:
        bf16_embeddings = layers_lib.stream_dtype(preset.model) == jnp.bfloat16
    # --steps 0 takes no step; its schedules (never applied) are those of a 1-step run.
    return optim.record_optimizer(preset.optim, max(preset.train.steps, 1), axis_name=AXIS,
                                 bf16_embeddings=bf16_embeddings, muon_collective=muon_collective,
                                 bf16_scalars=layers_lib.scalar_dtype(preset.model) == jnp.bfloat16)


def prepare_steps(preset: cfg.Preset, mesh: Mesh, graph: params_lib.ModelGraph, *, muon_collective: Collective = "all_gather",
                  check_vma: bool = True) -> tuple[optax.GradientTransformation, CompiledSteps]:
    """The record's optimizer for `preset` and the steps compiled over `mesh`: what the trainer,
    the benchmarks and the compile-only GPU plans all run (one sequence, written once)."""
    optimizer = make_optimizer(preset, muon_collective)
    return optimizer, compile_steps(mesh, graph, optimizer, check_vma=check_vma)


def place_state(host_params: dict[str, np.ndarray], optimizer: optax.GradientTransformation,
                compiled: CompiledSteps) -> tuple[Any, Any]:
    """(params, optimizer state) replicated over the steps' mesh, from host parameters."""
    params = replicate(host_params, compiled.replicated)
    return params, jax.jit(optimizer.init, out_shardings=compiled.replicated)(params)


def one_device_steps(preset: cfg.Preset) -> tuple[cfg.Preset, CompiledSteps, Any, Any, dict[str, np.ndarray]]:
    """The trainer's steps on a mesh of device 0 from the preset's fresh init: (preset as built,
    compiled steps, params and optimizer state on the mesh, the initial params {record name:
    host array}). The train step donates params and optimizer state: each call takes the
    previous call's outputs."""
    mesh = Mesh(np.array(jax.devices()[:1]), (AXIS,))
    preset, graph, host_params = build_model(preset, RunOptions(), num_devices=1)
    optimizer, compiled = prepare_steps(preset, mesh, graph)
    return preset, compiled, *place_state(host_params, optimizer, compiled), host_params


def replicate(tree: Any, sharding: NamedSharding) -> Any:
    """Host arrays -> global arrays replicated over the mesh (works on several hosts too)."""

    def place(value: Any) -> jax.Array:
        value = np.asarray(value)
        return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])

    return jax.tree.map(place, tree)


def stop_flags(flag: int, sharding: NamedSharding) -> jax.Array:
    """(D,) int32 sharded over "data": `flag` on each of this process's devices (the train
    step's input that carries every process's signal flag into its all-reduce)."""
    local = np.full(len(sharding.addressable_devices), flag, np.int32)
    return jax.make_array_from_process_local_data(sharding, local, (sharding.mesh.size,))


@jax.jit
def all_finite(tree: Any) -> jax.Array:
    """True when no floating-point leaf of `tree` holds a NaN or an infinity (one bool, read
    once per save: a finite loss does not prove finite gradients, and a NaN state must never
    become the newest checkpoint)."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(tree)
                              if jnp.issubdtype(leaf.dtype, jnp.inexact)]))


def evaluate(preset: cfg.Preset, compiled: CompiledSteps, params: Any, window: Any) -> float:
    """Mean val loss over the first val_tokens tokens of the val shards, sliced as the record
    (val_tokens / batch_tokens global batches; device d takes its own sequences of each)."""
    train = preset.train
    batches = data.val_batches(train.val_files, train.val_tokens, train.batch_tokens, train.seq_len,
                               process_index=jax.process_index(), process_count=jax.process_count())
    losses = [compiled.evaluate(params, *data.to_global_arrays(batch, compiled.batch), window) for batch in batches]
    return float(sum(losses)) / len(losses)


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


def initial_state(start: preflight.RunStart, options: RunOptions) -> tuple[cfg.Preset, CompiledSteps, Any, Any]:
    """(preset with the model actually built, compiled steps, params, optimizer state) on the
    mesh: the init (or --init-from), or the resumed checkpoint's state."""
    preset, graph, host_params = build_model(start.preset, options, num_devices=len(start.devices),
                                             state_dict=start.init_state)
    if start.saved_meta is not None:  # refused before anything compiles
        assert start.checkpointer is not None  # a resumed run saves into its --resume folder
        checkpoint.refuse_config_change(start.saved_meta, cfg.config_to_json(preset), start.checkpointer.directory)
    # Pallas's interpreters (the kernel backends on a CPU) cannot carry shard_map's varying-axes
    # types through their grid loops; the compiled GPU kernels can, and keep the check.
    interpreted = preset.model.attention_backend in ("pallas", "mosaic") and default_interpret()
    optimizer, compiled = prepare_steps(preset, Mesh(np.array(start.devices), (AXIS,)), graph, check_vma=not interpreted)
    params, opt_state = place_state(host_params, optimizer, compiled)
    if start.saved_meta is not None:
        assert start.checkpointer is not None  # a resumed run saves into its --resume folder
        state, _ = start.checkpointer.restore({"params": params, "opt_state": opt_state}, config=None,
                                              step=start.step)
        params, opt_state = state["params"], state["opt_state"]
    return preset, compiled, params, opt_state


def train(preset: cfg.Preset, options: RunOptions | None = None) -> RunResult:
    """Run (or resume) training as configured (`options` None: the defaults); returns the losses
    and final parameters."""
    options = RunOptions() if options is None else options
    start = preflight.start_run(preset, options)
    with start.lock:  # the run's folders are its own until it returns or raises (jaxgpt.run.lock)
        return train_from(start, options)


def train_from(start: preflight.RunStart, options: RunOptions) -> RunResult:
    """The run that `start` opened (preflight.start_run): build, train, save, finish."""
    loop = TrainLoop(start, options)
    try:
        with loop.loader, interrupt.StopRequest() as stop, loop.watch:
            loop.run(stop)
        return finish_run(loop.preset, options, log=loop.log, checkpointer=loop.checkpointer, compiled=loop.compiled,
                          params=loop.params, val_losses=loop.val_losses, train_losses=loop.train_losses)
    except BaseException as error:
        instead = loop.abandon(error)
        if instead is None:
            raise
        raise instead from error


class TrainLoop:
    """One run's loop and the state it carries from step to step (`train_from` drives it): the
    compiled steps, params and optimizer state, the batch stream, the log and clock, the steps
    dispatched but not yet logged (each loss is read one step late, as the record logs it)."""

    def __init__(self, start: preflight.RunStart, options: RunOptions) -> None:
        self.start, self.options = start, options
        self.preset, self.compiled, self.params, self.opt_state = initial_state(start, options)
        train_cfg = self.train_cfg = self.preset.train
        self.total_steps, self.checkpointer = train_cfg.steps, start.checkpointer
        self.directory = None if self.checkpointer is None else self.checkpointer.directory
        self.loader = data.BatchLoader(
            train_cfg.train_files, train_cfg.batch_tokens, train_cfg.seq_len, position=start.position,
            process_index=jax.process_index(), process_count=jax.process_count(), cycle=train_cfg.cycle_data,
            repeat_first=train_cfg.lineage.repeat_first_batch and start.step == 0, shard_switch=train_cfg.lineage.shard_switch,
            data_ranks=train_cfg.lineage.data_ranks)
        self.log = runlog.RunLog(train_cfg.out_dir, start.run_id, total_steps=self.total_steps, start_step=start.step,
                                 progress=options.progress, enabled=jax.process_index() == 0,
                                 tensorboard_dir=options.tensorboard)
        runlog.write_header(self.log, self.preset, options, start.devices, start.step)
        self.val_losses: dict[int, float] = {}
        self.train_losses: dict[int, float] = {}
        self.clock = TrainClock()
        self.trace = profiling.StepTrace(options.profile, profiling.trace_folder(
            train_cfg.out_dir, start.run_id, jax.process_index(), jax.process_count()))
        # (step, loss, agreed stop flag, window) of steps dispatched, not yet logged
        self.in_flight: list[tuple[int, jax.Array, jax.Array, int]] = []
        self.watch = peers.PeerWatch(self.directory, options.peer_timeout_s)
        self.stop: interrupt.StopRequest | None = None
        self.flags: dict[int, Any] = {}  # signal flag -> its device array (the same two arrays every step)

    def run(self, stop: interrupt.StopRequest) -> None:
        """Steps start.step..total_steps: validate and save where due, stop where agreed, train."""
        self.stop, train_cfg, checkpointer = stop, self.train_cfg, self.checkpointer
        for step in range(self.start.step, self.total_steps + 1):
            stop.starting(step)
            every = train_cfg.val_every  # 0: the last step only (the record's val_loss_every 0)
            val_due = train_cfg.val_tokens and (step == self.total_steps or (every > 0 and step % every == 0))
            save_due = checkpointer is not None and is_due(step, self.start.step, train_cfg,
                                                           self.options.save_checkpoint)
            # Every process takes the same branches here (a local signal changes nothing until
            # a step has carried it to all), so they stop and save at the same step.
            if val_due or save_due or step in (self.log.clock_reset_step, self.total_steps):
                self.log_in_flight()  # each reads the clock or the state, so the step in flight finishes first
            if checkpointer is not None:
                checkpointer.poll()  # a failed asynchronous save stops the run at once
            if stop.agreed is not None:  # params hold `step` updates: save them, then stop
                self.stop_at(step, stop.agreed)
            if step == self.log.clock_reset_step:
                self.clock.reset()
            window = np.int32(schedules.window_value(step, max(self.total_steps, 1), train_cfg.window_max_tokens,
                                                     train_cfg.lineage.window_schedule))
            if val_due:
                self.validate(step, window)
            if save_due:
                self.clock.pause()
                self.save(step)
                self.clock.resume()
                stop.saved(step)
            if step == self.total_steps:
                break
            self.train_step(step, window)

    def train_step(self, step: int, window: np.int32) -> None:
        """Dispatch step `step`, then log the one before it while this one is queued behind it."""
        assert self.stop is not None  # run() set it
        if self.trace.starts_before(step):
            self.log_in_flight()  # the trace holds the chosen steps only
            self.trace.start()
        # Copied to the devices and dispatched while the previous step still runs there.
        inputs, targets = data.to_global_arrays(next(self.loader), self.compiled.batch)
        flag = self.stop.flag()
        if flag not in self.flags:
            self.flags[flag] = stop_flags(flag, self.compiled.batch)
        self.params, self.opt_state, loss, agreed = self.compiled.train_with_stop(
            self.params, self.opt_state, inputs, targets, window, self.flags[flag])
        self.log_in_flight()
        self.in_flight.append((step, loss, agreed, int(window)))
        if self.options.sync or self.trace.ends_after(step):
            self.log_in_flight()
        if self.trace.ends_after(step):
            assert self.options.profile is not None  # a trace ends only in --profile's window
            self.log.write(f"profile of steps {self.options.profile[0]}..{self.options.profile[1]}: "
                           f"{runlog.shown_path(self.trace.stop())}")

    def validate(self, step: int, window: np.int32) -> None:
        elapsed = self.clock.pause()
        with self.watch.waiting():
            self.val_losses[step] = evaluate(self.preset, self.compiled, self.params, window)
        self.log.val(step, self.val_losses[step], elapsed, lineage.logged_window(self.preset.model, int(window)))
        if not (self.options.allow_nonfinite_loss or math.isfinite(self.val_losses[step])):
            raise nonfinite_loss("val", step, self.total_steps, self.val_losses[step], self.where_to_resume())
        self.clock.resume()

    def log_in_flight(self) -> None:
        """Log the dispatched steps; float() waits for each: the record's synchronize before its clock."""
        assert self.stop is not None  # run() set it
        while self.in_flight:
            step, loss, agreed, window = self.in_flight.pop(0)
            with self.watch.waiting():  # a lost process ends this one here rather than hang it
                self.train_losses[step], stop_flag = float(loss), int(agreed)
            self.log.train(step, self.train_losses[step], self.clock.elapsed_ms(),
                           lineage.logged_window(self.preset.model, window))
            self.stop.agree(stop_flag)
            if not (self.options.allow_nonfinite_loss or math.isfinite(self.train_losses[step])):
                raise nonfinite_loss("train", step + 1, self.total_steps, self.train_losses[step],
                                     self.where_to_resume())

    def save(self, step: int) -> None:
        """Save the state after `step` updates (the loader is at `step`'s batch); never a non-finite one."""
        state = {"params": self.params, "opt_state": self.opt_state}
        if not (self.options.allow_nonfinite_loss or bool(all_finite(state))):
            raise NonFiniteError(f"the state after step {step} holds NaN or infinite values although every loss "
                                 f"before it was finite; the run stopped without saving it. "
                                 f"{self.where_to_resume()}")
        assert self.checkpointer is not None  # called only when the run saves
        self.checkpointer.save(step, state, data_position=self.loader.position.to_dict(),
                               config=cfg.config_to_json(self.preset))

    def stop_at(self, step: int, signal_number: int) -> NoReturn:
        """The agreed stop: save the state after `step` updates (unless nothing was trained), raise."""
        checkpointer = self.checkpointer
        if checkpointer is not None and step != self.start.step:
            self.save(step)
            checkpointer.close()
        on_disk = self.directory if checkpointer is not None and step in checkpointer.all_steps() else None
        raise interrupt.interrupted(signal_number, step, runlog.shown_path(on_disk) if on_disk is not None else None)

    def where_to_resume(self) -> str:
        """The newest checkpoint, once the save in flight has ended."""
        if self.checkpointer is not None:
            with contextlib.suppress(checkpoint.CheckpointSaveError):
                self.checkpointer.wait()
        return checkpoint.where_to_resume(self.directory)

    def abandon(self, error: BaseException) -> BaseException | None:
        """After `error` ended the loop: the trace dropped, the last finished step's line logged, the
        save in flight finished (a failed one's *-tmp folder removed), the log closed; a lost process
        named. Returns the error to report instead, if any: a log line that found the disk full names
        the save that filled it when one failed, else the newest complete checkpoint."""
        self.trace.abandon()
        if peers.is_collective_failure(error):  # a lost process: its collectives and saves never finish
            self.log.close()
            raise self.watch.peer_lost(error) from error
        with contextlib.suppress(Exception):  # the line of a step that finished before the error
            self.log_in_flight()
        instead: BaseException | None = None
        if self.checkpointer is not None:
            try:
                self.checkpointer.close()
            except checkpoint.CheckpointSaveError as save_error:  # besides the error that stopped the run
                if isinstance(error, LogWriteError):
                    instead = save_error  # the save filled the disk: one line saying so
                elif not isinstance(error, checkpoint.CheckpointSaveError):
                    print_error(save_error)
        if instead is None and isinstance(error, LogWriteError):
            instead = error.naming(checkpoint.where_to_resume(self.directory))
        self.log.close()
        return instead


def finish_run(preset: cfg.Preset, options: RunOptions, *, log: runlog.RunLog, checkpointer: checkpoint.Checkpointer | None,
               compiled: CompiledSteps, params: Any, val_losses: dict[int, float], train_losses: dict[int, float]) -> RunResult:
    """Wait for the last save, export, and report compilations and peak memory."""
    host_params = {name: np.asarray(value) for name, value in params.items()}
    if checkpointer is not None:
        checkpointer.close()  # waits for the last save, before any line: a save that fills the disk is what stops the run
    compiles = (compiled.train_with_stop._cache_size(), compiled.evaluate._cache_size())
    log.write(f"compilations: train step {compiles[0]}, eval step {compiles[1]}", console=False)
    stats = jax.local_devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        log.write(f"peak memory allocated: {stats['peak_bytes_in_use'] // 2**20} MiB")
    if checkpointer is not None:
        if preset.train.steps in checkpointer.all_steps():
            log.write(f"saved the final state to {runlog.shown_path(checkpointer.directory)}; sample from it with:\n  "
                      + runlog.sample_command(checkpointer.directory))
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


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry. Exit codes (the same in torch_ref.train): 2 for a usage error (a bad flag or
    an invalid config value, one `PROG: error: ...` line), 1 for a runtime error (missing, bad or
    exhausted data, a mismatched or damaged checkpoint, an unwritable path, a failed save, a NaN
    or infinite loss, a lost process: one line, the traceback only with --debug), 128 + the
    signal for SIGINT (130) / SIGTERM (143)."""
    try:
        preset, options = parse_args(argv)
    except ValueError as error:
        print_error(error)
        return 2
    try:
        with quiet.third_party_errors(options.debug):  # orbax's own tracebacks only with --debug
            train(preset, options)
    except Interrupted as stopped:
        print(stopped, file=sys.stderr)
        return stopped.exit_code
    except peers.PeerLost as lost:
        print_error(lost)
        sys.stdout.flush()
        # Not a normal exit: jax.distributed's shutdown barrier (and an unfinished asynchronous
        # save) would wait for the lost process until the heartbeat timeout, then abort.
        os._exit(1)
    except (ValueError, OSError, data.ShardsExhaustedError, checkpoint.CheckpointSaveError) as error:
        if options.debug:
            raise
        print_error(error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
