"""The trainer's loop: `train(preset, options)` runs (or resumes) one run of the record's
compiled step (jaxgpt.step) over its data, validating, logging and saving where due; the loop
never waits for the step it has just dispatched (the train loss is read one step late).
`run_command` is the command's part that needs jax: the run, its errors as exit codes.

Where a run starts and its checks: jaxgpt.run.preflight; signals jaxgpt.run.interrupt, the log
files jaxgpt.run.runlog, checkpoint files jaxgpt.run.checkpoint, a lost process jaxgpt.run.peers;
the parts torch_ref's trainer shares (the record's log lines and clock, when a save is due)
runkit. The command line and the locks taken before jax: jaxgpt.train. Docs: docs/TRAINING.md.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import jax
import numpy as np
from jax.sharding import Mesh

from jaxgpt import config as cfg
from jaxgpt import config_json, data, lineage
from jaxgpt import step as step_lib
from jaxgpt.kernels.flash_attention import default_interpret
from jaxgpt.run import checkpoint, interrupt, peers, preflight, profiling, quiet, runlog
from jaxgpt.run.claim import Claim
from jaxgpt.run.cli import RunOptions, print_error
from jaxgpt.step import AXIS, CompiledSteps
from runkit.checkpoint import is_due
from runkit.full_disk import LogWriteError
from runkit.interrupt import Interrupted
from runkit.runlog import NonFiniteError, TrainClock, nonfinite_loss


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
    preset, graph, host_params = step_lib.build_model(start.preset, options, num_devices=len(start.devices),
                                                      init_state=start.init_state)  # resolved once, in preflight
    if start.saved_meta is not None:  # refused before anything compiles
        assert start.checkpointer is not None  # a resumed run saves into its --resume folder
        checkpoint.refuse_config_change(start.saved_meta, config_json.config_to_json(preset), start.checkpointer.directory)
    # Pallas's interpreters (the kernel backends on a CPU) cannot carry shard_map's varying-axes
    # types through their grid loops; the compiled GPU kernels can, and keep the check.
    interpreted = preset.model.attention_backend in ("pallas", "mosaic") and default_interpret()
    optimizer, compiled = step_lib.prepare_steps(preset, Mesh(np.array(start.devices), (AXIS,)), graph, check_vma=not interpreted)
    params, opt_state = step_lib.place_state(host_params, optimizer, compiled)
    if start.saved_meta is not None:
        assert start.checkpointer is not None  # a resumed run saves into its --resume folder
        state, _ = start.checkpointer.restore({"params": params, "opt_state": opt_state}, config=None,
                                              step=start.step)
        params, opt_state = state["params"], state["opt_state"]
    return preset, compiled, params, opt_state


def train(preset: cfg.Preset, options: RunOptions | None = None, claim: Claim | None = None) -> RunResult:
    """Run (or resume) training as configured (`options` None: the defaults); returns the losses
    and final parameters. `claim`: the run id and locks the command took before importing jax
    (jaxgpt.run.claim); None: taken here."""
    options = RunOptions() if options is None else options
    start = preflight.start_run(preset, options, claim)
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
        self.stream = lineage.stream_variants(train_cfg)  # the lineage's window schedule and data stream
        self.total_steps, self.checkpointer = train_cfg.steps, start.checkpointer
        self.directory = None if self.checkpointer is None else self.checkpointer.directory
        self.loader = data.BatchLoader(
            train_cfg.train_files, train_cfg.batch_tokens, train_cfg.seq_len, position=start.position,
            process_index=jax.process_index(), process_count=jax.process_count(), cycle=train_cfg.cycle_data,
            **self.stream.loader_options(start.step))
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
            window = np.int32(self.stream.window(step, max(self.total_steps, 1), train_cfg.window_max_tokens))
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
            self.flags[flag] = step_lib.stop_flags(flag, self.compiled.batch)
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
            self.val_losses[step] = step_lib.evaluate(self.preset, self.compiled, self.params, window)
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
        if not (self.options.allow_nonfinite_loss or bool(step_lib.all_finite(state))):
            raise NonFiniteError(f"the state after step {step} holds NaN or infinite values although every loss "
                                 f"before it was finite; the run stopped without saving it. "
                                 f"{self.where_to_resume()}")
        assert self.checkpointer is not None  # called only when the run saves
        self.checkpointer.save(step, state, data_position=self.loader.position.to_dict(),
                               config=config_json.config_to_json(self.preset))

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


def run_command(preset: cfg.Preset, options: RunOptions, claim: Claim | None) -> int:
    """The command's run once its flags are parsed (and, for one process, its folders held:
    `claim`): its exit code, with jaxgpt.train.main's convention; each error one line."""
    try:
        with quiet.third_party_errors(options.debug):  # orbax's own tracebacks only with --debug
            train(preset, options, claim)
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
