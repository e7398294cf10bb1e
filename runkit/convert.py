"""The checks of a record `.pt` file that need no torch import, for both trainers' readers
(jaxgpt.run.convert.read_record_payload, torch_ref.run.convert.read_checkpoint): its zip
container before torch.load sees it (`zip_damage`), then the 'model' item it loaded
(`state_dict_problem`, told by the reader what a torch tensor is)."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def zip_damage(path: Path) -> str | None:
    """What is wrong with a torch file's zip container, or None: every member is read once and
    its CRC-32 checked (torch.load does not check them, so a flipped bit in a tensor would load
    as a silently different weight). Members written without a CRC (torch's
    `set_crc32_options(False)`: 0) are not checked; a file that is not a zip is torch.load's to judge."""
    if not zipfile.is_zipfile(path):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            members = [info for info in archive.infolist() if info.CRC != 0 or info.file_size == 0]
            if any(info.compress_type != zipfile.ZIP_STORED for info in members):
                return "a compressed member: torch writes its members stored"
            for info in members:
                with archive.open(info) as member:  # the CRC is compared once the member is read
                    while member.read(1 << 24):
                        pass
    except Exception as error:  # noqa: BLE001 - zipfile raises BadZipFile, EOFError, ValueError, ... on damage
        return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:150]}"
    return None


def state_dict_problem(state_dict: Any, is_tensor: Callable[[Any], bool]) -> str | None:
    """What makes a loaded 'model' item unusable as a state dict, or None: it must map str keys
    to floating-point tensors (`is_tensor`: the reader's test of a torch tensor), each backed by
    as many bytes as it holds (a tensor expanded from a small storage would claim an absurd size
    that a copy then allocates)."""
    if not isinstance(state_dict, dict):
        return f"is a {type(state_dict).__name__}, not a dict"
    for key, value in state_dict.items():
        if not isinstance(key, str):
            return f"has a key that is not a name: {key!r:.80}"
        if not is_tensor(value) or not hasattr(value, "untyped_storage"):
            return f"holds a {type(value).__name__} at {key!r:.80}, not a tensor"
        if not value.is_floating_point():
            return f"holds {key!r:.80} of dtype {value.dtype}, not a floating-point tensor"
        if value.numel() * value.element_size() > value.untyped_storage().nbytes():
            return (f"holds {key!r:.80} of shape {tuple(value.shape)} over a storage of "
                    f"{value.untyped_storage().nbytes()} bytes (an expanded tensor)")
    return None
