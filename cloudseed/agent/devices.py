"""Finding seed filesystems by label and reading them through a private read-only mount.

Used by the datasources that read a disk (NoCloud ``cidata``, ConfigDrive ``config-2``).
Devices are always the running machine's, also when the agent works on another root.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import tempfile
from typing import Iterator, Sequence

LOG = logging.getLogger("cloudseed.devices")

SEED_FSTYPES = ("iso9660", "vfat")


def _blkid(*args: str) -> list[str]:
    try:
        proc = subprocess.run(["blkid", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def _udev_label_path(label: str) -> str:
    encoded = "".join(c if c.isalnum() or c in "#+-.:=@_" else f"\\x{ord(c):02x}" for c in label)
    return f"/dev/disk/by-label/{encoded}"


def find_devices_by_label(labels: Sequence[str], fstypes: Sequence[str] = SEED_FSTYPES) -> list[str]:
    """Block devices carrying one of ``labels`` (any case given) with one of ``fstypes``."""
    found: list[str] = []
    for label in labels:
        link = _udev_label_path(label)
        if os.path.exists(link):
            found.append(os.path.realpath(link))
    if not found:
        for label in labels:
            found.extend(_blkid("-o", "device", "-t", f"LABEL={label}"))
    devices = []
    for dev in dict.fromkeys(found):
        fstype = fs_type(dev)
        if fstype in fstypes:
            devices.append(dev)
        else:
            LOG.debug("ignoring %s: filesystem %r is not one of %s", dev, fstype, ", ".join(fstypes))
    return sorted(devices)


def fs_type(device: str) -> str | None:
    values = _blkid("-o", "value", "-s", "TYPE", device)
    return values[0] if values else None


def _mountpoint_of(device: str) -> str | None:
    real = os.path.realpath(device)
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 1 and os.path.realpath(fields[0]) == real:
                    return fields[1].replace("\\040", " ")
    except OSError:
        pass
    return None


class MountError(Exception):
    """A seed device could not be mounted."""


@contextlib.contextmanager
def mounted_readonly(device: str, fstypes: Sequence[str] = SEED_FSTYPES) -> Iterator[str]:
    """Yield a directory with ``device``'s files: its existing mount point or a private one."""
    existing = _mountpoint_of(device)
    if existing:
        yield existing
        return
    # /run is there from the first moment of boot; /tmp may not be mounted yet
    target = tempfile.mkdtemp(prefix="cloudseed-seed-", dir="/run" if os.path.isdir("/run") else None)
    os.chmod(target, 0o700)
    try:
        proc = subprocess.run(
            ["mount", "-o", "ro,nosuid,nodev,noexec", "-t", ",".join(fstypes), device, target],
            capture_output=True, text=True, timeout=30,
        )
        if proc.returncode != 0:
            raise MountError(f"cannot mount {device}: {proc.stderr.strip() or proc.returncode}")
        try:
            yield target
        finally:
            subprocess.run(["umount", target], capture_output=True, timeout=30)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(target)
