"""The harness applies a mutant to a copy of a tiny repository and refuses a stale one by name."""

import subprocess

import pytest

from jaxgpt_tools.mutants.apply import apply_mutant, check_mutants, export_tracked, fresh_copy, occurrences
from jaxgpt_tools.mutants.mutant import Edit, Mutant, StaleMutant, both, jaxgpt_only


def tiny_repo(root):
    """A git repository with one tracked module and one untracked file."""
    (root / "jaxgpt").mkdir(parents=True)
    (root / "jaxgpt" / "consts.py").write_text("SCALE = 0.12\nCAP = 30.0\n")
    (root / "untracked.txt").write_text("not exported\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "jaxgpt/consts.py"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "start"], check=True)
    return root


def scale_mutant(snippet="SCALE = 0.12"):
    return jaxgpt_only("scale", "scale misread", "jaxgpt/consts.py", snippet, "SCALE = 0.125", ("tests",))


def test_a_mutant_edits_the_copy_and_never_the_repository(tmp_path):
    repo = tiny_repo(tmp_path / "repo")
    base = export_tracked(repo, tmp_path / "base")
    assert not (base / "untracked.txt").exists()  # only what HEAD tracks
    work = fresh_copy(base, tmp_path / "work")
    apply_mutant(work, scale_mutant())
    assert (work / "jaxgpt" / "consts.py").read_text() == "SCALE = 0.125\nCAP = 30.0\n"
    assert (repo / "jaxgpt" / "consts.py").read_text() == "SCALE = 0.12\nCAP = 30.0\n"
    assert (base / "jaxgpt" / "consts.py").read_text() == "SCALE = 0.12\nCAP = 30.0\n"


@pytest.mark.parametrize("snippet, count", [("SCALE = 0.5", 0), (" = ", 2)])
def test_a_stale_mutant_is_refused_naming_it(tmp_path, snippet, count):
    base = export_tracked(tiny_repo(tmp_path / "repo"), tmp_path / "base")
    with pytest.raises(StaleMutant, match=rf"mutant scale: .* occurs {count} times in jaxgpt/consts.py"):
        check_mutants(base, [scale_mutant(snippet)])
    before = (base / "jaxgpt" / "consts.py").read_text()
    with pytest.raises(StaleMutant):
        apply_mutant(base, scale_mutant(snippet))
    assert (base / "jaxgpt" / "consts.py").read_text() == before  # nothing written


def test_a_missing_file_is_refused(tmp_path):
    mutant = jaxgpt_only("gone", "m", "jaxgpt/gone.py", "a", "b", ("tests",))
    with pytest.raises(StaleMutant, match=r"mutant gone: jaxgpt/gone\.py does not exist"):
        check_mutants(tmp_path, [mutant])


def test_the_modes_are_checked():
    with pytest.raises(ValueError, match="needs an edit of torch_ref"):
        Mutant("x", "m", "both", (Edit("jaxgpt/a.py", "a", "b"),), ("tests",))
    with pytest.raises(ValueError, match="must not edit torch_ref"):
        Mutant("x", "m", "jaxgpt", (Edit("torch_ref/a.py", "a", "b"),), ("tests",))
    pair = both("x", "m", ("jaxgpt/a.py", "a", "b"), ("torch_ref/a.py", "a", "b"), ("tests",))
    assert [edit.path for edit in pair.edits] == ["jaxgpt/a.py", "torch_ref/a.py"]


def test_occurrences_counts_overlaps():
    assert occurrences("aaa", "aa") == 2
    assert occurrences("abc", "d") == 0
