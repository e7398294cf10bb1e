"""Small, learnable data, token layouts and models for tests of code built on jaxgpt (ours included),
and the child processes of multi-process tests.

Nothing here downloads anything: the tokens are synthetic, so tests can write their own shards.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from jaxgpt import lineage
from jaxgpt.config import ModelConfig, with_fields
from jaxgpt.presets import smoke_preset

SMALL_VOCAB = 512
SMALL_EOT = SMALL_VOCAB - 1
_PROGRESSION_MODULUS = 500  # token ids of the documents' bodies stay below the EOT id


def synthetic_tokens(num_tokens: int, seed: int, *, eot_id: int = SMALL_EOT) -> np.ndarray:
    """(num_tokens,) int64: documents that open with `eot_id` (as the record's shards do) and
    continue an arithmetic progression mod 500, 50..399 tokens long. A model learns them in a
    few steps, so a loss visibly falls even in a short test run."""
    rng = np.random.default_rng(seed)
    pieces, total = [], 0
    while total < num_tokens:
        length = int(rng.integers(50, 400))
        start, stride = int(rng.integers(0, _PROGRESSION_MODULUS)), int(rng.integers(1, 9))
        doc = np.concatenate([[eot_id], (start + stride * np.arange(length)) % _PROGRESSION_MODULUS])
        pieces.append(doc)
        total += doc.size
    return np.concatenate(pieces)[:num_tokens]


def small_model_config(**overrides) -> ModelConfig:
    """The smoke preset's model in fp32 over SMALL_VOCAB: 4 layers, 64 wide, one head, each
    per-layer pattern of the record in miniature (a value-embedding slot shared by the first and
    last layer, long windows at both ends, an attention-free layer, a U-net of 2 + 2 layers), with
    a window cap of 4 blocks: the runs built on it schedule windows of at most 512 tokens."""
    fields: dict[str, Any] = dict(vocab_size=SMALL_VOCAB, eot_id=SMALL_EOT, dtype_policy="fp32", max_window_blocks=4)
    return with_fields(smoke_preset().model, **{**fields, **overrides})


def read_tensorboard_scalars(folder: Path) -> dict[tuple[str, int], float]:
    """{(tag, step): value} of every scalar in the TensorBoard event files below `folder`, read
    without TensorBoard: each record is a little-endian u64 length, its masked CRC, an Event
    proto (tensorboardX's schema) and the proto's CRC."""
    from tensorboardX.proto import event_pb2

    scalars = {}
    for path in sorted(folder.rglob("events.out.tfevents.*")):
        raw, offset = path.read_bytes(), 0
        while offset < len(raw):
            (length,) = struct.unpack_from("<Q", raw, offset)
            event = event_pb2.Event.FromString(raw[offset + 12: offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                scalars[value.tag, event.step] = value.simple_value
    return scalars


def document_layout(name: str, seq_len: int, *, vocab_size: int, eot_id: int, seed: int = 0) -> np.ndarray:
    """(seq_len,) int32 tokens with a named document layout (EOT opens every document).

    "one_doc": no EOT at all; "record_like": EOT at 0 and random document lengths (mean ~300);
    "block_aligned": documents starting exactly on 128-token block edges, plus one inside a block;
    "many_short": a document every 37 tokens or so (many documents per block).
    """
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, eot_id, size=seq_len).astype(np.int32)
    tokens[tokens == eot_id] = 0
    if name == "one_doc":
        starts = []
    elif name == "record_like":
        starts = [0] + list(np.cumsum(rng.geometric(1 / 300, size=seq_len // 50)))
    elif name == "block_aligned":
        starts = [0, 128 * 3, 128 * 4, 128 * 4 + 61, 128 * 9]
    elif name == "many_short":
        starts = list(np.cumsum(rng.integers(1, 75, size=seq_len)))
    else:
        raise ValueError(f"unknown document layout {name!r}")
    starts = [s for s in starts if s < seq_len]
    tokens[starts] = eot_id
    return tokens


DOCUMENT_LAYOUTS = ("one_doc", "record_like", "block_aligned", "many_short")


def small_lineage_config(model: ModelConfig, **overrides) -> ModelConfig:
    """`small_model_config`'s 4-layer miniature with the lineage switches of `model` (a preset's
    ModelConfig): its per-layer patterns shrunk the same way (a chunked value table in the
    mirrored pattern (0, 1, 1, 0), tables in (0, -, -, 0) or none; an attention-free layer when
    the preset has one; one window for all layers when the preset has one), a window cap of 8
    blocks for every schedule, the blocked attention and an unchunked loss."""
    slots: tuple[int | None, ...]
    if lineage.model_variants(model).value_embed_chunks and model.num_value_embeds:
        slots = (0, 1, 1, 0)
    elif model.num_value_embeds:
        slots = (0, None, None, 0)
    else:
        slots = (None,) * 4
    one_window = set(model.long_window_layers) == set(range(model.num_layers))
    fields: dict[str, Any] = {name: getattr(model, name) for name in (
        "lineage", "attn_scale", "logit_cap", "logit_cap_temperature", "qkv_layout")}
    fields.update(value_embed_slots=slots, attention_free_layers=(2,) if model.attention_free_layers else (),
                  long_window_layers=(0, 1, 2, 3) if one_window else (0, 3), max_window_blocks=8,
                  attention_backend="blocked", loss_chunk_tokens=None)
    fields.update(overrides)
    return small_model_config(**fields)


def record_like_attention_inputs(seq_len: int, rng: np.random.Generator):
    """Attention inputs at the record's head shape for kernel tests: (document ids (1, T) int32 of
    ~1000-token documents, q, k, v (1, T, 6, 128) bf16 standard normal)."""
    import jax.numpy as jnp

    from jaxgpt import masks

    tokens = rng.integers(0, 50000, size=(1, seq_len))
    tokens[0, rng.choice(seq_len, seq_len // 1000, replace=False)] = 50256
    q, k, v = (jnp.asarray(rng.standard_normal((1, seq_len, 6, 128)), jnp.bfloat16) for _ in range(3))
    return masks.document_ids(jnp.asarray(tokens)), q, k, v


# Child processes of multi-process tests (either trainer) ------------------------------------------


def free_port() -> int:
    """A loopback TCP port free at the time of the call (for a coordinator or a rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_children(commands: list[list[str]], envs: list[dict[str, str]], logs: list[Path],
                   cwd: Path) -> list[subprocess.Popen]:
    """One child per command, with its environment; its stdout and stderr go to its log file."""
    children = []
    for command, env, log_path in zip(commands, envs, logs, strict=True):
        with open(log_path, "w") as log:
            children.append(subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT))
    return children


def kill_children(children: list[subprocess.Popen]) -> None:
    """SIGKILL every child still running and reap it."""
    for child in children:
        if child.poll() is None:
            child.kill()
            child.wait()


def log_tail(log: Path, chars: int = 3000) -> str:
    """The last `chars` characters of a child's log (what a failure message shows)."""
    return log.read_text()[-chars:]


def wait_children(children: list[subprocess.Popen], logs: list[Path], timeout_s: float,
                  name: str = "process") -> list[int]:
    """The children's exit codes, in order. All share one deadline: when a child still runs
    `timeout_s` after the call, every child is killed and AssertionError names it with its log's
    tail (a hang must not hang CI). The children are reaped however this returns."""
    deadline = time.monotonic() + timeout_s
    try:
        for index, (child, log) in enumerate(zip(children, logs, strict=True)):
            try:
                child.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name} {index} still running after {timeout_s} s:\n{log_tail(log)}") from None
    finally:
        kill_children(children)
    return [child.returncode for child in children]


class SmallDisk:
    """A real file system that fills: a tmpfs of `size` bytes mounted on `folder` (tests of a
    full disk: the kernel's own ENOSPC, short writes included). Mounting needs root (CAP_SYS_ADMIN):
    `mount` returns the reason it could not, for the test to skip with."""

    def __init__(self, folder: Path, size: int) -> None:
        self.folder, self.size, self.mounted = folder, size, False
        self._fillers = 0

    def mount(self) -> str | None:
        """Mount it; None, or why it could not be mounted."""
        import os  # noqa: PLC0415 - only this helper needs it
        import shutil  # noqa: PLC0415

        if os.geteuid() != 0:
            return "mounting a tmpfs needs root (CAP_SYS_ADMIN)"
        if shutil.which("mount") is None:
            return "no mount command"
        self.folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size}", "tmpfs", str(self.folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
        self.mounted = True
        return None

    def unmount(self) -> None:
        if self.mounted and subprocess.run(["umount", str(self.folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(self.folder)], check=True)  # a file still open: detach it
        self.mounted = False

    def free(self) -> int:
        """Bytes still free (the kernel's count: whole pages)."""
        import os  # noqa: PLC0415

        stats = os.statvfs(self.folder)
        return stats.f_bavail * stats.f_frsize

    def fill(self, leave: int = 0) -> Path:
        """Write a filler file that leaves `leave` bytes free (0: the disk is full); returns it
        (delete it to give the space back)."""
        self._fillers += 1
        filler = self.folder / f"filler-{self._fillers}"
        chunk = b"\0" * 2**20
        with open(filler, "wb", buffering=0) as file:
            try:
                while (room := self.free() - leave) > 0:
                    file.write(chunk[:room])
            except OSError:  # full: the kernel's rounding to pages
                pass
        return filler
