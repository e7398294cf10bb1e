"""A private copy of the repository and a mutant applied to it; the shared checkout is never edited."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from collections.abc import Iterable
from pathlib import Path

from jaxgpt_tools.mutants.mutant import Edit, Mutant, StaleMutant

# Ignored folders the tests read (the sample data, the fetched record script): linked into the copy.
LINKED = ("data", "runs/upstream")


def export_tracked(repo: Path, dest: Path, ref: str = "HEAD") -> Path:
    """The files tracked at `ref` (default HEAD: a consistent state, whatever the work tree holds)
    written into `dest`, plus links to the ignored folders in LINKED that exist in `repo`."""
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", ref],
                             check=True, capture_output=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="tar")
    for name in LINKED:
        source, link = repo / name, dest / name
        if source.exists() and not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source.resolve(), target_is_directory=True)
    return dest


def occurrences(text: str, snippet: str) -> int:
    """How many times `snippet` occurs in `text` (overlapping occurrences counted)."""
    count, start = 0, text.find(snippet)
    while start != -1:
        count, start = count + 1, text.find(snippet, start + 1)
    return count


def check_edit(root: Path, mutant_id: str, edit: Edit) -> str:
    """The file's text, after checking that the edit's snippet occurs exactly once (else StaleMutant)."""
    path = root / edit.path
    if not path.is_file():
        raise StaleMutant(f"mutant {mutant_id}: {edit.path} does not exist")
    text = path.read_text()
    found = occurrences(text, edit.snippet)
    if found != 1:
        raise StaleMutant(f"mutant {mutant_id}: its snippet {edit.snippet!r} occurs {found} times in "
                          f"{edit.path} (must be exactly once): update the catalogue")
    if edit.snippet == edit.replacement:
        raise StaleMutant(f"mutant {mutant_id}: replacement equals the snippet in {edit.path}")
    return text


def check_mutants(root: Path, mutants: Iterable[Mutant]) -> None:
    """Every edit of every mutant applies to the tree at `root`; the first stale one raises."""
    for mutant in mutants:
        for edit in mutant.edits:
            check_edit(root, mutant.id, edit)


def apply_mutant(root: Path, mutant: Mutant) -> None:
    """`mutant`'s edits written into the tree at `root` (a copy); all are checked before any is written."""
    for edit in mutant.edits:
        check_edit(root, mutant.id, edit)
    texts: dict[str, str] = {}
    for edit in mutant.edits:  # two edits of one file apply in turn to the same text
        text = texts.get(edit.path, (root / edit.path).read_text())
        if occurrences(text, edit.snippet) != 1:
            raise StaleMutant(f"mutant {mutant.id}: its snippet {edit.snippet!r} is not unique in {edit.path} "
                              "after the mutant's earlier edits")
        texts[edit.path] = text.replace(edit.snippet, edit.replacement, 1)
    for path, text in texts.items():
        (root / path).write_text(text)


def fresh_copy(base: Path, dest: Path) -> Path:
    """A copy of the exported tree `base` at `dest` (links kept as links), replacing any old one."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(base, dest, symlinks=True)
    return dest
