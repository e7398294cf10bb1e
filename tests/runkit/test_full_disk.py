"""runkit.full_disk: a full disk recognised in any error's chain, a log line appended whole or not
at all on a real full file system (a tmpfs: conftest.small_disk), a partial save removed."""

from __future__ import annotations

import errno
import json
import os

import pytest

from runkit import full_disk


def test_a_full_disk_is_recognised_wherever_it_is_said():
    assert full_disk.full_disk(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/x")) == "no space left on device"
    assert full_disk.full_disk(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))) == "disk quota exceeded"
    # orbax raises tensorstore's failure as a ValueError whose first line is cut before the OS error
    tensorstore = ValueError('RESOURCE_EXHAUSTED: Error writing "params.embed.weight/0.0" in OCDBT database at local '
                             'file "/d/4.orbax-checkpoint-tmp/": Failed writing: "/d/x": Failed to write 64972 bytes '
                             "to file 13: No space left on device [os_error_code='28']")
    assert full_disk.full_disk(tensorstore) == "no space left on device"
    # torch's writer wraps the OSError of the Python file object it writes through
    try:
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598") from None
    except RuntimeError as torch_error:
        assert torch_error.__context__ is not None
        assert full_disk.full_disk(torch_error) == "no space left on device"
    assert full_disk.full_disk(OSError(errno.EACCES, "Permission denied")) is None
    assert full_disk.full_disk(ValueError("RESOURCE_EXHAUSTED: too many open files")) is None


def test_a_failed_save_says_a_full_disk_in_plain_words():
    cause = ValueError("RESOURCE_EXHAUSTED: Error writing ...: No space left on device [os_error_code='28']")
    line = full_disk.save_failure("saving the checkpoint of step 4 into /d", cause, partial="Its partial folder x was removed.",
                                  checkpoint_size=2_800_000, where="The newest complete checkpoint is step 2 in /d.")
    assert line == ("saving the checkpoint of step 4 into /d failed: no space left on device (one checkpoint there takes "
                    "2.8 MB: make room, then resume). Its partial folder x was removed. The newest complete checkpoint "
                    "is step 2 in /d.")
    other = full_disk.save_failure("saving X", PermissionError(errno.EACCES, "Permission denied"), partial="",
                                   checkpoint_size=0, where="W.")
    assert other == "saving X failed (PermissionError: [Errno 13] Permission denied). W."


def test_remove_partial_removes_folders_and_files_or_says_why_not(tmp_path, monkeypatch):
    (tmp_path / "4.orbax-checkpoint-tmp" / "state").mkdir(parents=True)
    (tmp_path / "4.orbax-checkpoint-tmp" / "state" / "d").write_bytes(b"x" * 10)
    (tmp_path / ".4.pt.tmp-12").write_bytes(b"x")
    said = full_disk.remove_partial([tmp_path / "4.orbax-checkpoint-tmp", tmp_path / ".4.pt.tmp-12"], "save")
    assert said == "Its partial save 4.orbax-checkpoint-tmp was removed. Its partial save .4.pt.tmp-12 was removed."
    assert list(tmp_path.iterdir()) == []

    (tmp_path / "kept").mkdir()

    def refuse(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(full_disk.shutil, "rmtree", refuse)
    said = full_disk.remove_partial([tmp_path / "kept"], "folder")
    assert said.startswith(f"Its partial folder {tmp_path / 'kept'} could not be removed (PermissionError: ")
    assert said.endswith("delete it to reclaim the space (it is never restored).")


def test_a_line_that_does_not_fit_is_not_left_half_written(small_disk):
    """A tmpfs filled up to the page the JSONL's last line ends in: a record longer than what is
    left of that page is written in part by the kernel (a short write), then ENOSPC; the file is
    cut back to its last complete line and the error names the file and the full disk."""
    disk = small_disk(256 * 1024)
    path = disk.folder / "run.jsonl"
    full_disk.append_line(path, json.dumps({"step": 1, "train_loss": 6.9}))
    before = path.read_bytes()
    disk.fill(0)
    assert disk.free() == 0
    record = json.dumps({"step": 2, "note": "x" * 6000})  # past the end of the file's only page
    with pytest.raises(full_disk.LogWriteError) as raised:
        full_disk.append_line(path, record)
    assert str(raised.value) == (f"writing the log {path} failed: no space left on device; it ends at its last complete "
                                 "line.")
    assert path.read_bytes() == before  # the kernel's partial write was cut back
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"step": 1, "train_loss": 6.9}]
    full_disk.append_line(path, json.dumps({"step": 2}))  # a short line still fits in the page
    assert path.read_text().splitlines()[-1] == '{"step": 2}'
    assert str(raised.value.naming("The newest complete checkpoint is step 2 in D.")).endswith(
        "complete line. The newest complete checkpoint is step 2 in D.")


def test_the_kernel_does_write_part_of_a_line_that_does_not_fit(small_disk):
    """The failure append_line undoes is real: Python's own buffered append leaves half a record."""
    disk = small_disk(256 * 1024)
    path = disk.folder / "run.jsonl"
    path.write_text('{"step": 1}\n')
    disk.fill(0)
    with pytest.raises(OSError) as raised, open(path, "a") as file:
        file.write(json.dumps({"step": 2, "note": "x" * 6000}) + "\n")
    assert raised.value.errno == errno.ENOSPC
    assert len(path.read_bytes()) == 4096 and not path.read_text().endswith("\n")
