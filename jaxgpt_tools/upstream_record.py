"""The record's own training script, run beside jaxgpt and torch_ref on one GPU.

The Sub3Min record (KellerJordan/modded-nanogpt, records/track_1_short/2025-01-16_Sub3Min)
publishes its training script as the top of its log: the log's first part is the script's
source, ended by a line of '=' characters. `script_from_log` takes it out; `fetch` writes it
under the ignored folder runs/upstream/ (its code is never committed). To run it with one process
on the sample shards, a user must change a few of its settings; `record_patches` lists each such
change with its reason, `patch_script` applies them (each must match exactly once) and returns
what it changed, and `prepare_run` lays out a run folder: the patched script, the shards linked
where the script looks for them, and the environment that stands in for torchrun's.

Facts about the script that decide those changes (read from its text):
- hyperparameters are class attributes of `Hyperparameters` (data globs, val_tokens, batch_size,
  num_iterations, val_loss_every, seq_len), with no command line;
- shards are found by `Path.cwd().glob(pattern)`, which takes only patterns relative to the
  working directory; the loader does not cycle (it ends the run when the shards run out);
- with world size 1 the step still takes `batch_size` tokens, accumulating batch_size / seq_len
  sequences of 65,536: the record's 8 x 65,536 would be 8 forward/backward passes per step;
- RANK, WORLD_SIZE and LOCAL_RANK come from torchrun's environment; NCCL is initialised even for
  one process (MASTER_ADDR and MASTER_PORT needed); CUDA is required at import;
- step lines go to stdout (`step:N/M train_time:...ms`, the format the trainers copy), the peak
  memory line only to the log file `logs/<uuid>.txt` (whose path is the first stdout line);
- `nvidia-smi` is run once for the log (a missing binary would end the run).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import sys
import urllib.request
from dataclasses import dataclass
from glob import glob
from pathlib import Path

from jaxgpt_tools.common.artifacts import REPO_ROOT

RECORD_NAME = "2025-01-16_Sub3Min"
LOG_NAME = "1d3bd93b-a69e-4118-aeb8-8184239d7566.txt"
LOG_URL = ("https://raw.githubusercontent.com/KellerJordan/modded-nanogpt/master/records/track_1_short/"
           f"{RECORD_NAME}/{LOG_NAME}")
# The script taken from that log, as `script_from_log` returns it: byte for byte the repository's
# train_gpt.py at commit 02bf097e (checked when this was written), 29,557 bytes.
SCRIPT_SHA256 = "dc277ccfcc6e10e9154b53e817cff9a8eb21173ccc1d4b5d5d3c1b4f1a4caa03"
DEFAULT_SCRIPT = REPO_ROOT / "runs" / "upstream" / RECORD_NAME / "train_gpt.py"  # runs/ is git-ignored
PATCHED_NAME = "train_gpt_patched.py"
# A line of only '=' ends the source in the log (the script prints 100 of them).
_RULE = re.compile(r"={20,}")


def script_from_log(text: str) -> str:
    """The source at the top of a record log: every line before the first line of only '='
    characters, trailing blank lines dropped, ending in one newline."""
    lines = text.split("\n")
    end = next((i for i, line in enumerate(lines) if _RULE.fullmatch(line.strip())), None)
    if end is None:
        raise ValueError("no line of '=' characters in the log: not a record log (its source is printed first, then such a line)")
    source = "\n".join(lines[:end]).rstrip("\n")
    if not source.strip():
        raise ValueError("the log's first '=' line has no source above it")
    return source + "\n"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fetch(out: Path = DEFAULT_SCRIPT, log: Path | None = None, url: str = LOG_URL, check: bool = True) -> Path:
    """Write the record's script, taken from its log (a local file, else downloaded from `url`),
    to `out` (atomically). With `check`, refuse a script whose SHA-256 is not the record's."""
    if log is not None:
        text = Path(log).read_text()
    else:
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - a fixed https URL by default
            text = response.read().decode()
    source = script_from_log(text)
    if check and sha256(source) != SCRIPT_SHA256:
        raise ValueError(f"the script in {log or url} has SHA-256 {sha256(source)}, not the Sub3Min record's "
                         f"{SCRIPT_SHA256}: a different log? (pass check=False / --no-check to keep it anyway)")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(source)
    partial.replace(out)
    return out


# ---------------------------------------------------------------------------------------------
# The changes a one-GPU run on the sample shards needs


@dataclass(frozen=True)
class Patch:
    """One change to the script: `pattern` (a multiline regex) must match exactly once; its match
    is replaced by `replacement` (re.sub syntax)."""

    name: str
    reason: str
    pattern: str
    replacement: str


@dataclass(frozen=True)
class RecordRun:
    """What the run does: steps, tokens per step (one GPU's share of the record's batch by
    default), validation tokens (a multiple of the script's 65,536-token sequence) and, when set,
    `val_loss_every` (0: the script's own "only at the end", no step-0 validation)."""

    steps: int
    batch_tokens: int = 65536
    val_tokens: int = 65536
    val_loss_every: int | None = None  # None: the script's 125


def _setting(name: str, value: str, reason: str) -> Patch:
    """Set one `Hyperparameters` attribute, keeping its indentation and trailing comment."""
    return Patch(f"{name} = {value}", reason,
                 rf"^(?P<indent>[ \t]+){name}(?P<eq>[ \t]*=[ \t]*)[^#\n]*?(?P<tail>[ \t]*#[^\n]*)?$",
                 rf"\g<indent>{name}\g<eq>{value}\g<tail>")


def record_patches(run: RecordRun) -> list[Patch]:
    """The changes, each with its reason. Nothing about the model, optimizer, schedule shapes or
    numerics changes: the LR cooldown and the attention window follow num_iterations, as the
    trainers' --steps do."""
    validation = [] if run.val_loss_every is None else [_setting(
        "val_loss_every", str(run.val_loss_every),
        "validation cadence; 0 is the script's own 'only at the end': the step-0 validation compiles a "
        "forward-only graph before the timed steps and measures nothing, the training step is unchanged")]
    return [
        _setting("train_files", '"shards/train/*.bin"',
                 "data path: the script globs relative to its working directory (Path.glob takes no absolute "
                 "pattern), where the run folder links the chosen training shards"),
        _setting("val_files", '"shards/val/*.bin"', "data path: as train_files, for the validation shards"),
        _setting("num_iterations", str(run.steps), "step count"),
        _setting("batch_size", str(run.batch_tokens),
                 "tokens per step: one GPU's share of the record's 8 x 65,536 (what the trainers' legs run); "
                 "unchanged, one process would accumulate 8 sequences per step"),
        _setting("val_tokens", str(run.val_tokens),
                 "validation tokens: the sample validation shard holds fewer than the record's 10,485,760"),
        *validation,
        Patch("iter(files) -> itertools.cycle(files)", "the sample shards hold fewer batches than the steps; the loader would "
              "end the run when they run out (the script's own comment names this change)",
              r"\biter\(files\)", "itertools.cycle(files)"),
        # Last, so that every line number above is the unpatched script's.
        Patch("import itertools", "for the cycling above", r"\A", "import itertools\n"),
    ]


def patch_script(source: str, patches: list[Patch], what: str = "the Sub3Min record's script") -> tuple[str, list[dict[str, object]]]:
    """Apply each patch in order; returns the new source and, per patch, its name (which says the
    change), reason and line number in the unpatched script (what the report lists). A pattern that matches
    zero or several times raises ValueError naming the patch: the script is not `what`."""
    applied = []
    for patch in patches:
        matches = list(re.finditer(patch.pattern, source, flags=re.MULTILINE))
        if len(matches) != 1:
            raise ValueError(f"patch {patch.name!r} matched {len(matches)} times (expected once): "
                             f"is this {what}?")
        match = matches[0]
        line = source.count("\n", 0, match.start()) + 1
        source = source[:match.start()] + match.expand(patch.replacement) + source[match.end():]
        applied.append({"name": patch.name, "reason": patch.reason, "line": line})
    return source, applied


# ---------------------------------------------------------------------------------------------
# The run folder


@dataclass(frozen=True)
class PreparedRun:
    """A run folder ready for `command` with `env` (cwd = folder)."""

    folder: Path
    script: Path
    command: list[str]
    env: dict[str, str]
    patches: list[dict[str, object]]
    environment_changes: list[str]


def _link_shards(pattern: str, into: Path) -> int:
    files = sorted(glob(pattern))
    if not files:
        raise FileNotFoundError(f"no shards match {pattern!r}")
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    for file in files:
        (into / Path(file).name).symlink_to(Path(file).resolve())
    return len(files)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def prepare_run(script: Path, folder: Path, run: RecordRun, train_files: str, val_files: str,
                python: str = sys.executable, base_env: dict[str, str] | None = None) -> PreparedRun:
    """Patch `script` into `folder`, link the shards under folder/shards/{train,val}, and build
    the command and the one-process torchrun environment. Raises FileNotFoundError when the
    script or the shards are missing, ValueError when a patch does not apply."""
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"no record script at {script}: run `python scripts/fetch_record.py` "
                                "(it writes runs/upstream/, which must travel with the run: see artifacts/gpu/README.md)")
    folder.mkdir(parents=True, exist_ok=True)
    source, applied = patch_script(script.read_text(), record_patches(run))
    compile(source, str(folder / PATCHED_NAME), "exec")  # a patch that broke the syntax fails here, not on the GPU
    (folder / PATCHED_NAME).write_text(source)
    _link_shards(train_files, folder / "shards" / "train")
    _link_shards(val_files, folder / "shards" / "val")
    env = dict(base_env if base_env is not None else os.environ, PYTHONUNBUFFERED="1",
               RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    changes = ["RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=<free port>: torchrun's "
               "environment for one process, set directly"]
    if shutil.which("nvidia-smi", path=env.get("PATH")) is None:
        # The script logs nvidia-smi's output; without the binary it would stop before training.
        stub = folder / "bin" / "nvidia-smi"
        stub.parent.mkdir(exist_ok=True)
        stub.write_text("#!/bin/sh\necho 'nvidia-smi is not installed on this machine'\n")
        stub.chmod(0o755)
        env["PATH"] = os.pathsep.join(filter(None, [str(stub.parent), env.get("PATH", "")]))
        changes.append("nvidia-smi stand-in on PATH (the machine has none; the script only logs its output)")
    return PreparedRun(folder, folder / PATCHED_NAME, [python, PATCHED_NAME], env, applied, changes)


_LOGFILE = re.compile(r"^(logs/[\w-]+\.txt)$", re.MULTILINE)


def log_file_text(stdout: str, folder: Path) -> str:
    """The record's own log file (source, environment, step lines, peak memory), named by the first
    stdout line; the part after the source only, so that its code lines are never parsed as
    results. Empty when the run wrote none."""
    match = _LOGFILE.search(stdout)
    path = folder / match.group(1) if match else None
    if path is None or not path.is_file():
        return ""
    text = path.read_text()
    rule = _RULE.search(text)
    return text[rule.end():] if rule else text
