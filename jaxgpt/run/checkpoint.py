"""Training checkpoints with orbax, and export to the record's torch format.

A checkpoint directory holds one orbax step folder per saved step (orbax writes to a temporary
folder and renames it when complete, so a crash never leaves a half-written step that looks
finished). Each step folder has two items:

  state:  the pytree {"params": ..., "opt_state": ...} as saved by orbax's StandardSave
  meta:   JSON {"step": int, "data_position": {...}, "config": {...}}

`step` counts the optimizer updates already applied, so a run resumed from step s continues
with iteration s of the training loop. The config is the full Preset as nested JSON; resuming
under a different config is refused with the list of fields that differ (runkit.checkpoint, as
torch_ref's; when a save is due is runkit's too).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

import runkit.checkpoint
import runkit.full_disk
from jaxgpt import compat
from jaxgpt.config import Preset, replace
from jaxgpt.config_json import config_to_json, nest_lineage
from jaxgpt.data import DataPosition
from jaxgpt.run import convert, saved_state


def config_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Human-readable `field: saved -> current` lines for every field that differs, ignoring
    the output-only fields of runkit.checkpoint.RESUME_IGNORED_FIELDS. Empty when the configs agree."""
    # A field the saved config lacks (added since) had its default then: compare that.
    flatten = runkit.checkpoint.flatten
    old = {**flatten(config_to_json(Preset())), **flatten(nest_lineage(saved))}
    return runkit.checkpoint.config_differences(old, flatten(current))


def refuse_config_change(meta: dict[str, Any], config: dict[str, Any], directory: Path) -> None:
    """Raise ValueError listing the differing fields when `meta` was saved under another config."""
    runkit.checkpoint.refuse_config_change(config_differences(meta["config"], config), directory)


class CorruptCheckpointError(ValueError):
    """A checkpoint step folder whose files cannot be read back."""

    def __init__(self, folder: Path, cause: BaseException) -> None:
        first_line = saved_state.printable((str(cause).strip().splitlines() or [""])[0][:200])
        super().__init__(f"cannot read the checkpoint in {folder}: its files are damaged or not an orbax "
                         f"checkpoint ({type(cause).__name__}: {first_line}); resume from an earlier step or start afresh")


TMP_MARKER = "tmp"  # orbax names unfinished saves <step>.orbax-checkpoint-tmp-<n>


def leftover_tmp_dirs(directory: Path) -> list[Path]:
    """Folders of saves that never finished (a killed run): orbax never restores them."""
    return sorted(path for path in directory.iterdir() if path.is_dir() and TMP_MARKER in path.name)


class CheckpointSaveError(Exception):
    """A save that failed (no space, permission lost, any error of orbax's writer). The run
    stops on it: the previous complete checkpoint is untouched; the failed save's `*-tmp` folder
    is removed (`partial` says so, or why it could not be: it is never restored either way). A
    full disk is said in plain words (runkit.full_disk), with the size of one checkpoint."""

    def __init__(self, step: int | None, directory: Path, cause: BaseException, partial: str = "") -> None:
        at_step = f"of step {step} " if step is not None else ""
        steps = completed_steps(directory)
        size = runkit.full_disk.size_on_disk(directory / str(steps[-1])) if steps else 0
        super().__init__(runkit.full_disk.save_failure(f"saving the checkpoint {at_step}into {directory}", cause,
                                                       partial=partial, checkpoint_size=size,
                                                       where=where_to_resume(directory)))


def completed_steps(directory: Path) -> list[int]:
    """Steps whose save finished in `directory`, read from disk (orbax's own list is not kept
    up to date after a failed save)."""
    return sorted(ocp.utils.checkpoint_steps(directory)) if directory.is_dir() else []


def where_to_resume(directory: Path | None) -> str:
    """One sentence naming the newest complete checkpoint in `directory` (None: the run saves
    none), as the errors that stop a run end."""
    if directory is None:
        return "This run writes no checkpoint."
    steps = completed_steps(directory)
    if not steps:
        return f"No checkpoint was completed in {directory}."
    return f"The newest complete checkpoint is step {steps[-1]} in {directory} (continue with --resume {directory})."


class Checkpointer:
    """Saves and restores training state in one directory, keeping the newest `max_to_keep`.

    Saving is asynchronous where orbax supports it: `save` returns once the arrays are copied
    off the devices and the files are written in a background thread; `wait` blocks until the
    last save is on disk (call it before reading the directory or exiting). A save that fails
    raises CheckpointSaveError naming its step: from `save` itself, or, when the background
    write fails, from the first `poll`, `save`, `wait` or `close` after it.
    """

    def __init__(self, directory: str | Path, *, max_to_keep: int = 3, async_save: bool = True) -> None:
        if max_to_keep < 1:
            raise ValueError(f"keep_checkpoints must be >= 1, got {max_to_keep}")
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, enable_async_checkpointing=async_save, create=True
        )
        try:  # orbax reads every step's metadata here: a damaged one raises from its parser
            self._manager = ocp.CheckpointManager(self.directory, options=options)
        except OSError:
            raise
        except Exception as error:  # noqa: BLE001 - orbax's parsers raise ValueError, KeyError, TypeError, ...
            raise CorruptCheckpointError(self.directory, error) from error
        self._closed = False
        self._pending: int | None = None  # the step whose asynchronous save may still be running

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, *, data_position: dict[str, Any], config: dict[str, Any]) -> None:
        """Save `state` (a pytree of jax arrays) after `step` updates, with the loader position
        and config as JSON. A step that is already saved is left as it is."""
        self.wait()  # orbax would wait for the previous save too; this names its step if it failed
        if step in self._manager.all_steps():
            return
        meta = {"step": int(step), "data_position": data_position, "config": config}
        try:
            self._manager.save(
                step,
                args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)),
            )
        except Exception as error:  # noqa: BLE001 - OSError, tensorstore's and orbax's errors alike
            raise self._failed(step, error) from error
        self._pending = step

    def poll(self) -> None:
        """Raise CheckpointSaveError when the save in flight has ended in a failure; a host-side
        check without waiting (the loop calls it every step)."""
        if self._pending is not None and compat.save_has_ended(self._manager):
            self.wait()

    def read_meta(self, step: int | None = None) -> dict[str, Any]:
        """The JSON item of `step` (default: the newest step); CorruptCheckpointError when it is
        not one a run wrote (jaxgpt.run.saved_state.meta_problem)."""
        step = self._require_step(step)
        meta = self._restore(step, ocp.args.Composite(meta=ocp.args.JsonRestore())).meta
        problem = saved_state.meta_problem(meta)
        if problem is not None:
            raise CorruptCheckpointError(self.directory / str(step), ValueError(f"its meta item {problem}"))
        return meta

    def restore(self, abstract_state: Any, *, config: dict[str, Any] | None, step: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Restore the state saved at `step` (default: newest) into the structure, dtypes and
        shardings of `abstract_state` (a pytree of jax.ShapeDtypeStruct or arrays).

        Returns (state, meta). Raises ValueError listing the differing fields when the saved
        config is not `config` (None: the caller has compared them, see refuse_config_change)."""
        meta = self.read_meta(step)
        if config is not None:
            refuse_config_change(meta, config, self.directory)
        target = jax.tree.map(_abstract, abstract_state)
        restored = self._restore(meta["step"], ocp.args.Composite(state=ocp.args.StandardRestore(target)))
        return restored.state, meta

    def restore_params(self, step: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """(params, meta) of `step` (default: newest): the parameters {record name: array} on
        the first local device, whatever mesh saved them (no config or optimizer needed), and
        the JSON meta item. FileNotFoundError when there is no such checkpoint."""
        meta = self.read_meta(step)
        try:
            item = ocp.StandardCheckpointHandler().metadata(self.directory / str(meta["step"]) / "state")
        except Exception as error:  # noqa: BLE001 - tensorstore/orbax errors share no base class
            raise CorruptCheckpointError(self.directory / str(meta["step"]), error) from error
        tree = getattr(item, "tree", item)  # orbax >= 0.11 wraps the tree's metadata
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        # The whole state is read: restoring only the params is not in every orbax version.
        target = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=device), tree)
        restored = self._restore(meta["step"], ocp.args.Composite(state=ocp.args.StandardRestore(target)))
        return dict(restored.state["params"]), meta

    def _restore(self, step: int, args: Any) -> Any:
        """orbax's restore, with a short error naming the step folder when its files are
        damaged (orbax and tensorstore raise many kinds, with long tracebacks)."""
        try:
            return self._manager.restore(step, args=args)
        except Exception as error:  # noqa: BLE001 - tensorstore/orbax errors share no base class
            raise CorruptCheckpointError(self.directory / str(step), error) from error

    def wait(self) -> None:
        """Block until the save in flight is on disk; CheckpointSaveError when it failed."""
        pending, self._pending = self._pending, None
        try:
            self._manager.wait_until_finished()
        except Exception as error:  # noqa: BLE001 - whatever the background writer raised
            raise self._failed(pending, error) from error

    def _failed(self, step: int | None, error: BaseException) -> CheckpointSaveError:
        """The error of the failed save of `step`, its `*-tmp` folder removed first (by process 0,
        which creates and renames a step's folder: a full disk has room again for the logs)."""
        partial = ""
        if step is not None and jax.process_index() == 0 and self.directory.is_dir():
            unfinished = [path for path in leftover_tmp_dirs(self.directory) if path.name.startswith(f"{step}.")]
            _wait_for_writers(unfinished)
            partial = runkit.full_disk.remove_partial(unfinished, "folder")
        return CheckpointSaveError(step, self.directory, error, partial)

    def close(self) -> None:
        """Wait for the save in flight, then release orbax's threads. Safe to call twice;
        CheckpointSaveError when the save in flight failed (the threads are released anyway)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.wait()
        finally:
            self._manager.close()

    def _require_step(self, step: int | None) -> int:
        if step is None:
            step = self._manager.latest_step()
            if step is None:
                raise FileNotFoundError(f"no checkpoint found in {self.directory}")
        elif step not in self._manager.all_steps():
            raise FileNotFoundError(f"no checkpoint for step {step} in {self.directory}")
        return step


def _wait_for_writers(folders: Sequence[Path], timeout_s: float = 30.0, per_thread_s: float = 2.0) -> None:
    """Let the writers of a failed save end before its folder is removed: orbax raises the first
    item's failure while its other background threads still write (each item has its own), and
    tensorstore finishes the writes they started in its own threads; so orbax's save threads are
    joined, then the folders' files are watched until they stop changing (`timeout_s` in all).
    Each thread gets at most `per_thread_s`: one of another checkpointer's saves may wait on
    signals that never come (two savers of one folder: the test of one-line errors waited 30 s
    on each)."""
    deadline = time.monotonic() + timeout_s
    try:
        from orbax.checkpoint._src.futures import future  # noqa: PLC0415 - private: a newer orbax may move it
        save_thread = getattr(future, "_SignalingThread", None)
    except ImportError:
        save_thread = None
    for thread in threading.enumerate():
        if save_thread is not None and isinstance(thread, save_thread) and thread is not threading.current_thread():
            with contextlib.suppress(Exception):  # its join re-raises its own failure: its owner reports that
                thread.join(max(0.0, min(per_thread_s, deadline - time.monotonic())))

    def files() -> set[tuple[str, int]]:
        with contextlib.suppress(OSError):
            return {(str(path), path.stat().st_size) for folder in folders for path in folder.rglob("*")}
        return set()

    seen = files()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = files()
        if now == seen:
            return
        seen = now


def open_run_checkpoints(
    preset: Preset, resume: str | None, run_id: str, save_final: bool
) -> tuple[Checkpointer | None, int, DataPosition, dict[str, Any] | None]:
    """(checkpointer or None, start step, data position, saved meta or None) of a run.

    `resume` (a directory) continues from its newest step and keeps saving there; otherwise
    checkpoints go to <out_dir>/checkpoints/<run_id> when any are asked for."""
    train = preset.train
    if resume is not None:
        directory = Path(resume)
        if not directory.is_dir():
            raise FileNotFoundError(f"--resume directory not found: {directory}")
        for leftover in leftover_tmp_dirs(directory):
            print(f"warning: ignoring {leftover}: an unfinished save of a run that was killed (never restored; "
                  "delete it to reclaim the space)", file=sys.stderr)
        checkpointer = Checkpointer(directory, max_to_keep=train.keep_checkpoints)
        meta = checkpointer.read_meta()  # FileNotFoundError when the directory holds no checkpoint
        return checkpointer, int(meta["step"]), DataPosition.from_dict(meta["data_position"]), meta
    if runkit.checkpoint.saves(train, save_final):
        directory = Path(train.out_dir) / "checkpoints" / run_id
        return Checkpointer(directory, max_to_keep=train.keep_checkpoints), 0, DataPosition(), None
    return None, 0, DataPosition(), None


def keep_saved_cadence(preset: Preset, saved_meta: dict[str, Any], overridden: Sequence[str]) -> Preset:
    """A resumed run keeps the saved run's checkpoint_every and keep_checkpoints unless the
    command line sets them again (`overridden`: the "section.field" names of the flags given)."""
    saved_train = saved_meta["config"]["train"]
    kept = {name: saved_train[name] for name in ("checkpoint_every", "keep_checkpoints")
            if f"train.{name}" not in overridden and name in saved_train}
    return Preset(model=preset.model, optim=preset.optim, train=replace(preset.train, **kept))


def restore_params(directory: str | Path, step: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(params, meta) of `step` (default: newest) in a checkpoint directory; see
    `Checkpointer.restore_params`. FileNotFoundError for a missing directory."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"checkpoint directory not found: {directory}")
    checkpointer = Checkpointer(directory, async_save=False)
    try:
        return checkpointer.restore_params(step)
    finally:
        checkpointer.close()


def _abstract(leaf: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=getattr(leaf, "sharding", None))


def export_torch(params: dict[str, Any], path: str | Path) -> Path:
    """Write `params` ({record key: array}, dtypes kept: bf16 tables stay bf16) to `path` as the
    record's `{"model": state_dict}` torch file, loadable by torch_ref and the record's code."""
    import torch  # torch only when exporting

    state_dict = convert.params_to_torch_state_dict(params)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": state_dict}, path)
    return path
