"""A full disk, as both trainers meet it: in a checkpoint save and in a log line.

- `full_disk(error)`: whether an error says the disk is full, in the words a user reads ("no
  space left on device"; "disk quota exceeded"), from an OSError's errno (ENOSPC, EDQUOT) or from
  a library's message that carries it, anywhere in the error's chain: tensorstore's, as orbax
  raises it (`ValueError: RESOURCE_EXHAUSTED: Error writing ... Failed to write 64972 bytes to
  file 13: No space left on device [os_error_code='28']`), or torch's when it wraps the OSError
  of a Python file object (a path given to torch.save loses the errno: `unexpected pos 576 vs 534`).
- `save_failure(...)`: the one line of a save that failed, the partial save removed
  (`remove_partial`: a folder or a file, or why it could not be) and the size of one checkpoint.
- `append_line(path, line)`: a log line appended whole or not at all. A write that fails part-way
  (on a full disk the kernel writes what fits, then ENOSPC) is cut back to the end of the last
  complete line, so a reader of the JSONL never meets half a record; `LogWriteError` says which
  file and why, the newest checkpoint added by the trainer (`LogWriteError.naming`).

Each trainer's run.checkpoint and run.runlog use these (jaxgpt: orbax's `*.orbax-checkpoint-tmp`
folders; torch_ref: `.<step>.pt.tmp-<pid>` files).
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

# errno -> the words of the error line, as os.strerror says them (tensorstore quotes both)
FULL_DISK_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}


def full_disk(error: BaseException | None) -> str | None:
    """"no space left on device" or "disk quota exceeded" when `error`, or an error it was raised
    from or while handling, says the disk is full (an OSError's errno; a library's message quoting
    the OS error, by its text or tensorstore's `os_error_code`); else None."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        for code, words in FULL_DISK_ERRNOS.items():
            if isinstance(error, OSError) and error.errno == code:
                return words
            text = str(error)
            if os.strerror(code) in text or f"os_error_code='{code}'" in text:
                return words
        error = error.__cause__ or error.__context__
    return None


def first_line(error: BaseException, limit: int = 300) -> str:
    """`Type: the first line of the message` (at most `limit` characters of it)."""
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:limit]}"


def remove_partial(paths: Sequence[Path], what: str) -> str:
    """Remove a failed save's leftovers (folders or files; `what`: "folder", "file"); the sentence
    saying so, or which could not be removed and why (empty when there were none). Never
    restored either way: the resume readers skip them."""
    sentences = []
    for path in paths:
        try:
            for attempt in range(3):  # a library's last write may still land in it: once more
                try:
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path)
                    else:
                        path.unlink(missing_ok=True)
                    break
                except OSError as error:
                    if error.errno != errno.ENOTEMPTY or attempt == 2:
                        raise
                    time.sleep(0.2)
        except OSError as error:
            sentences.append(f"Its partial {what} {path} could not be removed ({first_line(error)}): delete it "
                             "to reclaim the space (it is never restored).")
        else:
            sentences.append(f"Its partial {what} {path.name} was removed.")
    return " ".join(sentences)


def size_on_disk(path: Path) -> int:
    """Bytes of a file, or of every file below a folder (0 when it is gone)."""
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())
    except OSError:
        return 0


def megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def save_failure(what: str, cause: BaseException, *, partial: str, checkpoint_size: int, where: str) -> str:
    """The line of a failed save: `what` ("saving the checkpoint of step 4 into DIR"), then the
    disk is full in plain words (with the size one checkpoint takes there, `checkpoint_size`
    bytes, 0: unknown) or the library's first line, the partial save's sentence, `where` (the
    newest complete checkpoint)."""
    words = full_disk(cause)
    if words is None:
        reason = f" ({first_line(cause)})"
    else:
        size = f"one checkpoint there takes {megabytes(checkpoint_size)}: " if checkpoint_size else ""
        reason = f": {words} ({size}make room, then resume)"
    return " ".join(part for part in (f"{what} failed{reason}.", partial, where) if part)


class LogWriteError(OSError):
    """A log or metrics line that could not be written (a full disk, a lost folder): the run
    stops on it; the file ends at its last complete line."""

    def __init__(self, path: Path, cause: OSError, where: str = "", *, whole: bool = True) -> None:
        self.path, self.cause, self.whole = path, cause, whole
        words = full_disk(cause)
        reason = f": {words}" if words is not None else f" ({first_line(cause)})"
        ending = "it ends at its last complete line" if whole else "its last line may be incomplete"
        super().__init__(" ".join(part for part in (f"writing the log {path} failed{reason}; {ending}.", where) if part))

    def naming(self, where: str) -> LogWriteError:
        """The same error ending with `where` (the newest complete checkpoint)."""
        return LogWriteError(self.path, self.cause, where, whole=self.whole)


def append_line(path: Path, line: str) -> None:
    """Append `line` (newline added) to `path` in one write call (a second only if the kernel
    wrote part of it), or not at all: on a failure the file is cut back to its length before,
    and LogWriteError raised."""
    data = (line + "\n").encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as error:
        raise LogWriteError(path, error) from error
    try:
        end, written = os.fstat(fd).st_size, 0
        try:
            while written < len(data):
                written += os.write(fd, data[written:])
        except OSError as error:
            if written:
                try:
                    os.ftruncate(fd, end)  # freeing pages needs no space
                except OSError as truncate_error:
                    raise LogWriteError(path, error, whole=False) from truncate_error
            raise LogWriteError(path, error) from error
    finally:
        os.close(fd)
