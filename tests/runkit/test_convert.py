"""runkit.convert: a torch file's zip container checked before torch.load reads it (both
trainers' readers on damaged and mutated files: tests/run/test_convert_fuzz.py,
tests/torch_ref/run/test_checkpoint_fuzz.py)."""

from __future__ import annotations

import zipfile

from runkit.convert import zip_damage


def stored_zip(path, members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> None:
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)


def test_a_whole_file_and_a_file_that_is_no_zip_pass(tmp_path):
    stored_zip(tmp_path / "ok.pt", {"archive/data.pkl": b"pickle", "archive/data/0": bytes(range(256)) * 4})
    assert zip_damage(tmp_path / "ok.pt") is None
    (tmp_path / "legacy.pt").write_bytes(b"\x80\x02not a zip")
    assert zip_damage(tmp_path / "legacy.pt") is None  # torch.load's to judge


def test_a_flipped_bit_inside_a_member_is_named(tmp_path):
    payload = bytes(range(256)) * 4
    stored_zip(tmp_path / "f.pt", {"archive/data/12": payload})
    data = bytearray((tmp_path / "f.pt").read_bytes())
    at = bytes(data).index(payload) + 100
    data[at] ^= 0x01
    (tmp_path / "f.pt").write_bytes(bytes(data))
    assert zip_damage(tmp_path / "f.pt") == "BadZipFile: Bad CRC-32 for file 'archive/data/12'"


def test_a_compressed_member_is_not_torchs(tmp_path):
    stored_zip(tmp_path / "c.pt", {"archive/data/0": b"x" * 1000}, zipfile.ZIP_DEFLATED)
    assert zip_damage(tmp_path / "c.pt") == "a compressed member: torch writes its members stored"
