"""The compile caches of a GPU lease, kept for the next one: one cache root that every step of the
device plan points its compilers at, packed into one archive under a size cap (the repository,
which keeps it, is the only thing that outlives a lease: artifacts/gpu/README.md, "Compile
caches"), and unpacked into the next lease's root before its first step.

A root holds three folders, in the archive's priority order (`FOLDERS`): TorchInductor's cache
(FX graph entries, with their Triton kernels bundled, AOTAutograd entries, autotuning results,
generated code: the most compile time saved per byte), Triton's kernels (one folder per kernel:
its `__grp__*.json` group file, cubin, PTX, ...), JAX's persistent compilation cache (the
trainer's `JAXGPT_COMPILE_CACHE`, jaxgpt/run/compile_cache.py: `<key>-cache` entries beside
their `<key>-atime` companions).

The archive is one gzip stream of a tar whose first member is MANIFEST.json (when, from which
commit and on what the caches were built, their counts, what did not fit). A unit of packing
(`units`) is a leaf folder (one Triton kernel, one FX graph entry) or one JAX entry with its
companion, packed whole or not at all, so the next lease never finds half an entry. Like any
compilation cache, an archive is trusted code: use only the project's own; `unpack` still
refuses any member that could land outside its root.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import tarfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

FOLDERS = ("inductor", "triton", "jax")
MANIFEST = "MANIFEST.json"
MANIFEST_KEYS = ("gpu", "python", "jax", "torch", "triton", "cuda")  # a machine's keys kept in the manifest
VERSION_KEYS = ("gpu", "torch", "triton", "jax", "python")  # those whose change makes the caches miss
JAX_SUFFIXES = ("-cache", "-atime")  # jax/_src/lru_cache.py: an entry's file and its access time
# 6, not tarfile's 9: the plan packs after every compiling step, on the lease's clock, and 9 takes
# about twice as long for about 1% less.
COMPRESS_LEVEL = 6
# An archive this big once unpacked is refused before anything is written (a GPU machine's disk is
# 64 GiB; the caches of the record's compile are tens of MiB).
MAX_UNPACKED_BYTES = 2**30
# gzip's 10-byte header: deflate, no flags, no name, mtime 0 (the same caches give the same bytes), OS unknown.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
GZIP_TRAILER_BYTES = 8  # CRC-32 and size


class CacheArchiveError(ValueError):
    """An archive that cannot be used as compile caches (the message names it and why)."""


@dataclass(frozen=True)
class Unit:
    """What is packed whole or not at all: `name` (relative to the root: a leaf folder, or a JAX
    entry's key) and its regular files."""

    name: str
    files: tuple[Path, ...]


def environment(root: Path) -> dict[str, str]:
    """The variables that point a child's compilers at `root`. Checked in torch 2.13's source:
    torch/_inductor/runtime/cache_dir_utils.py (`cache_dir` reads TORCHINDUCTOR_CACHE_DIR;
    `triton_cache_dir` reads TRITON_CACHE_DIR before its default <inductor>/triton/<device>),
    torch/_inductor/config.py (`fx_graph_cache`: env_name_force TORCHINDUCTOR_FX_GRAPH_CACHE),
    torch/_functorch/config.py (`enable_autograd_cache`: env_name_force TORCHINDUCTOR_AUTOGRAD_CACHE),
    torch/utils/_config_module.py ("1" forces such a flag on). Both caches are on by default; they
    are forced here so that no inherited variable turns them off."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"), "TRITON_CACHE_DIR": str(root / "triton"),
            "JAXGPT_COMPILE_CACHE": str(root / "jax"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
            "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}


def _folders(folder: Path) -> Iterator[tuple[Path, list[str]]]:
    """`folder` and every folder under it (symlinks not followed), each with the names of the
    regular files it holds directly, sorted; a folder that vanishes or cannot be read holds none."""
    try:
        with os.scandir(folder) as listing:
            found = list(listing)
    except OSError:
        return
    files, folders = [], []
    for entry in found:
        try:  # DirEntry's type comes from the listing (no stat); it may still fail on a vanished entry
            if entry.is_file(follow_symlinks=False):
                files.append(entry.name)
            elif entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
        except OSError:
            continue
    yield folder, sorted(files)
    for name in sorted(folders):
        yield from _folders(folder / name)


def counts(root: Path) -> dict[str, int]:
    """How far a compile got, cheap enough to read every few seconds: Triton kernels built (cubins
    anywhere under `root`), Inductor kernels tuned (`.best_config` files), FX graph cache entries
    (files under inductor/fxgraph), JAX programs (files under jax/ but their `-atime` companions).
    Absent folders count 0."""
    found = dict.fromkeys(("triton_kernels", "inductor_tuned", "inductor_graphs", "jax_programs"), 0)
    for folder, names in _folders(root):
        parts = folder.relative_to(root).parts
        found["triton_kernels"] += sum(name.endswith(".cubin") for name in names)
        found["inductor_tuned"] += sum(name.endswith(".best_config") for name in names)
        found["inductor_graphs"] += len(names) if parts[:2] == ("inductor", "fxgraph") else 0
        found["jax_programs"] += sum(not name.endswith("-atime") for name in names) if parts[:1] == ("jax",) else 0
    return found


def _entry_key(name: str) -> str:
    """A file lying directly in a cache folder grouped by its entry: a JAX file's name less its suffix."""
    for suffix in JAX_SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def units(root: Path) -> list[Unit]:
    """The units of packing, in FOLDERS order and sorted by name within each: every folder under
    one that holds files directly (with those files, not its sub-folders'), and the files lying
    directly in a cache folder grouped by entry (JAX's flat folder: an entry beside its companion)."""
    found: list[Unit] = []
    for top in FOLDERS:
        grouped: dict[str, list[Path]] = {}
        for folder, names in _folders(root / top):
            if folder == root / top:
                for name in names:
                    grouped.setdefault(f"{top}/{_entry_key(name)}", []).append(folder / name)
            elif names:
                grouped[folder.relative_to(root).as_posix()] = [folder / name for name in names]
        found += [Unit(name, tuple(files)) for name, files in sorted(grouped.items())]
    return found


def manifest(commit: str | None, machine: dict[str, Any]) -> dict[str, Any]:
    """When, from which commit and on what the caches were built (`machine`: a preflight's or
    jaxgpt_tools.common.machine.describe()'s keys; those absent read None)."""
    return {"created_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "commit": commit,
            **{key: machine.get(key) for key in MANIFEST_KEYS}}


def _deflated_at_most(raw: int) -> int:
    """A bound on the deflate bytes of `raw` bytes, a sync flush included: looser than zlib's own
    (deflateBound: raw + raw/4096 + raw/16384 + 13), so that the cap holds for any content."""
    return raw + (raw >> 9) + 256


def _padded(size: int) -> int:
    """A tar member's data bytes: `size` rounded up to tar's 512-byte blocks."""
    return -(-size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE


# The body's end: tar's two zero blocks and tarfile's padding to a full record, then gzip's header
# and trailer (the body's deflate stream is finished after the last unit is in).
TAIL_BYTES = _deflated_at_most(2 * tarfile.BLOCKSIZE + tarfile.RECORDSIZE) + len(GZIP_HEADER) + GZIP_TRAILER_BYTES


class _Deflater:
    """A file object for tarfile: what is written to it is deflated (raw, no gzip framing) into
    `out`, with the bytes written since the last sync flush counted, so that the compressed size
    of everything written is known within `_deflated_at_most(pending)`."""

    def __init__(self) -> None:
        self.compressor = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
        self.out = bytearray()
        self.written = 0
        self.pending = 0

    def write(self, data: bytes) -> int:
        self.out += self.compressor.compress(data)
        self.written += len(data)
        self.pending += len(data)
        return len(data)

    def tell(self) -> int:
        return self.written

    def sync(self) -> None:
        """Everything written so far out, ending on a byte boundary (deflate's Z_SYNC_FLUSH)."""
        if self.pending:
            self.out += self.compressor.flush(zlib.Z_SYNC_FLUSH)
            self.pending = 0

    def finish(self) -> bytes:
        self.out += self.compressor.flush(zlib.Z_FINISH)
        return bytes(self.out)


def _members(root: Path, unit: Unit) -> list[tuple[tarfile.TarInfo, bytes]] | None:
    """The unit's files as tar members, read once (their size is what was read); symlinks and
    other non-regular files skipped; None when a file vanished or cannot be read (the unit is then
    left out, never packed in part). No owner names: the archive is committed."""
    members = []
    for path in unit.files:
        try:
            status = path.lstat()
            if not stat.S_ISREG(status.st_mode):
                continue
            data = path.read_bytes()
        except OSError:
            return None
        info = tarfile.TarInfo(path.relative_to(root).as_posix())
        info.size, info.mtime, info.mode = len(data), int(status.st_mtime), stat.S_IMODE(status.st_mode)
        members.append((info, data))
    return members


def _manifest_member(stated: dict[str, Any]) -> bytes:
    """MANIFEST.json as tar blocks (header, data, padding), without tar's end blocks: the units follow."""
    data = json.dumps(stated, indent=1, default=str).encode()
    info = tarfile.TarInfo(MANIFEST)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    return info.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape") + data.ljust(_padded(len(data)), b"\0")


def _crc_after(deflated: bytes, crc: int) -> tuple[int, int]:
    """gzip's CRC-32 continued from `crc` over what `deflated` (a finished raw deflate stream)
    inflates to, and that size; in pieces, so that memory stays small."""
    inflater, pending, size = zlib.decompressobj(-zlib.MAX_WBITS), deflated, 0
    while pending:
        data = inflater.decompress(pending, 1 << 22)
        pending = inflater.unconsumed_tail
        crc, size = zlib.crc32(data, crc), size + len(data)
    return crc, size


def pack(root: Path, target: Path, cap_bytes: int, manifest: dict[str, Any]) -> dict[str, Any]:
    """`root`'s FOLDERS as a gzipped tar at `target`, at most `cap_bytes`: MANIFEST.json first
    (`manifest`, the root's `counts`, the units left out), then whole units in FOLDERS order while
    the compressed bytes so far plus a bound on the next unit's fit; a unit that does not fit is
    listed and the next ones still tried. Written beside `target` and renamed over it, so a kill
    never leaves half an archive. An empty or absent root gives an archive holding the manifest.
    Returns {"bytes", "units", "files", "left_out", "cap_bytes"}."""
    found = units(root)
    stated = {**manifest, "counts": counts(root)}
    # The manifest is written first but known last (what was left out): its room is reserved at
    # its largest, every unit left out (and counts no shorter than the real ones).
    largest = {**stated, "units": len(found), "files": sum(len(unit.files) for unit in found),
               "left_out": [unit.name for unit in found]}
    budget = cap_bytes - TAIL_BYTES - _deflated_at_most(len(_manifest_member(largest)))
    body = _Deflater()
    packed, files, left_out = 0, 0, []
    # _Deflater is write-only: tarfile's "w" mode only writes and tells (its stub wants read and seek too).
    with tarfile.open(fileobj=body, mode="w", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for unit in found:
            members = _members(root, unit)
            if members is None:
                left_out.append(unit.name)
                continue
            if not members:  # symlinks or special files only: nothing to keep
                continue
            raw = sum(len(info.tobuf(tar.format, tar.encoding, tar.errors)) + _padded(info.size) for info, _ in members)
            if len(body.out) + _deflated_at_most(body.pending + raw) > budget:
                body.sync()  # then the compressed size so far is exact; flushed only near the cap
                if len(body.out) + _deflated_at_most(raw) > budget:
                    left_out.append(unit.name)
                    continue
            for info, data in members:
                tar.addfile(info, BytesIO(data))
            packed, files = packed + 1, files + len(members)
    # One gzip stream: the manifest's deflate blocks, ended on a byte boundary and not final, then
    # the body's (its back-references stay within itself); the CRC runs over both.
    head = _manifest_member({**stated, "units": packed, "files": files, "left_out": left_out})
    compressor = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    head_deflated = compressor.compress(head) + compressor.flush(zlib.Z_SYNC_FLUSH)
    body_deflated = body.finish()
    crc, size = _crc_after(body_deflated, zlib.crc32(head))
    staged = target.with_name(f".{target.name}.partial")
    try:
        with open(staged, "wb") as out:
            out.write(GZIP_HEADER + head_deflated)
            out.write(body_deflated)
            out.write(struct.pack("<II", crc, (len(head) + size) & 0xFFFFFFFF))
        staged.replace(target)
    finally:
        staged.unlink(missing_ok=True)
    return {"bytes": target.stat().st_size, "units": packed, "files": files, "left_out": left_out,
            "cap_bytes": cap_bytes}


def _problem(member: tarfile.TarInfo) -> str | None:
    """Why `member` may not be unpacked into a cache root (None: it may)."""
    name = member.name
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "an absolute path"
    if ".." in Path(name).parts:
        return "a '..' path"
    if not (member.isreg() or member.isdir()):
        return "a link" if member.issym() or member.islnk() else "a device, FIFO or other special file"
    if name != MANIFEST and Path(name).parts[0] not in FOLDERS:
        return f"outside {', '.join(f'{folder}/' for folder in FOLDERS)}"
    return None


def _open(archive: Path) -> tarfile.TarFile:
    """`archive` opened as a gzipped tar; CacheArchiveError when it is not one or cannot be read."""
    try:
        return tarfile.open(archive, "r:gz")
    except (OSError, EOFError, zlib.error, tarfile.TarError) as error:
        raise CacheArchiveError(f"compile caches {archive}: not a readable gzipped tar ({error})") from None


def _checked(archive: Path, opened: tarfile.TarFile) -> tuple[list[tarfile.TarInfo], dict[str, Any]]:
    """The members, each checked (`_problem`), and the manifest, nothing extracted; CacheArchiveError
    naming the archive and the first problem."""
    try:
        members = opened.getmembers()
    except (OSError, EOFError, zlib.error, tarfile.TarError) as error:
        raise CacheArchiveError(f"compile caches {archive}: damaged ({error})") from None
    for member in members:
        if (problem := _problem(member)) is not None:
            raise CacheArchiveError(f"compile caches {archive}: unsafe member {member.name!r} ({problem}): "
                                    "refused, nothing extracted")
    unpacked = sum(member.size for member in members)
    if unpacked > MAX_UNPACKED_BYTES:
        raise CacheArchiveError(f"compile caches {archive}: {unpacked / 2**20:.0f} MiB once unpacked, over the "
                                f"{MAX_UNPACKED_BYTES / 2**20:.0f} MiB allowed: refused, nothing extracted")
    found = next((member for member in members if member.name == MANIFEST and member.isreg()), None)
    if found is None:
        raise CacheArchiveError(f"compile caches {archive}: no {MANIFEST} (not an archive the device plan wrote)")
    try:
        stream = opened.extractfile(found)
        stated = json.loads(stream.read()) if stream is not None else None
    except (ValueError, OSError, EOFError, zlib.error, tarfile.TarError):
        stated = None
    if not isinstance(stated, dict):
        raise CacheArchiveError(f"compile caches {archive}: {MANIFEST} is not a JSON object")
    return members, stated


def check(archive: Path) -> dict[str, Any]:
    """The check before a lease, extracting nothing: readable, every member safe, a manifest.
    Returns {"bytes", "members", "files", "unpacked_bytes", "manifest", "versions"} (`versions`:
    the manifest's MANIFEST_KEYS); CacheArchiveError otherwise."""
    with _open(archive) as opened:
        members, stated = _checked(archive, opened)
    return {"bytes": archive.stat().st_size, "members": len(members),
            "files": sum(member.isreg() and member.name != MANIFEST for member in members),
            "unpacked_bytes": sum(member.size for member in members), "manifest": stated,
            "versions": {key: stated.get(key) for key in MANIFEST_KEYS}}


def unpack(archive: Path, root: Path) -> dict[str, Any]:
    """Extract `archive`'s caches into `root` (MANIFEST.json is read, not written) and return its
    manifest. Every member is checked before anything is written (as `check`), and tarfile's
    "data" filter guards the extraction besides (it also refuses a path that a symlink already in
    `root` would lead outside it); CacheArchiveError naming the archive and the problem."""
    with _open(archive) as opened:
        members, stated = _checked(archive, opened)
        root.mkdir(parents=True, exist_ok=True)
        try:
            opened.extractall(root, members=[m for m in members if m.name != MANIFEST], filter="data")
        except tarfile.FilterError as error:
            raise CacheArchiveError(f"compile caches {archive}: refused by tarfile's data filter ({error})") from None
        except (EOFError, zlib.error, tarfile.ReadError) as error:
            raise CacheArchiveError(f"compile caches {archive}: damaged ({error})") from None
    return stated


def describe_mismatch(manifest: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    """One line per version (VERSION_KEYS) the caches were built with that this machine does not
    have, where the machine's is known: such caches simply miss (a compiler keys its entries on
    its version and the device), which is worth saying, not an error."""
    return [f"the caches were built with {key} {manifest.get(key)}, this machine has {machine.get(key)}"
            for key in VERSION_KEYS if machine.get(key) is not None and manifest.get(key) != machine.get(key)]
