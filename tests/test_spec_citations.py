"""Every citation of the specification resolves inside the repository.

Code and docs cite docs/spec/ as "RECORD.md 11.9", "RECORD.md section 3", "RECORD.md sections
5-7", "LINEAGE.md §3.4" or "RECORD.md 2.3, step 9". A number resolves when the cited file has a
heading with it ("## 8. Data", "### 8.3 ...") or when its last part is a numbered item of the
section before it ("11.9": item 9 of section 11); a "point/step/item N" after a section is an item
of that section.
"""

import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEC = REPO_ROOT / "docs" / "spec"
SPEC_FILES = ("RECORD", "LINEAGE", "INTERFACES", "CPU_NOTES", "GPU_COMPILE_NOTES")
_NUMBER = r"\d+(?:\.\d+)*"
_SPAN = rf"{_NUMBER}(?:\s*[-\u2013]\s*{_NUMBER})?"
CITATION = re.compile(
    rf"\b(?P<file>{'|'.join(SPEC_FILES)})\.md`?,?[ \t]+(?:sections?\s+|\u00a7\s*)?"
    rf"(?P<spans>{_SPAN}(?:(?:,\s*|\s+and\s+)(?:\u00a7\s*)?{_SPAN})*)"
    rf"(?:,?\s+(?:points?|steps?|items?)\s+(?P<item>\d+))?"
)
_HEADING = re.compile(rf"^#+\s+(?P<number>{_NUMBER})\.?\s")
_ITEM = re.compile(r"^\s{0,3}(?P<number>\d+)\.\s")


def spec_sections(text: str) -> dict[str, set[str]]:
    """Section number -> the numbers of the numbered items in that section's own text."""
    sections: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = heading["number"]
            sections.setdefault(current, set())
        elif current is not None and (item := _ITEM.match(line)):
            sections[current].add(item["number"])
    return sections


def resolves(sections: dict[str, set[str]], number: str, item: str | None = None) -> bool:
    if number in sections:
        return item is None or item in sections[number]
    parent, _, last = number.rpartition(".")
    return item is None and parent in sections and last in sections[parent]


def unresolved_citations(text: str, specs: dict[str, dict[str, set[str]]]) -> list[str]:
    bad = []
    for match in CITATION.finditer(text):
        numbers = re.findall(_NUMBER, match["spans"])
        for index, number in enumerate(numbers):
            item = match["item"] if index == len(numbers) - 1 else None
            if not resolves(specs[match["file"]], number, item):
                bad.append(f"{match[0].strip()!r} ({match['file']}.md has no {number}{f' item {item}' if item else ''})")
    return bad


@pytest.fixture(scope="module")
def specs() -> dict[str, dict[str, set[str]]]:
    return {name: spec_sections((SPEC / f"{name}.md").read_text()) for name in SPEC_FILES}


def test_every_spec_file_is_in_the_repository():
    missing = [name for name in SPEC_FILES if not (SPEC / f"{name}.md").is_file()]
    assert not missing, f"docs/spec/ lacks {missing}"


def test_every_cited_section_exists(specs):
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout, so the tracked files are unknown: {error}")
    bad, cited = [], 0
    for name in listing.decode().split("\0"):
        if not name.endswith((".py", ".md", ".txt", ".toml", ".cfg")) or not (REPO_ROOT / name).exists() \
                or REPO_ROOT / name == Path(__file__).resolve():  # this file's examples cite sections that do not exist
            continue
        text = (REPO_ROOT / name).read_text(encoding="utf-8")
        cited += len(CITATION.findall(text))
        bad += [f"{name}: {problem}" for problem in unresolved_citations(text, specs)]
    assert cited > 50, f"only {cited} citations found: the pattern no longer matches how the code cites"
    assert not bad, "citations of sections that do not exist:\n" + "\n".join(bad)


@pytest.mark.parametrize("text, ok", [
    ("see RECORD.md 11.9 here", True),           # item 9 of section 11
    ("RECORD.md 8.3 step 1", True),              # heading 8.3
    ("RECORD.md sections 5-7", True),
    ("RECORD.md section 11 point 9", True),
    ("RECORD.md 2.3, step 9", True),             # step 9 of 2.3's numbered list
    ("LINEAGE.md §3.4", True),
    ("RECORD.md 13.1", False),                   # no section 13
    ("RECORD.md 11.99", False),                  # section 11 has no item 99
    ("RECORD.md 2.3, step 42", False),
    ("RECORD.md sections 4, 7, 8.9", False),
])
def test_resolver_on_examples(specs, text, ok):
    assert (not unresolved_citations(text, specs)) == ok
