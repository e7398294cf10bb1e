"""How fast a second run on a running run's folders is refused: the library of
`scripts/refusal_time.py` (docs/RELIABILITY.md, "Two runs, one folder").

A first run (the trainer named, a small model on synthetic shards in a temporary folder) is
started and, once it holds its folders (runkit.lock: its lock file names it), stopped with
SIGSTOP so that it takes no CPU from the measurement; the same command is then started
`repeats` times and each is timed from its start to its exit (1, one line). Beside it, the
time the same interpreter takes to import the trainer's command module and exit, and its loop
module (jax, flax and orbax; torch): what the command imports only once the run holds its
folders; and the trainer's `main` called in this process (its modules already imported): the
refusal's own cost. The first run is then killed.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from jaxgpt import data
from runkit import lock

VOCAB = 1024
COMMON = ["--train-files", "{root}/t_train_*.bin", "--val-files", "{root}/t_val_*.bin", "--seq-len", "128",
          "--batch-tokens", "128", "--val-tokens", "128", "--window-max-tokens", "256", "--steps", "4", "--out-dir",
          "{root}/out", "--run-id", "same", "--checkpoint-every", "2"]
TRAINERS = {
    "jaxgpt": ("jaxgpt.train", ["--preset", "tiny", "--vocab-size", str(VOCAB), "--eot-id", "0", "--devices", "1",
                                "--no-progress"]),
    "torch_ref": ("torch_ref.train", ["--preset", "tiny", "--device", "cpu", "--dtype", "fp32"]),
}


def timed(command: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    return time.perf_counter() - started, done


def measure(trainer: str, repeats: int = 5) -> dict:
    """{"trainer", "refused_s" (each refused command's wall time), "median_refused_s",
    "median_import_s" (importing the trainer's command module alone), "median_loop_import_s"
    (importing its loop: what a refused run no longer waits for), "median_help_s" (the command
    with --help), "median_in_process_s" (`main`
    in this process, from its command line to the refusal), "exit_codes", "line" (the one line
    of the last refusal)}."""
    module, flags = TRAINERS[trainer]
    env = {**os.environ, "JAXGPT_COMPILE_CACHE": "none"}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        rng = np.random.default_rng(0)
        data.write_shard(root / "t_train_000001.bin", rng.integers(0, VOCAB, 20_000))
        data.write_shard(root / "t_val_000000.bin", rng.integers(0, VOCAB, 5_000))
        if trainer == "torch_ref":
            flags = [*flags, "--init-from", str(_torch_init(root))]
        command = [sys.executable, "-m", module, *flags, *(arg.format(root=root) for arg in COMMON)]
        first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            lock.wait_for_holder(root / "out" / "checkpoints" / "same" / lock.FOLDER_LOCK, first, timeout_s=600)
            first.send_signal(signal.SIGSTOP)
            refusals = [timed(command, env) for _ in range(repeats)]
            imports = [timed([sys.executable, "-c", f"import {module}"], env)[0] for _ in range(repeats)]
            helps = [timed([sys.executable, "-m", module, "--help"], env)[0] for _ in range(repeats)]
            loop_module = module.replace(".train", ".loop")
            loop_imports = [timed([sys.executable, "-c", f"import {loop_module}"], env)[0] for _ in range(repeats)]
            in_process = [in_process_seconds(module, command[3:]) for _ in range(repeats)]
        finally:
            first.kill()
            first.wait()
    return {"trainer": trainer, "refused_s": [round(seconds, 3) for seconds, _ in refusals],
            "median_refused_s": round(statistics.median(s for s, _ in refusals), 3),
            "median_import_s": round(statistics.median(imports), 3),
            "median_loop_import_s": round(statistics.median(loop_imports), 3),
            "median_help_s": round(statistics.median(helps), 3),
            "median_in_process_s": round(statistics.median(in_process), 4),
            "exit_codes": sorted({done.returncode for _, done in refusals}),
            "line": refusals[-1][1].stderr.strip()}


def in_process_seconds(module: str, argv: list[str]) -> float:
    """The trainer's `main(argv)` in this process, its modules already imported: from the
    command line to the refusal (exit 1 asserted), its one line swallowed."""
    main = importlib.import_module(module).main
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        started = time.perf_counter()
        code = main(argv)
        seconds = time.perf_counter() - started
    if code != 1:
        raise RuntimeError(f"{module} was not refused in this process (exit {code})")
    return seconds


def _torch_init(root: Path) -> Path:
    """A 12-layer, 64-wide record-format model for torch_ref's --init-from (its tiny preset's
    width would take longer to build than the measurement)."""
    import torch

    from torch_ref.model import GPT

    torch.manual_seed(0)
    path = root / "init.pt"
    torch.save({"model": GPT(VOCAB, 12, 1, 64).state_dict()}, path)
    return path
