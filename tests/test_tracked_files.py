"""What every tracked file must not hold, because a reader of a clone elsewhere lacks it.

- A folder of one machine: code takes its defaults from the repository or the environment, and
  generated artifacts are written with repository-relative paths (`repo_relative_paths`).
- A tracker number as a reason ("issue N's goal"): the reader has no tracker, so the sentence
  says the goal or the rule itself. Record numbers ("#8 UntieEmbed") are names, not trackers.
"""

import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# Written in pieces so that this file does not match itself.
MACHINE_PATH = re.compile("/(" + "|".join(["wo" + "rk", "tm" + "p", "ro" + "ot", "ho" + "me", "op" + "t"]) + ")/")
# (file, substring of the matching line) where such a path is the subject, not a location.
ALLOWED = (
    # the machine paths that repo_relative_paths must rewrite, as its test's input
    ("tests/tools/common/test_artifacts.py", "text = ('FileNames 1 \""),
    ("tests/tools/common/test_artifacts.py", '"python scripts/fusion_report.py --out '),
)
TRACKER_NUMBER = re.compile(r"\b[Ii]ssues? #?\d+")


def tracked_files() -> list[Path]:
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout, so the tracked files are unknown: {error}")
    return [REPO_ROOT / name for name in listing.decode().split("\0") if name]


def matching_lines(root: Path, files: list[Path], pattern: re.Pattern) -> list[str]:
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):  # binary files (PNGs); a file deleted but not yet staged
            continue
        relative = path.relative_to(root).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line) and not any(relative == f and s in line for f, s in ALLOWED):
                found.append(f"{relative}:{number}: {line.strip()[:160]}")
    return found


def test_no_tracked_file_names_a_machine_path():
    found = matching_lines(REPO_ROOT, tracked_files(), MACHINE_PATH)
    assert not found, "absolute paths of one machine in tracked files:\n" + "\n".join(found)


def test_no_tracked_file_gives_a_tracker_number_as_a_reason():
    found = matching_lines(REPO_ROOT, tracked_files(), TRACKER_NUMBER)
    assert not found, "tracker numbers in tracked files (say the goal or rule instead):\n" + "\n".join(found)


def test_the_checks_find_what_they_look_for(tmp_path):
    # The checks themselves can fail: a file with such a line is reported with its line number.
    (tmp_path / "a.md").write_text("ok\nrun " + "/" + "tm" + "p/x/y.py there\n")
    (tmp_path / "b.png").write_bytes(b"\x89PNG\xff\xfe")
    files = [tmp_path / "a.md", tmp_path / "b.png"]
    found = matching_lines(tmp_path, files, MACHINE_PATH)
    assert len(found) == 1 and found[0].startswith("a.md:2:")
    (tmp_path / "c.py").write_text("# record #8 UntieEmbed\n# see " + "iss" + "ue 15's goal\n")
    assert [line[:6] for line in matching_lines(tmp_path, [tmp_path / "c.py"], TRACKER_NUMBER)] == ["c.py:2"]

