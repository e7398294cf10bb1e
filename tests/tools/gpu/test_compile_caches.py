"""jaxgpt_tools.gpu.compile_caches: counts of a cache root, an archive under its cap holding whole
entries only and restoring them byte for byte, and archives refused before anything is written."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from jaxgpt_tools.gpu import compile_caches
from jaxgpt_tools.gpu.compile_caches import CacheArchiveError


def fake_root(root: Path, kernels: int = 2, payload: int = 100) -> Path:
    for i in range(kernels):
        kernel = root / "triton" / f"hash{i}"
        kernel.mkdir(parents=True)
        (kernel / f"__grp__k{i}.json").write_text(json.dumps({"child_paths": {"k.cubin": str(kernel / "k.cubin")}}))
        (kernel / "k.cubin").write_bytes(os.urandom(payload))
    graph = root / "inductor" / "fxgraph" / "ab" / "entry1"
    graph.mkdir(parents=True)
    (graph / "0").write_bytes(b"graph")
    (root / "inductor" / "xy").mkdir(parents=True)
    (root / "inductor" / "xy" / "kernel.best_config").write_text("{}")
    (root / "jax").mkdir()
    for name in ("jit_step-abc", "jit_eval-def"):
        (root / "jax" / name).write_bytes(b"program")
        (root / "jax" / f"{name}-atime").write_bytes(b"0")
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_counts_say_how_far_a_compile_got(tmp_path):
    root = fake_root(tmp_path / "caches")
    assert compile_caches.counts(root) == {"triton_kernels": 2, "inductor_tuned": 1, "inductor_graphs": 1,
                                           "jax_programs": 2}
    assert compile_caches.counts(tmp_path / "absent") == dict.fromkeys(
        ("triton_kernels", "inductor_tuned", "inductor_graphs", "jax_programs"), 0)


def test_environment_points_every_compiler_at_the_root(tmp_path):
    env = compile_caches.environment(tmp_path)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor") and env["TRITON_CACHE_DIR"] == str(
        tmp_path / "triton") and env["JAXGPT_COMPILE_CACHE"] == str(tmp_path / "jax")


def test_pack_and_unpack_restore_the_root_byte_for_byte(tmp_path):
    root = fake_root(tmp_path / "caches")
    machine = {"gpu": "NVIDIA H200", "torch": "2.11.0+cu130", "jax": "0.11.2"}
    packed = compile_caches.pack(root, tmp_path / "c.tar.gz", 2**20, compile_caches.manifest("abc123", machine))
    assert packed["left_out"] == [] and packed["files"] == 10 and packed["bytes"] == (tmp_path / "c.tar.gz").stat().st_size
    assert not list(tmp_path.glob("*.partial"))
    stated = compile_caches.unpack(tmp_path / "c.tar.gz", tmp_path / "restored")
    assert tree(tmp_path / "restored") == tree(root)
    assert stated["commit"] == "abc123" and stated["gpu"] == "NVIDIA H200" and stated["counts"]["triton_kernels"] == 2
    held = compile_caches.check(tmp_path / "c.tar.gz")
    assert held["members"] == 11 and held["manifest"]["torch"] == "2.11.0+cu130"
    assert compile_caches.describe_mismatch(stated, {**machine, "torch": "2.13.0"}) == [
        "the caches were built with torch 2.11.0+cu130, this machine has 2.13.0"]
    empty = compile_caches.pack(tmp_path / "absent", tmp_path / "e.tar.gz", 2**20, {})
    assert empty["files"] == 0 and compile_caches.check(tmp_path / "e.tar.gz")["members"] == 1


def test_the_cap_holds_with_whole_entries_only(tmp_path):
    # Incompressible kernels of 300 KB: three fit a 1 MB cap with the rest, the others are listed.
    root = fake_root(tmp_path / "caches", kernels=6, payload=300_000)
    cap = 1_000_000
    packed = compile_caches.pack(root, tmp_path / "c.tar.gz", cap, {})
    assert (tmp_path / "c.tar.gz").stat().st_size <= cap
    assert len(packed["left_out"]) == 3 and all(name.startswith("triton/hash") for name in packed["left_out"])
    compile_caches.unpack(tmp_path / "c.tar.gz", tmp_path / "restored")
    for kernel in sorted((root / "triton").iterdir()):
        restored = tmp_path / "restored" / "triton" / kernel.name
        whole = tree(restored) == tree(kernel) if restored.exists() else False
        assert whole or not restored.exists(), f"{kernel.name} restored in part"
    # Inductor's entries come first: all of them are kept.
    assert (tmp_path / "restored" / "inductor" / "xy" / "kernel.best_config").is_file()


def archive_with(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_unsafe_or_foreign_archives_are_refused_and_nothing_is_written(tmp_path):
    manifest = (tarfile.TarInfo(compile_caches.MANIFEST), b"{}")
    link = tarfile.TarInfo("triton/link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    cases = {
        "escape": ([manifest, (tarfile.TarInfo("../evil"), b"x")], "unsafe member '../evil'"),
        "absolute": ([manifest, (tarfile.TarInfo("/tmp/evil"), b"x")], "unsafe member '/tmp/evil'"),
        "link": ([manifest, (link, b"")], "unsafe member 'triton/link'"),
        "foreign": ([(tarfile.TarInfo("triton/a"), b"x")], "no MANIFEST.json"),
    }
    for name, (members, said) in cases.items():
        archive = archive_with(tmp_path / f"{name}.tar.gz", members)
        for read in (compile_caches.check, lambda path: compile_caches.unpack(path, tmp_path / "root")):
            with pytest.raises(CacheArchiveError, match=said) as refused:
                read(archive)
            assert f"{name}.tar.gz" in str(refused.value)
    (tmp_path / "text.tar.gz").write_text("not an archive")
    with pytest.raises(CacheArchiveError, match="not a readable gzipped tar"):
        compile_caches.check(tmp_path / "text.tar.gz")
    assert not (tmp_path / "evil").exists() and not list((tmp_path / "root").rglob("*"))
