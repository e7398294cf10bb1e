"""The compile caches of a GPU lease, kept for the next one: one cache root that every step of the
device plan points its compilers at, packed into one archive under a size cap (the repository,
which keeps it, is the only thing that outlives a lease: artifacts/gpu/README.md, "Compile
caches"), and unpacked into the next lease's root before its first step.

A root holds three folders, in the archive's priority order (`FOLDERS`): TorchInductor's cache
(FX graphs with their Triton kernels bundled, AOTAutograd entries, autotuning results: the most
saved per byte), Triton's kernels (one folder per kernel: its group file, cubin, PTX, ...), JAX's
persistent compilation cache (the trainer's `JAXGPT_COMPILE_CACHE`, jaxgpt/run/compile_cache.py).
An entry is a leaf folder, or a file directly under one of the three, and is packed whole or not
at all, so the next lease never finds half a kernel. Like any compilation cache, an archive is
trusted code: use only the project's own.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FOLDERS = ("inductor", "triton", "jax")
MANIFEST = "MANIFEST.json"
VERSION_KEYS = ("gpu", "torch", "triton", "jax", "python", "cuda")
# A tar member's header and padding, at most: counted beside each file's bytes so that the raw
# size bounds the gzipped one.
TAR_OVERHEAD = 1024


class CacheArchiveError(ValueError):
    """An archive that cannot be used as compile caches (the message names it and why)."""


def environment(root: Path) -> dict[str, str]:
    """The variables that point a child's compilers at `root`. Read in torch 2.13's source:
    torch/_inductor/runtime/cache_dir_utils.py (TORCHINDUCTOR_CACHE_DIR, and TRITON_CACHE_DIR
    before Inductor's own default under it), torch/_inductor/config.py (TORCHINDUCTOR_FX_GRAPH_CACHE
    forces the FX graph cache), torch/_functorch/config.py (TORCHINDUCTOR_AUTOGRAD_CACHE); both
    caches are on by default, set here so that no inherited variable turns them off."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"), "TRITON_CACHE_DIR": str(root / "triton"),
            "JAXGPT_COMPILE_CACHE": str(root / "jax"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
            "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}


def _files(folder: Path) -> Iterator[Path]:
    """Regular files under `folder` (none when it is absent or vanishes mid-walk)."""
    for dirpath, _, names in os.walk(folder):
        for name in names:
            path = Path(dirpath) / name
            if not path.is_symlink() and path.is_file():
                yield path


def counts(root: Path) -> dict[str, int]:
    """How far a compile got: Triton kernels built (cubins anywhere under `root`), Inductor kernels
    tuned (`.best_config` files), FX graph entries, JAX programs (not their `-atime` companions)."""
    found = {"triton_kernels": 0, "inductor_tuned": 0, "inductor_graphs": 0, "jax_programs": 0}
    for path in _files(root):
        parts = path.relative_to(root).parts
        found["triton_kernels"] += path.suffix == ".cubin"
        found["inductor_tuned"] += path.suffix == ".best_config"
        found["inductor_graphs"] += parts[:2] == ("inductor", "fxgraph")
        found["jax_programs"] += parts[0] == "jax" and not path.name.endswith("-atime")
    return found


def entries(root: Path) -> list[tuple[str, list[Path]]]:
    """The units of packing, in FOLDERS order and sorted within each: every folder that holds files
    directly (its files), and every file lying directly in a cache folder (alone)."""
    units: list[tuple[str, list[Path]]] = []
    for folder in FOLDERS:
        top = root / folder
        by_parent: dict[Path, list[Path]] = {}
        for path in _files(top):
            key = path if path.parent == top else path.parent
            by_parent.setdefault(key, []).append(path)
        units += [(str(key.relative_to(root)), sorted(files)) for key, files in sorted(by_parent.items())]
    return units


def manifest(commit: str | None, machine: dict[str, Any]) -> dict[str, Any]:
    """When, from which commit and on what the caches were built (`machine`: a preflight's or
    jaxgpt_tools.common.machine.describe()'s keys)."""
    return {"created_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "commit": commit,
            **{key: machine.get(key) for key in VERSION_KEYS}}


def pack(root: Path, target: Path, cap_bytes: int, manifest: dict[str, Any]) -> dict[str, Any]:
    """`root` as a gzipped tar at `target` (written beside it and renamed over it), its first member
    MANIFEST.json; whole entries (`entries`) while their raw bytes and tar overhead fit `cap_bytes`
    (the gzipped archive is then smaller), the rest listed. Returns what was packed."""
    budget = cap_bytes - 64 * 1024  # the manifest and gzip's own framing
    packed, files, left_out, used = [], 0, [], 0
    for name, unit in entries(root):
        size = sum(path.stat().st_size + TAR_OVERHEAD for path in unit)
        if used + size > budget:
            left_out.append(name)
            continue
        used += size
        packed.append(unit)
        files += len(unit)
    stated = {**manifest, "counts": counts(root), "left_out": left_out}
    staged = target.with_name(f".{target.name}.partial")
    with tarfile.open(staged, "w:gz") as archive:
        data = json.dumps(stated, indent=1, default=str).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime = len(data), int(time.time())
        archive.addfile(info, io.BytesIO(data))
        for unit in packed:
            for path in unit:
                archive.add(path, arcname=str(path.relative_to(root)), recursive=False)
    staged.replace(target)
    return {"bytes": target.stat().st_size, "units": len(packed), "files": files, "left_out": left_out,
            "cap_bytes": cap_bytes}


def _open(archive: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(archive, "r:gz")
    except (OSError, tarfile.TarError) as error:
        raise CacheArchiveError(f"compile caches {archive}: not a readable gzipped tar ({error})") from None


def _checked_members(archive: Path, opened: tarfile.TarFile) -> tuple[list[tarfile.TarInfo], dict[str, Any]]:
    """The members, each a plain file or folder with a relative path inside the root, and the
    manifest; CacheArchiveError naming the first that is not."""
    try:
        members = opened.getmembers()
    except (OSError, tarfile.TarError, EOFError) as error:
        raise CacheArchiveError(f"compile caches {archive}: damaged ({error})") from None
    for member in members:
        parts = Path(member.name).parts
        if member.name.startswith(("/", "\\")) or ".." in parts or not (member.isfile() or member.isdir()):
            raise CacheArchiveError(f"compile caches {archive}: unsafe member {member.name!r} (an absolute path, "
                                    "'..', a link or a device): refused, nothing extracted")
    manifest_member = next((m for m in members if m.name == MANIFEST and m.isfile()), None)
    if manifest_member is None:
        raise CacheArchiveError(f"compile caches {archive}: no {MANIFEST} (not an archive the device plan wrote)")
    stream = opened.extractfile(manifest_member)
    try:
        stated = json.loads(stream.read()) if stream is not None else None
    except ValueError:
        stated = None
    if not isinstance(stated, dict):
        raise CacheArchiveError(f"compile caches {archive}: {MANIFEST} is not a JSON object")
    return members, stated


def check(archive: Path) -> dict[str, Any]:
    """Readable, safe, with a manifest (extracting nothing): {"bytes", "members", "manifest"}."""
    with _open(archive) as opened:
        members, stated = _checked_members(archive, opened)
    return {"bytes": archive.stat().st_size, "members": len(members), "manifest": stated}


def unpack(archive: Path, root: Path) -> dict[str, Any]:
    """Extract `archive` into `root` (checked first, as `check`; tarfile's "data" filter besides);
    returns its manifest."""
    root.mkdir(parents=True, exist_ok=True)
    with _open(archive) as opened:
        members, stated = _checked_members(archive, opened)
        opened.extractall(root, members=[m for m in members if m.name != MANIFEST], filter="data")
    return stated


def describe_mismatch(stated: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    """One line per version the caches were built with that this machine does not have (such
    caches only miss: worth saying, not an error)."""
    return [f"the caches were built with {key} {stated.get(key)}, this machine has {machine.get(key)}"
            for key in VERSION_KEYS if stated.get(key) != machine.get(key) and machine.get(key) is not None]
