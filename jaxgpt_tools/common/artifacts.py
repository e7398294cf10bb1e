"""Generated artifacts as they are written into the repository: no machine's folders in them."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# Top-level folders of this repository: a path that reaches one of them is written from there on.
_REPO_FOLDERS = ("jaxgpt", "torch_ref", "jaxgpt_tools", "scripts", "tests", "parity_tests", "docs", "artifacts", "runs")
_ABSOLUTE = re.compile(r"(?<![\w.])(?:/[\w.+@-]+)+/?")
_SITE_PACKAGES = re.compile(r"^(?:/[\w.+@-]+)+/site-packages/")


def _relative(match: re.Match) -> str:
    path = match.group(0)
    if _SITE_PACKAGES.match(path):
        return _SITE_PACKAGES.sub("<site-packages>/", path)
    parts = path.split("/")
    starts = [i for i in range(2, len(parts)) if parts[i] in _REPO_FOLDERS]
    if not starts:
        return path
    # A checkout may itself be named like one of its folders (.../jaxgpt/jaxgpt/model.py): take the
    # split whose remainder is a file or folder of this repository, else the first.
    existing = [i for i in starts if (REPO_ROOT / "/".join(parts[i:])).exists()]
    return "/".join(parts[(existing or starts)[0]:])


def repo_relative_paths(text: str) -> str:
    """`text` with the absolute paths of any checkout (or copy) of this repository made relative
    to its root, and installed packages shown under `<site-packages>/`, so that generated
    artifacts (HLO file tables, recorded commands, tracebacks) name no machine's folders."""
    return _ABSOLUTE.sub(_relative, text)
