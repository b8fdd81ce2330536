"""Write a seed as a VFAT (FAT16) image, through pyfatfs.

The image is as small as the files allow (at least 8 MiB, FAT16) and at most 64 MiB, the size
OpenStack gives VFAT config drives; more content is an error that suggests ISO 9660. The volume
id is derived from the content and the clock is frozen, so the same files give the same bytes.
"""

from __future__ import annotations

import hashlib
import os
import struct
from typing import Iterable

from cloudseed.provider.seeds.clock import frozen_clock
from cloudseed.provider.seeds.errors import SeedError
from cloudseed.provider.seeds.names import check_paths

MIB = 1024 * 1024
VFAT_LIMIT = 64 * MIB
MIN_SIZE = 8 * MIB  # FAT16 needs more than 4.1 MB (pyfatfs writes FAT12 tables mtools rejects)


def image_size(files: dict[str, bytes]) -> int:
    """Bytes the image needs: data in clusters, directories, FATs and slack, rounded to a MiB."""
    cluster = 4096  # the largest cluster pyfatfs picks for FAT12/FAT16 at these sizes
    data = sum(-(-len(content) // cluster) * cluster for content in files.values())
    directories = {path.rsplit("/", 1)[0] for path in files if "/" in path}
    needed = data + (len(directories) + 1) * 4 * cluster + 256 * 1024
    return max(MIN_SIZE, -(-int(needed * 1.1) // MIB) * MIB)


def _volume_id(files: dict[str, bytes], label: str) -> int:
    hasher = hashlib.sha256(label.encode())
    for path in sorted(files):
        hasher.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return int.from_bytes(hasher.digest()[:4], "big") or 1


def _parents(paths: Iterable[str]) -> list[str]:
    return sorted({"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 1)})


def _set_geometry(path: str) -> None:
    """Fill the BPB's sectors-per-track and heads (pyfatfs leaves them 0; mtools refuses that)."""
    with open(path, "r+b") as handle:
        handle.seek(24)
        handle.write(struct.pack("<HH", 32, 64))


def write_vfat(files: dict[str, bytes], label: str, out_path: str, epoch: int | None = None) -> None:
    """Create ``out_path`` (a new file) holding ``files`` on a VFAT filesystem labelled ``label``."""
    from pyfatfs.PyFat import PyFat
    from pyfatfs.PyFatFS import PyFatFS

    check_paths(files, "vfat")
    if len(label) > 11:
        raise SeedError(f"volume label {label!r}: VFAT labels have at most 11 characters")
    size = image_size(files)
    if size > VFAT_LIMIT:
        raise SeedError(f"the seed needs {size // MIB} MiB but a VFAT config drive holds at most "
                        f"{VFAT_LIMIT // MIB} MiB; use --fs iso9660 for larger content")
    with open(out_path, "wb"):
        pass
    with frozen_clock(epoch):
        fat = PyFat()
        fat.mkfs(out_path, PyFat.FAT_TYPE_FAT16, size=size, label=label, volume_id=_volume_id(files, label))
        fat.close()
        filesystem = PyFatFS(out_path, utc=True, preserve_case=True)
        try:
            for directory in _parents(files):
                filesystem.makedir("/" + directory)
            for path in sorted(files):
                with filesystem.openbin("/" + path, "w") as handle:
                    handle.write(files[path])
        finally:
            filesystem.close()
    _set_geometry(out_path)
    if os.path.getsize(out_path) != size:
        raise SeedError(f"{out_path}: VFAT image came out {os.path.getsize(out_path)} bytes, expected {size}")
