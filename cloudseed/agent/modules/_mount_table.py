"""Which block device and filesystem a mount point of the running system is on.

Used by ``growpart`` and ``resizefs``: read from ``/proc/self/mountinfo`` (the major:minor
number, so ``/dev/root`` resolves) and ``/sys/class/block`` (disk and partition number).
"""

from __future__ import annotations

import os


class MountInfoError(Exception):
    """The mount point or its device could not be found."""


def mount_of(mount_point: str, mountinfo: str = "/proc/self/mountinfo") -> tuple[str, str, str]:
    """``(major:minor, filesystem type, source)`` of the filesystem mounted at ``mount_point``."""
    found = None
    try:
        with open(mountinfo) as f:
            for line in f:
                fields = line.split()
                if len(fields) < 10 or "-" not in fields:
                    continue
                sep = fields.index("-")
                if fields[4].replace("\\040", " ") == mount_point:
                    found = (fields[2], fields[sep + 1], fields[sep + 2])  # the last mount wins
    except OSError as e:
        raise MountInfoError(f"cannot read {mountinfo}: {e.strerror}") from None
    if found is None:
        raise MountInfoError(f"nothing is mounted at {mount_point}")
    return found


def block_device(dev_number: str, sys_block: str = "/sys/dev/block") -> str:
    """The kernel name (``vda1``) of the block device ``major:minor``."""
    link = os.path.join(sys_block, dev_number)
    try:
        return os.path.basename(os.path.realpath(link))
    except OSError:
        raise MountInfoError(f"no block device {dev_number}") from None


def disk_and_partition(name: str, sys_class: str = "/sys/class/block") -> tuple[str, int]:
    """``("vda", 1)`` for the partition ``vda1``; MountInfoError when it is not a partition."""
    base = os.path.join(sys_class, name)
    try:
        with open(os.path.join(base, "partition")) as f:
            number = int(f.read().strip())
    except (OSError, ValueError):
        raise MountInfoError(f"{name} is not a partition") from None
    disk = os.path.basename(os.path.dirname(os.path.realpath(base)))
    return disk, number
