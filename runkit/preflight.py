"""What both trainers check before their first step that involves no framework: every folder a
run writes to exists and takes a file (each trainer's run.preflight lists its own places), and
every shard a run reads matches the SHA-256 its folder's meta.json records."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path


def check_writable(directory: Path, what: str) -> None:
    """Create `directory` if needed and prove a file can be written there; ValueError otherwise
    (checked before the first step, so no trained state is lost to a bad path at the end)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-test-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise ValueError(f"{what} {directory} is not writable: {error.strerror or error}") from None


# --------------------------------------------------------------------------------------
# Shards against the digests their folder's meta.json records (docs/DATA.md, "Shards checked
# against meta.json"). Why remembered: a full SHA-256 of the record's 103 shards of 200 MB
# costs ~40 s; a file whose identity (device, inode, size, mtime_ns, ctime_ns: any write or
# os.utime moves ctime) matches the one hashed before is not read again.

SHARD_META = "meta.json"  # jaxgpt.data.META_FILE: the folder's build record (jaxgpt.corpus.build.shard_meta)
DIGEST_CACHE_FILE = "verified_shards.json"
SAMPLE_REBUILD = "python scripts/build_sample_data.py --force"


class ShardDigestError(ValueError):
    """A shard whose bytes differ from the SHA-256 its folder's meta.json records."""


def shard_digest_cache() -> Path:
    """Where the digests of hashed shards are remembered: $XDG_CACHE_HOME (else ~/.cache)
    /jaxgpt/verified_shards.json, one file per user, so that a read-only shard folder is no
    different from any other."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "jaxgpt" / DIGEST_CACHE_FILE


def file_identity(path: Path) -> list[int]:
    """What changes when a file's bytes may have: device, inode, size, mtime and ctime (ns)."""
    stat = os.stat(path)
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def sha256_file(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


class DigestCache:
    """{key: {"identity": [...], "sha256": hex}}: a digest computed over files whose identity
    was `identity`; read back only while the identity is unchanged. Damaged or unreadable:
    empty (everything is hashed again)."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries = self._read() if path is not None else {}
        self.changed: dict[str, dict] = {}

    def _read(self) -> dict:
        assert self.path is not None
        try:
            entries = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        return entries if isinstance(entries, dict) else {}

    def digest(self, key: str, identity: list) -> str | None:
        entry = self.entries.get(key)
        if isinstance(entry, dict) and entry.get("identity") == identity and isinstance(entry.get("sha256"), str):
            return entry["sha256"]
        return None

    def remember(self, key: str, identity: list, digest: str) -> None:
        self.entries[key] = self.changed[key] = {"identity": identity, "sha256": digest}

    def save(self) -> str | None:
        """Write the new entries (merged into the file as it is now, entries of files gone
        dropped; a temp file renamed into place); a note when the place is not writable."""
        if not self.changed or self.path is None:
            return None
        entries = {key: entry for key, entry in {**self._read(), **self.changed}.items()
                   if os.path.exists(key.split("#")[0])}
        temp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temp.write_text(json.dumps(entries, indent=0), encoding="utf-8")
            os.replace(temp, self.path)
        except OSError as error:
            with contextlib.suppress(OSError):
                temp.unlink(missing_ok=True)
            return (f"note: cannot remember the shards' digests in {self.path} ({error.strerror or error}); "
                    "the next start hashes them again")
        return None


def _meta_of(folder: Path) -> dict | None:
    path = folder / SHARD_META
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{path}: not valid JSON ({type(error).__name__}); rebuild the shard folder or restore this "
                         "file") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: not a JSON object; rebuild the shard folder or restore this file")
    return meta


def _remedy(folder: Path, shard: str) -> str:
    rebuild = (SAMPLE_REBUILD + (f" --out {folder}" if folder != Path("data/sample") else "")
               if shard.startswith("sample_") else f"scripts/make_shards.py SOURCE --out {folder} ... --overwrite")
    return f"rebuild it ({rebuild}) or download it again"


def check_shard_digests(shards: Sequence[Path | str], *, full: bool = False,
                        cache_file: Path | None = None) -> list[str]:
    """Refuse (ShardDigestError, one line naming the shard) a shard whose SHA-256 differs from
    the one its folder's meta.json records; return notes on what could not be checked (a shard
    meta.json does not name, digests that could not be remembered). A folder without meta.json
    is used as it is, without a note here (jaxgpt's loader notes a folder without its marker).

    Each shard is hashed once per file identity (remembered in `cache_file`, by default
    `shard_digest_cache()`); `full` (--verify-shards) hashes every one regardless. A meta.json
    written before per-shard digests holds one SHA-256 over all its shards (names and bytes in
    order): those are checked together, and a mismatch names the folder."""
    cache = DigestCache(cache_file if cache_file is not None else shard_digest_cache())
    notes: list[str] = []
    folders: dict[Path, list[Path]] = {}
    for shard in shards:
        folders.setdefault(Path(shard).parent, []).append(Path(shard))
    for folder, files in folders.items():
        meta = _meta_of(folder)
        if meta is None:  # shards made elsewhere (the record's FineWeb download): nothing to check against
            continue
        per_shard = meta.get("shard_sha256")
        if isinstance(per_shard, dict):
            for file in dict.fromkeys(files):
                expected = per_shard.get(file.name)
                if not isinstance(expected, str):
                    notes.append(f"note: {file} is not among the shards {folder / SHARD_META} records; not checked")
                    continue
                key, identity = str(file.resolve()), file_identity(file)
                actual = None if full else cache.digest(key, identity)
                if actual is None:
                    actual = sha256_file(file)
                    cache.remember(key, identity, actual)
                if actual != expected:
                    _save_then_raise(cache, notes, ShardDigestError(
                        f"{file}: its bytes differ from the SHA-256 that {folder / SHARD_META} records for it "
                        f"(now {actual[:12]}..., recorded {expected[:12]}...), so it would train on other tokens; "
                        + _remedy(folder, file.name)))
        elif isinstance(meta.get("sha256"), str) and isinstance(meta.get("shards"), dict):
            notes += _check_all_together(folder, meta, files, cache, full)
        else:
            notes.append(f"note: {folder / SHARD_META} records no SHA-256; its shards are not checked")
    if (note := cache.save()) is not None:
        notes.append(note)
    return notes


def _check_all_together(folder: Path, meta: dict, files: list[Path], cache: DigestCache, full: bool) -> list[str]:
    """An older meta.json's one SHA-256 over every shard it names, names and bytes in order."""
    named = [folder / str(name) for name in meta["shards"]]
    unnamed = [file for file in files if file not in named]
    notes = [f"note: {file} is not among the shards {folder / SHARD_META} records; not checked" for file in unnamed]
    if missing := [path for path in named if not path.is_file()]:
        return notes + [f"note: {missing[0]}, recorded in {folder / SHARD_META}, is missing, so the one SHA-256 it "
                        "records over all shards cannot be checked"]
    key = f"{folder.resolve() / SHARD_META}#sha256"
    identity = [file_identity(path) for path in named]
    actual = None if full else cache.digest(key, identity)
    if actual is None:
        digest = hashlib.sha256()
        for path in named:
            digest.update(path.name.encode())
            with open(path, "rb") as file:
                while chunk := file.read(1 << 20):
                    digest.update(chunk)
        actual = digest.hexdigest()
        cache.remember(key, identity, actual)
    if actual != meta["sha256"]:
        _save_then_raise(cache, notes, ShardDigestError(
            f"{folder}: its shards' bytes differ from the one SHA-256 that {folder / SHARD_META} records over all of "
            f"them (a meta.json older than per-shard digests cannot say which shard), so it would train on other "
            f"tokens; " + _remedy(folder, named[0].name).replace("rebuild it", "rebuild the folder")))
    return notes


def _save_then_raise(cache: DigestCache, notes: list[str], error: ShardDigestError) -> None:
    """Remember what was hashed (a damaged shard is refused again without reading it twice)."""
    cache.save()
    raise error
