"""The part of reading a record `.pt` file that needs no torch, for both trainers' readers
(jaxgpt.run.convert.read_record_payload, torch_ref.run.convert.read_checkpoint): its zip
container checked before torch.load sees it."""

from __future__ import annotations

import zipfile
from pathlib import Path


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
