"""Build a seed image file from an InstanceSpec: choose the layout and the filesystem, write atomically.

The image is written to a temporary file beside ``out_path`` and renamed into place only when
complete, so a failed build never leaves a half-written seed where the old one was.
"""

from __future__ import annotations

import os
import tempfile

from cloudseed.provider.seeds.content import (
    CONFIGDRIVE_LABEL,
    NOCLOUD_LABEL,
    configdrive_files,
    nocloud_files,
)
from cloudseed.provider.seeds.errors import SeedError
from cloudseed.provider.seeds.spec import InstanceSpec

KINDS = ("nocloud", "configdrive", "azure")
FILESYSTEMS = ("iso9660", "vfat", "udf")  # udf: Azure's media only (UDF with an ISO 9660 bridge)


def seed_files(kind: str, spec: InstanceSpec) -> tuple[dict[str, bytes], str]:
    """(files, volume label) of a seed of ``kind`` for ``spec``."""
    if kind == "nocloud":
        return nocloud_files(spec), NOCLOUD_LABEL
    if kind == "configdrive":
        return configdrive_files(spec), CONFIGDRIVE_LABEL
    if kind == "azure":
        from cloudseed.provider.seeds.azure import AZURE_LABEL, azure_files

        return azure_files(spec), AZURE_LABEL
    raise SeedError(f"--kind {kind!r}: must be one of {', '.join(KINDS)}")


def build_seed(kind: str, fs: str, spec: InstanceSpec, out_path: str, epoch: int | None = None) -> dict:
    """Write the seed image to ``out_path``; returns a summary (label, files, size)."""
    if fs not in FILESYSTEMS:
        raise SeedError(f"--fs {fs!r}: must be one of {', '.join(FILESYSTEMS)}")
    if kind == "azure" and fs not in ("iso9660", "udf"):
        raise SeedError("--kind azure: Azure's provisioning media is UDF or ISO 9660; use --fs udf or iso9660")
    if fs == "udf" and kind != "azure":
        raise SeedError(f"--fs udf: only for --kind azure (a {kind} seed is ISO 9660 or VFAT)")
    files, label = seed_files(kind, spec)
    directory = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(directory):
        raise SeedError(f"-o {out_path}: directory {directory} does not exist")
    handle, temp = tempfile.mkstemp(prefix=".seed-", dir=directory)
    try:
        if fs in ("iso9660", "udf"):
            from cloudseed.provider.seeds.iso9660 import write_iso

            with os.fdopen(handle, "wb") as out:
                write_iso(files, label, out, epoch, udf=fs == "udf")
        else:
            from cloudseed.provider.seeds.vfat import write_vfat

            os.close(handle)
            write_vfat(files, label.upper(), temp, epoch)
        os.chmod(temp, 0o600)  # user-data and keys: readable by its owner only
        os.replace(temp, out_path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    return {"kind": kind, "fs": fs, "label": label if fs != "vfat" else label.upper(),
            "files": sorted(files), "size": os.path.getsize(out_path), "path": out_path}
