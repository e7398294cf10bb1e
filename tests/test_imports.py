"""The import graph of the four packages (docs/DESIGN.md, "What each module may import"), read
from the source with ast (imports inside functions count too): no cycle anywhere; the record's
modules at the top of jaxgpt/ and torch_ref/ never import their run machinery (run/), the
data-making code (corpus/), the entry points (train, sample), the trainer (loop, step) or the
shared machinery (runkit/); run/ never imports the entry points nor the trainer; torch_ref
imports no jaxgpt and no JAX library; runkit/ imports the standard library only (no framework:
no jax, flax, optax, orbax, torch, numpy),
checked again in a fresh interpreter where those cannot be imported; jaxgpt_tools' shared
module group (common/) imports no other group; the tool groups import each other without a
cycle; and torch_ref mirrors jaxgpt module for module, every difference named with its reason."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("jaxgpt", "torch_ref", "runkit", "jaxgpt_tools")
NEUTRAL = "runkit"  # the run machinery both trainers share: no framework
ENTRY_POINTS = {"train", "sample"}
# The trainer behind its light command (jaxgpt.train): its loop and, in jaxgpt, the compiled step
# that the tools import. They use run/; run/ never imports them.
TRAINER = {"loop", "step"}
OUTSIDE_THE_CORE = ("run", "corpus", *ENTRY_POINTS, *TRAINER)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str) -> dict[str, Path]:
    return {module_name(path): path for path in (ROOT / package).rglob("*.py")}


ALL = {name: path for package in PACKAGES for name, path in modules(package).items()}


def imported(path: Path) -> set[str]:
    """This project's modules that `path` imports (a `from package import name` of a submodule
    counts as the submodule)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in ALL else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in ALL and module_name(path) != name}


GRAPH = {name: imported(path) for name, path in ALL.items()}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (its nodes in order), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def top_part(name: str) -> str:
    """jaxgpt.run.cli -> run; jaxgpt.model -> model."""
    return name.split(".")[1] if "." in name else ""


def test_no_import_cycle():
    assert cycle(GRAPH) is None, f"import cycle: {' -> '.join(cycle(GRAPH))}"


@pytest.mark.parametrize("package", ["jaxgpt", "torch_ref"])
def test_the_record_never_imports_its_machinery_and_run_never_imports_the_entry_points(package):
    upward = []
    for name, deps in GRAPH.items():
        if not name.startswith(package + "."):
            continue
        part = top_part(name)
        for dep in deps:
            if not dep.startswith(package + "."):
                continue
            if part not in OUTSIDE_THE_CORE and top_part(dep) in OUTSIDE_THE_CORE:
                upward.append(f"{name} -> {dep}")
            if part in ("run", "corpus") and top_part(dep) in ENTRY_POINTS | TRAINER:
                upward.append(f"{name} -> {dep}")
    assert not upward, upward


def external_imports(path: Path) -> set[str]:
    """The top-level names of every absolute import in `path` (this project's packages and
    third-party ones alike): `from jax import numpy` -> jax."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


FRAMEWORKS = {"jax", "jaxlib", "flax", "optax", "orbax", "torch", "triton", "numpy", "ml_dtypes", "tensorstore"}


@pytest.mark.parametrize("package", ["jaxgpt", "torch_ref"])
def test_the_record_never_imports_the_shared_machinery(package):
    """runkit serves run/ and the entry points; the record's numerics never depend on it."""
    upward = [f"{name} -> {dep}" for name, deps in GRAPH.items() if name.startswith(package + ".")
              and top_part(name) not in OUTSIDE_THE_CORE for dep in deps if dep.split(".")[0] == NEUTRAL]
    assert not upward, upward


def test_the_shared_machinery_imports_the_standard_library_only():
    outside = {f"{name}: {module}" for name, path in modules(NEUTRAL).items() for module in external_imports(path)
               if module != NEUTRAL and module not in sys.stdlib_module_names}
    assert not outside, sorted(outside)
    assert not {module for path in modules(NEUTRAL).values() for module in external_imports(path)} & FRAMEWORKS


# Runs in the child: a meta-path finder refuses every framework and the other packages.
_NEUTRAL_CHILD = f"""
import importlib, importlib.abc, pkgutil, sys
BLOCKED = {tuple(sorted(FRAMEWORKS | {"jaxgpt", "torch_ref", "jaxgpt_tools", "tensorboardX", "tqdm"}))!r}
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked: {NEUTRAL} must import without it")
sys.meta_path.insert(0, Refuse())
import {NEUTRAL}
names = sorted(info.name for info in pkgutil.walk_packages({NEUTRAL}.__path__, "{NEUTRAL}."))
for name in names:
    importlib.import_module(name)
print(len(names))
"""


def test_every_shared_module_imports_where_no_framework_can():
    done = subprocess.run([sys.executable, "-c", _NEUTRAL_CHILD], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) == len(modules(NEUTRAL)) - 1  # every module but the package's __init__


def test_torch_ref_imports_no_jaxgpt_and_no_jax_library():
    """torch_ref states the record's numerics on its own (parity_tests compare them with
    jaxgpt's): it imports neither jaxgpt, the tools, nor JAX and its libraries; both packages
    may import runkit."""
    banned = {"jaxgpt", "jaxgpt_tools", "jax", "jaxlib", "flax", "optax", "orbax"}
    found = {f"{name}: {module}" for name, path in modules("torch_ref").items()
             for module in external_imports(path) & banned}
    assert not found, sorted(found)


def test_tool_groups_import_without_a_cycle_and_common_imports_no_group():
    groups: dict[str, set[str]] = {}
    for name, deps in GRAPH.items():
        if name.startswith("jaxgpt_tools."):
            own = top_part(name)
            groups.setdefault(own, set()).update(top_part(d) for d in deps
                                                 if d.startswith("jaxgpt_tools.") and top_part(d) != own)
    assert groups["common"] == set(), groups["common"]
    assert cycle(groups) is None, f"tool groups import in a cycle: {' -> '.join(cycle(groups))}"


# jaxgpt's modules that torch_ref has no twin of, and why; and the reverse.
JAXGPT_ONLY = {
    "compat": "shims across jax 0.10 and 0.11",
    "corpus": "shards are made from text once, by jaxgpt; torch_ref reads the same .bin files",
    "decode": "text sampling is jaxgpt's",
    "sample": "text sampling is jaxgpt's",
    "step": "the record's compiled mesh step, which the tools import apart from the loop; torch_ref's step is "
            "eager code in its loop (torch_ref.loop)",
    "kernels": "jaxgpt's Pallas kernels; torch_ref compiles flex_attention (torch_ref.attention)",
    "params": "a flat {record name: array} dict is JAX's pytree; a torch module holds its own state_dict",
    "prefetch": "the JAX loader's background thread; torch_ref's generator reads on demand, as the record's",
    "run.compile_cache": "JAX's persistent compilation cache",
    "run.quiet": "orbax's and tensorstore's own failure reports; torch raises to our code, which says it in one line",
    "testing": "helpers for tests of code built on jaxgpt",
}
TORCH_REF_ONLY = {
    "compilation": "torch.compile and Inductor's settings, as the record's script makes them",
}


def test_torch_ref_mirrors_jaxgpt_module_for_module():
    def names(package: str) -> set[str]:
        return {name.split(".", 1)[1] for name in modules(package) if "." in name}

    def listed(name: str, table: dict[str, str]) -> bool:
        return any(name == key or name.startswith(key + ".") for key in table)

    jax_side, torch_side = names("jaxgpt"), names("torch_ref")
    assert {n for n in jax_side - torch_side if not listed(n, JAXGPT_ONLY)} == set()
    assert {n for n in torch_side - jax_side if not listed(n, TORCH_REF_ONLY)} == set()
    stale = {key for key in JAXGPT_ONLY if not any(n == key or n.startswith(key + ".") for n in jax_side - torch_side)}
    assert not stale, f"listed as jaxgpt-only but mirrored now: {stale}"
