"""jaxgpt_tools.gpu.compile_caches on a fake cache root (Inductor's FX graph entries and tuning
results, Triton's kernel folders, JAX's entries with their `-atime` companions): the counts, the
variables that point a child at the root, the units of packing, an archive that restores the root
byte for byte as one ordinary gzip stream, a cap that holds with whole units only (incompressible
and compressible payloads), symlinks and special files left behind, and archives refused (unsafe
members, not a gzip tar, no manifest) before anything is written, `check` extracting nothing."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import tarfile
from pathlib import Path

import pytest

from jaxgpt_tools.gpu import compile_caches
from jaxgpt_tools.gpu.compile_caches import CacheArchiveError

MACHINE = {"gpu": "NVIDIA H200", "python": "3.12.3", "jax": "0.11.2", "torch": "2.11.0+cu130", "triton": "3.6.0",
           "cuda": "13.0", "host": "not kept"}


def kernel(root: Path, name: str, payload: bytes) -> Path:
    """One Triton kernel folder as Triton's cache writes it: the group file naming its siblings."""
    folder = root / "triton" / name
    folder.mkdir(parents=True)
    (folder / "k.cubin").write_bytes(payload)
    (folder / "k.json").write_text('{"name": "k"}')
    (folder / f"__grp__k-{name}.json").write_text(json.dumps(
        {"child_paths": {"k.cubin": str(folder / "k.cubin"), "k.json": str(folder / "k.json")}}))
    return folder


def fake_root(root: Path, kernels: int = 2, payload: int = 100) -> Path:
    for i in range(kernels):
        kernel(root, f"HASH{i}", os.urandom(payload))
    graph = root / "inductor" / "fxgraph" / "ab" / "fabcdef"
    graph.mkdir(parents=True)
    (graph / "entry0").write_bytes(b"graph")
    (root / "inductor" / "aotautograd" / "aa" / "akey").mkdir(parents=True)
    (root / "inductor" / "aotautograd" / "aa" / "akey" / "entry").write_bytes(b"aot")
    (root / "inductor" / "xy").mkdir(parents=True)
    (root / "inductor" / "xy" / "cxy1.py").write_text("# generated")
    (root / "inductor" / "xy" / "cxy1.best_config").write_text('{"XBLOCK": 64, "found_by_coordesc": true}')
    (root / "jax").mkdir()
    for key in ("jit_step-abc", "jit_eval-def"):
        (root / "jax" / f"{key}-cache").write_bytes(b"program " + key.encode())
        (root / "jax" / f"{key}-atime").write_bytes((1234).to_bytes(8, "little"))
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_counts_say_how_far_a_compile_got(tmp_path):
    root = fake_root(tmp_path / "caches")
    assert compile_caches.counts(root) == {"triton_kernels": 2, "inductor_tuned": 1, "inductor_graphs": 1,
                                           "jax_programs": 2}
    assert compile_caches.counts(tmp_path / "absent") == dict.fromkeys(
        ("triton_kernels", "inductor_tuned", "inductor_graphs", "jax_programs"), 0)
    # A cubin anywhere under the root counts (Inductor's own Triton folder when TRITON_CACHE_DIR is unset).
    (root / "inductor" / "triton" / "0" / "K").mkdir(parents=True)
    (root / "inductor" / "triton" / "0" / "K" / "k.cubin").write_bytes(b"x")
    assert compile_caches.counts(root)["triton_kernels"] == 3


def test_environment_points_every_compiler_at_the_root(tmp_path):
    assert compile_caches.environment(tmp_path) == {
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TRITON_CACHE_DIR": str(tmp_path / "triton"),
        "JAXGPT_COMPILE_CACHE": str(tmp_path / "jax"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}


def test_units_are_leaf_folders_and_jax_entries_with_their_companions(tmp_path):
    root = fake_root(tmp_path / "caches")
    found = {unit.name: sorted(path.name for path in unit.files) for unit in compile_caches.units(root)}
    assert list(found) == ["inductor/aotautograd/aa/akey", "inductor/fxgraph/ab/fabcdef", "inductor/xy",
                           "triton/HASH0", "triton/HASH1", "jax/jit_eval-def", "jax/jit_step-abc"]
    assert found["jax/jit_step-abc"] == ["jit_step-abc-atime", "jit_step-abc-cache"]
    assert found["triton/HASH0"] == ["__grp__k-HASH0.json", "k.cubin", "k.json"]


def test_manifest_and_the_versions_that_differ():
    stated = compile_caches.manifest("abc123", MACHINE)
    assert stated["commit"] == "abc123" and "host" not in stated and stated["created_utc"]
    assert {key: stated[key] for key in compile_caches.MANIFEST_KEYS} == {
        key: MACHINE[key] for key in compile_caches.MANIFEST_KEYS}
    assert compile_caches.describe_mismatch(stated, MACHINE) == []
    assert compile_caches.describe_mismatch(stated, {**MACHINE, "torch": "2.13.0", "gpu": "NVIDIA H100 80GB HBM3"}) == [
        "the caches were built with gpu NVIDIA H200, this machine has NVIDIA H100 80GB HBM3",
        "the caches were built with torch 2.11.0+cu130, this machine has 2.13.0"]
    # A version the machine does not report is not a mismatch.
    assert compile_caches.describe_mismatch(stated, {"torch": "2.11.0+cu130"}) == []


def test_pack_and_unpack_restore_the_root_byte_for_byte(tmp_path):
    root = fake_root(tmp_path / "caches")
    archive = tmp_path / "c.tar.gz"
    packed = compile_caches.pack(root, archive, 2**20, compile_caches.manifest("abc123", MACHINE))
    assert packed == {"bytes": archive.stat().st_size, "units": 7, "files": 14, "left_out": [], "cap_bytes": 2**20}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tar.gz", "caches"]  # no partial file left
    # One ordinary gzip stream (its CRC and size checked), read whole or streamed, the manifest first.
    assert gzip.decompress(archive.read_bytes())
    with tarfile.open(archive, "r|gz") as streamed:
        names = [member.name for member in streamed]
    assert names[0] == compile_caches.MANIFEST and len(names) == 15
    stated = compile_caches.unpack(archive, tmp_path / "restored")
    assert tree(tmp_path / "restored") == tree(root)
    assert stated["commit"] == "abc123" and stated["gpu"] == "NVIDIA H200" and stated["left_out"] == []
    assert stated["counts"] == compile_caches.counts(root) and stated["units"] == 7
    held = compile_caches.check(archive)
    assert held["members"] == 15 and held["files"] == 14 and held["bytes"] == archive.stat().st_size
    assert held["versions"]["torch"] == "2.11.0+cu130" and held["manifest"]["commit"] == "abc123"
    # The same caches give the same bytes but the manifest's times; no owner names are kept.
    with tarfile.open(archive, "r:gz") as opened:
        assert {(m.uname, m.gname, m.uid) for m in opened.getmembers()} == {("", "", 0)}


def test_an_empty_or_absent_root_gives_an_archive_of_the_manifest(tmp_path):
    for root in (tmp_path / "absent", tmp_path / "empty"):
        (tmp_path / "empty").mkdir(exist_ok=True)
        packed = compile_caches.pack(root, tmp_path / "e.tar.gz", 2**20, {"commit": None})
        assert packed["files"] == 0 and packed["units"] == 0 and packed["left_out"] == []
        held = compile_caches.check(tmp_path / "e.tar.gz")
        assert held["members"] == 1 and held["manifest"]["counts"]["triton_kernels"] == 0
        assert compile_caches.unpack(tmp_path / "e.tar.gz", tmp_path / "r")["commit"] is None


def unit_states(root: Path, restored: Path) -> dict[str, str]:
    """Each unit of `root`: "whole" or "absent" after the unpack into `restored` ("part" fails)."""
    states = {}
    for unit in compile_caches.units(root):
        present = [(restored / path.relative_to(root)).is_file() for path in unit.files]
        same = all((restored / path.relative_to(root)).read_bytes() == path.read_bytes()
                   for path, here in zip(unit.files, present, strict=True) if here)
        states[unit.name] = "whole" if all(present) and same else "absent" if not any(present) else "part"
    return states


def test_the_cap_holds_with_whole_units_only(tmp_path):
    # Incompressible kernels of 300 KB: three fit a 1 MB cap beside Inductor's and JAX's small
    # entries (a kernel too big is listed, the small entries after it are still packed).
    root = fake_root(tmp_path / "caches", kernels=6, payload=300_000)
    cap = 1_000_000
    packed = compile_caches.pack(root, tmp_path / "c.tar.gz", cap, {})
    assert packed["bytes"] == (tmp_path / "c.tar.gz").stat().st_size <= cap
    assert packed["left_out"] == ["triton/HASH3", "triton/HASH4", "triton/HASH5"]
    stated = compile_caches.unpack(tmp_path / "c.tar.gz", tmp_path / "restored")
    assert stated["left_out"] == packed["left_out"]
    states = unit_states(root, tmp_path / "restored")
    assert "part" not in states.values()
    assert sorted(name for name, state in states.items() if state == "absent") == packed["left_out"]
    assert states["inductor/xy"] == states["jax/jit_step-abc"] == "whole"


def test_the_cap_counts_compressed_bytes(tmp_path):
    # Compressible kernels, 3 MB in all: more than the 1 MB cap holds raw, all of it packed.
    root = tmp_path / "caches"
    for i in range(10):
        kernel(root, f"K{i:02d}", b"mov.u32 %r1, %r2;\n" * 16_000 + os.urandom(1000))
    packed = compile_caches.pack(root, tmp_path / "c.tar.gz", 1_000_000, {})
    assert packed["left_out"] == [] and packed["units"] == 10 and packed["bytes"] <= 1_000_000
    # A cap under the compressed bytes so far plus the next kernel's raw 289 KB: whole kernels in
    # order, then the rest listed.
    small = compile_caches.pack(root, tmp_path / "s.tar.gz", 310_000, {})
    assert small["bytes"] <= 310_000 and 0 < small["units"] < 10
    assert small["left_out"] == [f"triton/K{i:02d}" for i in range(small["units"], 10)]
    compile_caches.unpack(tmp_path / "s.tar.gz", tmp_path / "restored")
    assert "part" not in unit_states(root, tmp_path / "restored").values()


def test_symlinks_and_special_files_are_left_behind(tmp_path):
    root = fake_root(tmp_path / "caches")
    (tmp_path / "secret").write_text("not a cache")
    (root / "triton" / "HASH0" / "link.cubin").symlink_to(tmp_path / "secret")
    (root / "triton" / "linked").symlink_to(tmp_path)
    os.mkfifo(root / "triton" / "HASH1" / "fifo")
    packed = compile_caches.pack(root, tmp_path / "c.tar.gz", 2**20, {})
    assert packed["files"] == 14 and packed["left_out"] == []
    compile_caches.unpack(tmp_path / "c.tar.gz", tmp_path / "restored")
    restored = tmp_path / "restored" / "triton"
    assert sorted(p.name for p in restored.iterdir()) == ["HASH0", "HASH1"]
    assert not (restored / "HASH0" / "link.cubin").exists() and not (restored / "HASH1" / "fifo").exists()


def test_a_failed_pack_leaves_the_old_archive_and_no_partial_file(tmp_path, monkeypatch):
    root = fake_root(tmp_path / "caches")
    archive = tmp_path / "out" / "c.tar.gz"
    archive.parent.mkdir()
    compile_caches.pack(root, archive, 2**20, {"commit": "old"})
    before = archive.read_bytes()

    def fail(*args: object) -> tuple[int, int]:
        raise OSError("disk full")

    monkeypatch.setattr(compile_caches, "_crc_after", fail)
    with pytest.raises(OSError, match="disk full"):
        compile_caches.pack(root, archive, 2**20, {"commit": "new"})
    assert archive.read_bytes() == before and [p.name for p in archive.parent.iterdir()] == ["c.tar.gz"]


def member(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info, data


def archive_with(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


MANIFEST_MEMBER = member(compile_caches.MANIFEST, b'{"commit": "abc"}')


@pytest.mark.parametrize(("name", "members", "said"), [
    ("escape", [MANIFEST_MEMBER, member("triton/../../evil")], "unsafe member 'triton/../../evil' (a '..' path)"),
    ("absolute", [MANIFEST_MEMBER, member("/" + "srv/evil")], "unsafe member '/srv/evil' (an absolute path)"),
    ("symlink", [MANIFEST_MEMBER, member("triton/k/link", b"", tarfile.SYMTYPE, "/etc/passwd")],
     "unsafe member 'triton/k/link' (a link)"),
    ("hardlink", [MANIFEST_MEMBER, member("triton/k/link", b"", tarfile.LNKTYPE, "MANIFEST.json")],
     "unsafe member 'triton/k/link' (a link)"),
    ("device", [MANIFEST_MEMBER, member("triton/k/dev", b"", tarfile.CHRTYPE)], "(a device, FIFO or other special"),
    ("outside", [MANIFEST_MEMBER, member("evil.sh")], "unsafe member 'evil.sh' (outside inductor/, triton/, jax/)"),
    ("foreign", [member("triton/a")], "no MANIFEST.json"),
    ("listless", [member(compile_caches.MANIFEST, b"[1, 2]")], "MANIFEST.json is not a JSON object"),
])
def test_unsafe_or_foreign_archives_are_refused_and_nothing_is_written(tmp_path, name, members, said):
    archive = archive_with(tmp_path / f"{name}.tar.gz", [*members, member("triton/k/k.cubin")])
    root = tmp_path / "deep" / "root"
    for read in (compile_caches.check, lambda path: compile_caches.unpack(path, root)):
        with pytest.raises(CacheArchiveError, match=re.escape(said)) as refused:
            read(archive)
        assert f"{name}.tar.gz" in str(refused.value)
    assert sorted(p.name for p in tmp_path.rglob("*")) == [f"{name}.tar.gz"]


def test_archives_that_are_not_gzip_tars_are_refused(tmp_path):
    (tmp_path / "text.tar.gz").write_text("not an archive")
    (tmp_path / "plain.tar").write_bytes(b"")
    with tarfile.open(tmp_path / "plain.tar", "w") as plain:
        plain.addfile(*member(compile_caches.MANIFEST))
    good = compile_caches.pack(fake_root(tmp_path / "caches"), tmp_path / "good.tar.gz", 2**20, {})
    (tmp_path / "cut.tar.gz").write_bytes((tmp_path / "good.tar.gz").read_bytes()[:good["bytes"] // 2])
    for name, said in (("text.tar.gz", "not a readable gzipped tar"), ("plain.tar", "not a readable gzipped tar"),
                       ("cut.tar.gz", "damaged"), ("absent.tar.gz", "not a readable gzipped tar")):
        for read in (compile_caches.check, lambda path: compile_caches.unpack(path, tmp_path / "root")):
            with pytest.raises(CacheArchiveError, match=said) as refused:
                read(tmp_path / name)
            assert name in str(refused.value)
    assert not (tmp_path / "root").exists()


def test_a_symlink_already_in_the_root_cannot_lead_outside_it(tmp_path):
    archive = tmp_path / "c.tar.gz"
    compile_caches.pack(fake_root(tmp_path / "caches"), archive, 2**20, {})
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "triton").symlink_to(outside)
    with pytest.raises(CacheArchiveError, match=re.escape("c.tar.gz: refused by tarfile's data filter")):
        compile_caches.unpack(archive, root)
    assert not list(outside.iterdir())


def test_check_extracts_nothing(tmp_path, monkeypatch):
    archive = tmp_path / "c.tar.gz"
    compile_caches.pack(fake_root(tmp_path / "caches"), archive, 2**20, {"commit": "abc"})
    monkeypatch.setattr(tarfile.TarFile, "extractall", lambda *a, **k: pytest.fail("check extracted"))
    monkeypatch.setattr(tarfile.TarFile, "extract", lambda *a, **k: pytest.fail("check extracted"))
    before = sorted(tmp_path.rglob("*"))
    assert compile_caches.check(archive)["manifest"]["commit"] == "abc"
    assert sorted(tmp_path.rglob("*")) == before
