"""The places a training run writes, the same for both trainers: its logs `<out_dir>/logs/<run
id>.*`, its checkpoint folder (`--resume DIR`, else `<out_dir>/checkpoints/<run id>` when it
saves), the `--export-torch` file and `<tensorboard>/<run id>`. `check_outputs` proves them
writable before the first step; `run_places` names their locks (runkit.lock). Which of a run's
processes takes the locks is each trainer's (jaxgpt.run.lock, torch_ref.run.lock)."""

from __future__ import annotations

from pathlib import Path

from runkit import lock
from runkit.preflight import check_writable


def checkpoint_folder(out_dir: str | Path, run_id: str, *, resume: str | None, saves: bool) -> Path | None:
    """Where the run's checkpoints go: the `--resume` folder, else `<out_dir>/checkpoints/<run
    id>` when the run `saves` (--checkpoint-every or --save-checkpoint) and was not given a
    --resume that is missing (refused when it is opened), else None: torch_ref, resumed from one
    checkpoint file, saves into the run's own folder."""
    if resume is not None and Path(resume).is_dir():
        return Path(resume)
    if saves and (resume is None or Path(resume).is_file()):
        return Path(out_dir) / "checkpoints" / run_id
    return None


def check_outputs(out_dir: str | Path, *, resume: str | None, export: str | None, tensorboard: str | None) -> None:
    """ValueError unless every place the run writes takes a file (--out-dir, which holds its logs
    and checkpoints, a --resume folder, --export-torch's folder, --tensorboard) and --export-torch
    names a file, not a folder."""
    check_writable(Path(out_dir), "--out-dir")
    if resume is not None and Path(resume).is_dir():
        check_writable(Path(resume), "--resume directory")
    if export is not None:
        target = Path(export)
        if target.is_dir():
            raise ValueError(f"--export-torch {target} is a directory; give a file path such as {target / 'model.pt'}")
        check_writable(target.parent, "--export-torch folder")
    if tensorboard is not None:
        check_writable(Path(tensorboard), "--tensorboard")


def run_places(out_dir: str | Path, run_id: str, *, resume: str | None, saves: bool, export: str | None = None,
               tensorboard: str | None = None) -> list[lock.Place]:
    """The lock of every place the run `run_id` writes (the module's list), in a fixed order."""
    places = [lock.logs_place(Path(out_dir) / "logs", run_id)]
    folder = checkpoint_folder(out_dir, run_id, resume=resume, saves=saves)
    if folder is not None:
        resumed = resume is not None and Path(resume).is_dir()
        places.append(lock.folder_place(folder, f"the checkpoint folder {folder}",
                                        lock.RESUME_LATER if resumed else lock.ANOTHER_RUN_ID))
    if export is not None:
        places.append(lock.name_place(Path(export), f"--export-torch {export}", "export to another path"))
    if tensorboard is not None:
        places.append(lock.tensorboard_place(tensorboard, run_id))
    return places
