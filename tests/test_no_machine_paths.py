"""No tracked file names a folder of one machine: a clone elsewhere has none of them.

Code takes its defaults from the repository or the environment, and generated artifacts are
written with repository-relative paths (`scripts/fusion_hlo.repo_relative_paths`).
"""

import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# Written in pieces so that this file does not match itself.
MACHINE_PATH = re.compile("/(" + "|".join(["wo" + "rk", "tm" + "p", "ro" + "ot", "ho" + "me", "op" + "t"]) + ")/")
# (file, substring of the matching line) where such a path is the subject, not a location.
ALLOWED: tuple[tuple[str, str], ...] = ()


def tracked_files() -> list[Path]:
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout, so the tracked files are unknown: {error}")
    return [REPO_ROOT / name for name in listing.decode().split("\0") if name]


def machine_paths(root: Path, files: list[Path]) -> list[str]:
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):  # binary files (PNGs); a file deleted but not yet staged
            continue
        relative = path.relative_to(root).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line) and not any(relative == f and s in line for f, s in ALLOWED):
                found.append(f"{relative}:{number}: {line.strip()[:160]}")
    return found


def test_no_tracked_file_names_a_machine_path():
    found = machine_paths(REPO_ROOT, tracked_files())
    assert not found, "absolute paths of one machine in tracked files:\n" + "\n".join(found)


def test_the_check_finds_a_machine_path(tmp_path):
    # The check itself can fail: a file with such a path is reported with its line.
    (tmp_path / "a.md").write_text("ok\nrun " + "/" + "tm" + "p/x/y.py there\n")
    (tmp_path / "b.png").write_bytes(b"\x89PNG\xff\xfe")
    files = [tmp_path / "a.md", tmp_path / "b.png"]
    found = machine_paths(tmp_path, files)
    assert len(found) == 1 and found[0].startswith("a.md:2:")

