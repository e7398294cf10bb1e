"""runkit.convert: a torch file's zip container checked before torch.load reads it, and the
'model' item it loaded (both trainers' readers on damaged and mutated files, real tensors:
tests/run/test_convert_fuzz.py, tests/torch_ref/run/test_checkpoint_fuzz.py)."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass

import pytest

from runkit.convert import state_dict_problem, zip_damage


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


@dataclass
class Storage:
    size: int

    def nbytes(self) -> int:
        return self.size


@dataclass
class FakeTensor:
    """What state_dict_problem reads of a torch tensor."""

    shape: tuple[int, ...]
    dtype: str = "torch.float32"
    stored: int | None = None  # bytes behind it (None: all of them)

    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count

    def element_size(self) -> int:
        return 4

    def is_floating_point(self) -> bool:
        return "float" in self.dtype

    def untyped_storage(self) -> Storage:
        return Storage(self.numel() * 4 if self.stored is None else self.stored)


def is_fake(value) -> bool:
    return isinstance(value, FakeTensor)


@pytest.mark.parametrize("state_dict, problem", [
    ({"embed.weight": FakeTensor((4, 2))}, None),
    ([FakeTensor((4, 2))], "is a list, not a dict"),
    ({3: FakeTensor((4, 2))}, "has a key that is not a name: 3"),
    ({"w": [1.0, 2.0]}, "holds a list at 'w', not a tensor"),
    ({"w": FakeTensor((4,), dtype="torch.int64")}, "holds 'w' of dtype torch.int64, not a floating-point tensor"),
    ({"w": FakeTensor((10**6, 10**6), stored=4)}, "holds 'w' of shape (1000000, 1000000) over a storage of 4 bytes "
                                                  "(an expanded tensor)"),
])
def test_a_state_dict_maps_names_to_whole_floating_point_tensors(state_dict, problem):
    assert state_dict_problem(state_dict, is_fake) == problem
