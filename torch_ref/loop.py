"""The torch_ref trainer's loop: `train` runs one rank of a run (RECORD.md sections 7-9), `launch`
starts the ranks (torchrun's, spawned ones, or this process), `run` is the whole run for a
Python caller (its folders locked first), and `run_command` the part of `python -m
torch_ref.train` that needs torch: the run and its errors as exit codes.

Defaults are the record's: 1393 steps of 524,288 tokens (65,536 per rank), validation every 125
steps over 10,485,760 tokens, the record's iteration order, log lines and timing (the first 10
steps and validation excluded). A process handling several `seq_len` sequences per step runs them
one after another and averages their gradients, which equals the record's per-rank mean loss
followed by the AVG all-reduce over ranks.

Run conventions as jaxgpt's (docs/RELIABILITY.md): logs and checkpoints under --out-dir,
--checkpoint-every / --keep-checkpoints, --resume (model, optimizers, LR schedulers, data
position and step; a changed config is refused), SIGINT/SIGTERM stop between steps and save the
last completed step (exit 130/143), every output path checked before the first step, exit 2 for
usage errors and 1 for runtime errors. `--steps 0` runs the start-up checks and the step-0
validation, then exits.

The command line is torch_ref.run.cli, the run's folders torch_ref.run.claim, the checks before
the first step torch_ref.run.preflight, signals torch_ref.run.interrupt, the log lines and timing
torch_ref.run.runlog, checkpoint files torch_ref.run.checkpoint. The command: torch_ref.train.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import Tensor, nn

import torch_ref.config as cfg
from runkit.checkpoint import is_due
from runkit.full_disk import LogWriteError
from runkit.interrupt import Interrupted
from runkit.lock import NoLock, RunLock
from runkit.runlog import CLOCK_RESET_STEP, NonFiniteError, nonfinite_loss, train_line, val_line, val_step_avg_ms
from torch_ref import compilation, lineage
from torch_ref.data import ShardsExhaustedError, distributed_data_generator, val_batches
from torch_ref.model import GPT, apply_dtype_policy
from torch_ref.optim import build_lr_schedulers, build_optimizers, optimizer_step
from torch_ref.run import checkpoint as ckpt
from torch_ref.run import claim, convert, peers, preflight, profiling, runlog
from torch_ref.run.cli import RunOptions, print_error, torchrun_world_size, with_device, with_run_id
from torch_ref.run.convert import load_record_state_dict
from torch_ref.run.interrupt import StopRequest, agree, interrupted


@dataclass(frozen=True)
class RunResult:
    """What rank 0's run hands back to Python callers (tests, parity checks)."""

    val_losses: dict[int, float]
    train_time_ms: float
    log_path: str | None
    metrics_path: str | None


# ---------------------------------------------------------------------------------------------
# The model and its steps


def build_model(model_config: cfg.ModelConfig, local_tokens: int, seed: int,
                init_state: dict[str, Tensor] | None, device: torch.device) -> GPT:
    """The record's GPT (or a lineage preset's) on `device` under the config's dtype policy, from
    a seed or a state dict.

    Built in fp32 on the CPU (so a seed gives the same init on any device), then moved; under the
    "record" policy the embedding tables become bf16 and training uses the FP8 head (when the
    config's fp8_head); "bf16_model" and "autocast" as `apply_dtype_policy` says.
    """
    torch.manual_seed(seed)
    model = GPT.from_config(
        model_config,
        fp8_head=lineage.model_variants(model_config).fp8_head,
        fp8_grad_scale=cfg.fp8_grad_scale_for(local_tokens, model_config.fp8_grad_scale),
    )
    apply_dtype_policy(model, model_config.dtype_policy)
    if init_state is not None:
        load_record_state_dict(model, init_state)  # casts to the model's dtypes
    return model.to(device)


def window_argument(window: int, device: torch.device) -> int | Tensor:
    """W_long as the model's argument: a 0-d int32 device tensor on CUDA, as the record passes it
    (a compiled model then does not specialise on each value), a plain int elsewhere."""
    if device.type == "cuda":
        return torch.tensor(window, dtype=torch.int32, device=device)
    return window


def forward_backward(model: nn.Module, inputs: Tensor, targets: Tensor, seq_len: int, window: int | Tensor) -> Tensor:
    """This rank's tokens (Bl,) as Bl / seq_len sequences, gradients averaged over them.

    Returns the mean loss as a detached fp32 scalar (no host sync, as the record's loop)."""
    num_seqs = inputs.numel() // seq_len
    total = torch.zeros((), device=inputs.device)
    for input_seq, target_seq in zip(inputs.split(seq_len), targets.split(seq_len), strict=True):
        loss = model(input_seq, target_seq, window)
        (loss / num_seqs).backward()
        total += loss.detach()
    return total / num_seqs


def average_gradients(model: nn.Module, world_size: int) -> None:
    """The record's manual data parallelism: every .grad all-reduced with AVG (bf16 stays bf16)."""
    if world_size == 1:
        return
    for param in model.parameters():
        dist.all_reduce(param.grad, op=dist.ReduceOp.AVG)


@torch.no_grad()
def evaluate(model: nn.Module, train_cfg: cfg.TrainConfig, window: int | Tensor, rank: int, world_size: int,
             device: torch.device) -> float:
    """Mean val loss over the first val_tokens tokens (one seq_len sequence per rank per batch)."""
    model.eval()
    batches = val_batches(train_cfg.val_files, train_cfg.val_tokens, world_size * train_cfg.seq_len, rank, world_size,
                          device=device)
    losses = [model(inputs, targets, window) for inputs, targets in batches]
    val_loss = torch.stack(losses).mean()
    if world_size > 1:
        dist.all_reduce(val_loss, op=dist.ReduceOp.AVG)
    model.train()
    return val_loss.item()


# ---------------------------------------------------------------------------------------------
# The run


def train(preset: cfg.Preset, options: RunOptions, rank: int = 0, world_size: int = 1) -> RunResult:
    """One rank's whole run; torch.distributed must already be initialised when world_size > 1."""
    run = RankRun(preset, options, rank, world_size)
    try:
        with StopRequest(announce=rank == 0) as stop:
            run.run(stop)
    except RuntimeError as error:
        if peers.is_collective_failure(error, world_size):  # a lost rank: say which, and stop
            raise peers.peer_lost(error, rank, world_size, ckpt.where_to_resume(run.directory)) from error
        raise
    except LogWriteError as error:  # a full disk: the log's line names the newest checkpoint too
        raise error.naming(ckpt.where_to_resume(run.directory)) from error
    return run.finish()


class RankRun:
    """One rank's run and the state it carries from step to step (`train` drives it): the model
    (compiled on a GPU), optimizers and schedulers, the batch stream, the log, clock and trace,
    the losses not yet read and the metrics not yet logged."""

    def __init__(self, preset: cfg.Preset, options: RunOptions, rank: int, world_size: int) -> None:
        options = with_run_id(options)
        assert options.run_id is not None  # with_run_id set it
        self.options, self.rank, self.world_size = options, rank, world_size
        device = self.device = _rank_device(options.device, rank)
        self.control = _control_group(options.device, world_size)
        init_state = convert.load_checkpoint_state(options.init_from) if options.init_from else None
        resumed, resume_path = ckpt.read_resume(options)
        preset = self.preset = preflight.run_preset(preset, options, init_state, resumed, resume_path)
        train_cfg = self.train_cfg = preset.train
        self.log = runlog.RunLog(runlog.log_directory(preset), options.run_id, enabled=rank == 0,
                                 tensorboard_dir=options.tensorboard)
        raw_model = self.raw_model = build_model(preset.model, train_cfg.batch_tokens // world_size, train_cfg.seed,
                                                 init_state, device)
        if world_size > 1:  # every rank starts from rank 0's weights, as the record
            for param in raw_model.parameters():
                dist.broadcast(param.detach(), 0)
        self.model = compilation.compile_model(raw_model) if device.type == "cuda" else raw_model
        self.optimizers = build_optimizers(raw_model, preset.optim, rank, world_size)
        # steps == 0 only validates the initial model (with the step-0 window).
        self.schedule_steps = max(train_cfg.steps, 1)
        self.schedulers = build_lr_schedulers(self.optimizers, self.schedule_steps, preset.optim)
        start_step, position, served = 0, (0, 0), 0
        if resumed is not None:  # every rank reads the same file: no broadcast needed
            start_step, position, served = ckpt.restore(raw_model, self.optimizers, self.schedulers, resumed,
                                                        resume_path)
            del resumed
        runlog.write_header(self.log, preset, options, device)
        self.start_step, self.steps = start_step, train_cfg.steps
        self.val_losses: dict[int, float] = {}
        # (step, loss, train_time_ms, the window's metrics) not yet logged
        self.pending_metrics: list[tuple[int, Tensor, float, dict[str, int]]] = []
        self.directory = ckpt.checkpoint_directory(preset, options)
        stream_args = (train_cfg.train_files, train_cfg.batch_tokens, rank, world_size)
        self.stream = stream = lineage.stream_variants(train_cfg)  # the lineage's window schedule and data stream
        stream_kwargs: dict[str, Any] = dict(cycle=train_cfg.cycle_data, device=device, **stream.stream_options())
        self.train_batches = distributed_data_generator(*stream_args, **stream_kwargs, position=position, batches=served)
        # #8/#9 fetch their first batch, then reset the loader: steps 0 and 1 both train on it.
        self.repeated = next(distributed_data_generator(*stream_args, **stream_kwargs)) \
            if stream.repeats_first(start_step) else None
        self.clock = runlog.TrainClock(device)
        self.trace = profiling.StepTrace(options.profile, profiling.trace_path(train_cfg.out_dir, options.run_id, rank),
                                         device)
        self.losses = runlog.LossWatch(device)

    def run(self, stop: StopRequest) -> None:
        """Steps start_step..steps: check the losses and a stop, validate and save where due, train."""
        train_cfg = self.train_cfg
        for step in range(self.start_step, self.steps + 1):
            stop.starting(step)
            last_step = step == self.steps
            every = train_cfg.val_every  # 0: the last step only (the record's val_loss_every 0)
            val_due = train_cfg.val_tokens and (last_step or (every > 0 and step % every == 0))
            save_due = is_due(step, self.start_step, train_cfg, save_final=self.options.save_checkpoint)
            # Every loss before a validation or a save is read first (they wait for the device
            # anyway), so no NaN state is saved between a NaN step and its check; otherwise only
            # the losses already on the host are read. The ranks then agree on what they saw.
            self.agree(step, stop, wait=bool(val_due or save_due or last_step))
            if step == CLOCK_RESET_STEP:
                self.clock.reset()
            # W_long in blocks (the record's), or #15's window in tokens (the window schedule's unit)
            scheduled = self.stream.window(step, self.schedule_steps, train_cfg.window_max_tokens)
            window = window_argument(scheduled, self.device)
            if val_due:
                self.validate(step, scheduled, window)
            if save_due:
                self.clock.pause()
                self.save(step)
                self.clock.resume()
            if last_step:
                break
            self.train_step(step, scheduled, window)

    def agree(self, step: int, stop: StopRequest, *, wait: bool) -> None:
        """The ranks agree on a non-finite loss (stop with it) and a signal (save `step`'s state, stop)."""
        nonfinite = self.losses.first_nonfinite(wait=wait)
        signum, nonfinite = agree(stop, nonfinite, self.control)
        if nonfinite is not None and not self.options.allow_nonfinite_loss:
            raise nonfinite_loss("train", nonfinite[0] + 1, self.steps, nonfinite[1], ckpt.where_to_resume(self.directory))
        if signum is not None:  # the model holds `step` updates: save them, then stop
            written = self.save(step) if step != self.start_step else []
            saved_in = self.directory if written else None
            raise interrupted(signum, step, saved_in, self.options.resume)

    def validate(self, step: int, scheduled: int, window: int | Tensor) -> None:
        train_time_ms = self.clock.pause()
        loss = self.val_losses[step] = evaluate(self.model, self.train_cfg, window, self.rank, self.world_size,
                                                self.device)
        self.log.write(val_line(step, self.steps, loss, train_time_ms), console=True)
        runlog.write_train_metrics(self.log, self.pending_metrics, self.world_size)
        self.log.metrics(kind="val", step=step, val_loss=loss, train_time_ms=train_time_ms,
                         step_avg_ms=val_step_avg_ms(step, train_time_ms), **lineage.logged_window(self.preset.model, scheduled))
        if not (self.options.allow_nonfinite_loss or math.isfinite(loss)):
            raise nonfinite_loss("val", step, self.steps, loss, ckpt.where_to_resume(self.directory))
        self.clock.resume()

    def train_step(self, step: int, scheduled: int, window: int | Tensor) -> None:
        """One update on the step's batch (#8/#9: step 0 on the repeated first batch), its line logged."""
        self.trace.before(step)
        inputs, targets = self.repeated if step == 0 and self.repeated is not None else next(self.train_batches)
        loss = forward_backward(self.model, inputs, targets, self.train_cfg.seq_len, window)
        self.losses.add(step, loss)
        average_gradients(self.raw_model, self.world_size)
        optimizer_step(self.raw_model, self.optimizers, self.schedulers, step, self.preset.optim)
        train_time_ms = self.clock.elapsed_ms()
        self.log.write(train_line(step, self.steps, train_time_ms), console=True)
        self.pending_metrics.append((step, loss, train_time_ms, lineage.logged_window(self.preset.model, scheduled)))
        if (trace_written := self.trace.after(step)) is not None:
            assert self.options.profile is not None  # a trace is written only for --profile's window
            self.log.write(f"profile of steps {self.options.profile[0]}..{self.options.profile[1]}: {trace_written}",
                           console=True)

    def save(self, step: int) -> list[Path]:
        """Write the state after `step` updates into the checkpoint folder (every rank joins; rank
        0 writes); [] when the run has none. A NaN or infinite state is never written
        (NonFiniteError), a failed write stops every rank."""
        options, folder = self.options, self.directory
        if folder is None:
            return []
        if not (options.allow_nonfinite_loss or ckpt.state_is_finite(self.raw_model, self.optimizers, self.control)):
            raise NonFiniteError(f"the state after step {step} holds NaN or infinite values although every loss "
                                 f"before it was finite; the run stopped without saving it. "
                                 f"{ckpt.where_to_resume(folder)}")
        payload = ckpt.checkpoint_payload(self.raw_model, self.optimizers, self.schedulers, step,
                                          self.train_batches.position, self.preset, self.control,
                                          batches=self.train_batches.batches)
        written: list[Path] = []
        failure = None
        if self.rank == 0:
            try:
                written = [ckpt.save_step(folder, step, payload, self.train_cfg.keep_checkpoints)]
            except ckpt.CheckpointSaveError as error:
                failure = error
        if not ckpt.all_saved(failure is None, self.control):  # every rank stops; rank 0 says why
            raise failure or ckpt.CheckpointSaveError(step, folder / f"{step}.pt", RuntimeError("rank 0 could not write it"))
        return written

    def export(self, path: str) -> None:
        """--export-torch: rank 0 writes the parameters as {"model": state_dict}, the record's
        format (--init-from reads it); a failed write stops every rank."""
        failure = None
        if self.rank == 0:
            try:
                written = ckpt.write_atomically({"model": self.raw_model.state_dict()}, path)
                self.log.write(f"exported {written}", console=False)
            except ckpt.CheckpointSaveError as error:
                failure = error
        if not ckpt.all_saved(failure is None, self.control):
            raise failure or ckpt.CheckpointSaveError(self.steps, Path(path), RuntimeError("rank 0 could not write it"))

    def finish(self) -> RunResult:
        """After the last step: the metrics logged, the parameters exported (--export-torch), the log closed."""
        total_train_ms = self.clock.pause()
        runlog.write_train_metrics(self.log, self.pending_metrics, self.world_size)
        if self.options.export_torch is not None:  # the final parameters (the initial ones with --steps 0)
            self.export(self.options.export_torch)
        self.log.close()
        if self.device.type == "cuda":
            self.log.write(f"peak memory allocated: {torch.cuda.max_memory_allocated() // 1024 // 1024} MiB "
                           f"reserved: {torch.cuda.max_memory_reserved() // 1024 // 1024} MiB", console=True)
        return RunResult(val_losses=self.val_losses, train_time_ms=total_train_ms, log_path=self.log.path,
                         metrics_path=self.log.metrics_path)


def _control_group(device_type: str, world_size: int) -> Any | None:
    """A CPU (gloo) process group for the per-step stop flag and checkpoint gathers, so that
    neither waits on the accelerator; None for a single process."""
    if world_size == 1:
        return None
    return dist.group.WORLD if device_type == "cpu" else dist.new_group(backend="gloo")


def _rank_device(device_type: str, rank: int) -> torch.device:
    if device_type == "cuda":
        compilation.set_allocator()  # before the first CUDA allocation
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _init_process_group(device_type: str, rank: int, world_size: int, init_method: str | None) -> None:
    backend = "nccl" if device_type == "cuda" else "gloo"
    kwargs: dict[str, Any] = {}
    if device_type == "cuda":
        kwargs["device_id"] = _rank_device(device_type, rank)
    timeout = peers.process_group_timeout(device_type)
    if timeout is not None:
        kwargs["timeout"] = timeout
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size, **kwargs)
    dist.barrier()


def _spawned_rank(rank: int, world_size: int, preset: cfg.Preset, options: RunOptions, init_method: str) -> None:
    # Out of the terminal's process group: the parent forwards a signal once (a Ctrl-C would
    # otherwise reach every rank, then again through the parent, and abandon the step).
    os.setpgrp()
    # Share the CPU cores between the processes instead of oversubscribing them.
    if options.device == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    _init_process_group(options.device, rank, world_size, init_method)
    try:
        train(preset, options, rank, world_size)
    except Interrupted as stopped:
        if rank == 0:
            print(stopped, file=sys.stderr, flush=True)
        sys.exit(stopped.exit_code)
    except peers.PeerLost as lost:  # every survivor says it: rank 0 may be the one lost
        print_error(lost)
        sys.exit(1)
    except RUNTIME_ERRORS as err:
        if rank == 0:
            print_error(err)
        sys.exit(1)
    finally:
        dist.destroy_process_group()


def _spawn(world_size: int, preset: cfg.Preset, options: RunOptions) -> None:
    """`world_size` CPU/GPU processes on this host; SIGINT/SIGTERM are passed on to them once.
    Raises mp.ProcessExitedException carrying a rank's exit code when one fails."""
    with tempfile.TemporaryDirectory() as rendezvous, StopRequest(announce=False) as stop:
        init_method = f"file://{os.path.join(rendezvous, 'store')}"
        context = mp.spawn(_spawned_rank, args=(world_size, preset, options, init_method), nprocs=world_size,
                           join=False)
        forwarded = False
        while not context.join(timeout=0.5):
            if stop.signum is not None and not forwarded:
                forwarded = True
                for process in context.processes:
                    if process.is_alive():
                        os.kill(process.pid, stop.signum)


def run(preset: cfg.Preset, options: RunOptions) -> RunResult | None:
    """Run under torchrun (env RANK/WORLD_SIZE), as `devices` spawned processes, or in this process,
    holding the run's folders (torch_ref.run.claim) from before its first check until it ends.

    Returns rank 0's result when it ran in this process, else None.
    """
    options, held = claim.claim_run(preset, options)
    with held:
        return launch(preset, options)


def launch(preset: cfg.Preset, options: RunOptions) -> RunResult | None:
    """`run` once the run holds its folders: the start-up checks, then the ranks."""
    preflight.start_run(preset, options)
    world_size = preset.train.devices
    assert world_size is not None  # start_run checked the run with it (parse_args: --devices, torchrun's, else 1)
    if torchrun_world_size() is not None:
        rank = int(os.environ["RANK"])
        _init_process_group(options.device, rank, world_size, None)
        try:
            result = train(preset, options, rank, world_size)
        finally:
            dist.destroy_process_group()
        return result if rank == 0 else None
    if world_size == 1:
        return train(preset, options)
    _spawn(world_size, preset, options)
    return None


RUNTIME_ERRORS = (ValueError, OSError, ShardsExhaustedError)


def run_command(preset: cfg.Preset, options: RunOptions, device: Literal["cpu", "cuda"] | None,
                held: RunLock | NoLock) -> int:
    """The command's run once its flags are parsed and its folders held (`held`, released here):
    `device` (--device, None: cuda when torch sees one) chosen, then the ranks; its exit code
    with torch_ref.train.main's convention, each error one line."""
    with held:
        try:
            options = with_device(options, device)
        except ValueError as err:  # a usage error, as when parse_args chose the device
            print_error(err)
            return 2
        try:
            launch(preset, options)
        except Interrupted as stopped:
            if int(os.environ.get("RANK", 0)) == 0:
                print(stopped, file=sys.stderr)
            return stopped.exit_code
        except mp.ProcessExitedException as exited:  # a spawned rank's code; the ranks printed why
            if exited.exit_code < 0:  # killed by a signal: nothing of its own was printed
                print_error(f"rank {exited.error_index} was ended by {exited.signal_name}; the other ranks were stopped")
            return exited.exit_code if exited.exit_code > 0 else 1
        except (peers.PeerLost, *RUNTIME_ERRORS) as err:
            if options.debug:
                raise
            print_error(err)
            return 1
    return 0
