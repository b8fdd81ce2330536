"""Block devices as cloud-config names them: aliases, ``ephemeral0``/``swap``, short names, ``dev.N``.

Shared by ``disk_setup`` (partitions and filesystems) and ``mounts`` (fstab). Devices are the
running machine's (``/dev``, ``/sys/class/block``), also when the agent writes to another root:
that is where the disks are. Names a datasource knows (``ephemeral0``, ``swap``, ``ebs1``,
``root``, ``ami``) come from its EC2-style block-device mapping (EC2 meta-data, or OpenStack's
``ec2_metadata``) where it has one. Sizes are read the way cloud-init documents them (``512M``,
``1.5G``: powers of 1024).
"""

from __future__ import annotations

import os
import re
import stat

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

# sda, sda1, xvdb, hda, vdd1, sr0: written without /dev in cloud-config
SHORT_NAME = re.compile(r"^([x]?[shv]d[a-z][0-9]*|sr[0-9]+)$")
NETWORK_SPEC = re.compile(r"^.+:.*")  # server:/export, //host/share is not (cloud-init's rule)
TAGGED_SPEC = ("LABEL=", "UUID=", "PARTUUID=", "PARTLABEL=")
_SIZE = re.compile(r"^\s*(\d*\.?\d+)\s*([BKMGT]?)B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class DiskError(Exception):
    """A device name cannot be resolved or a device cannot be used; the message says why."""


def human_bytes(value: Any, what: str = "size") -> int:
    """Bytes for ``1073741824``, ``"1G"``, ``".5G"``, ``"512M"``, ``"10MB"``; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a size, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{what}: {value} is negative")
        return value
    if isinstance(value, float):
        return int(value)
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"{what}: {value!r} is not a size (a number of bytes, or like 512M, 2G)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def split_dotted(name: str) -> tuple[str, str | None]:
    """``("my_alias", "1")`` for ``my_alias.1``; ``(name, None)`` without a dot."""
    head, dot, tail = name.rpartition(".")
    return (head, tail) if dot else (name, None)


def is_meta_name(name: str) -> bool:
    """A name the datasource's block-device mapping may define (ephemeral0, swap, ebs1, ...)."""
    return name in ("ami", "root", "swap") or (name.startswith(("ephemeral", "ebs")) and ":" not in name)


def block_device_mapping(datasource: Any) -> dict[str, str]:
    """The EC2-style ``block-device-mapping`` of the datasource, or {}."""
    if datasource is None:
        return {}
    for source in ((getattr(datasource, "metadata", None) or {}),
                   ((getattr(datasource, "raw", None) or {}).get("ec2_metadata") or {})):
        mapping = source.get("block-device-mapping") if isinstance(source, dict) else None
        if isinstance(mapping, dict):
            return {str(k): str(v) for k, v in mapping.items() if v}
    return {}


def mapped_device(name: str, datasource: Any, dev_dir: str = "/dev") -> str | None:
    """The device the datasource maps ``name`` to (``/dev/sdb`` for ephemeral0), or None."""
    mapping = block_device_mapping(datasource)
    names = [name]
    if name == "ephemeral0":
        names.append("ephemeral")  # Eucalyptus spells it without the number
    elif name == "root":
        names.insert(0, "ami")
    elif name == "ami":
        names.append("root")
    for candidate in names:
        found = mapping.get(candidate)
        if not found:
            continue
        path = found if found.startswith("/") else f"{dev_dir}/{found}"
        if os.path.exists(path):
            return path
        # Xen names (sdb) seen by the guest as xvdb, or as vdb under KVM
        base = os.path.basename(path)
        for prefix in ("xvd", "vd"):
            if base.startswith("sd"):
                alternative = f"{dev_dir}/{prefix}{base[2:]}"
                if os.path.exists(alternative):
                    return alternative
        if name == "ephemeral0":
            return None  # mapped but never attached (t1.micro): no fstab line for it
        return path
    return None


def partition_path(disk: str, number: int | str) -> str | None:
    """The existing node of partition ``number`` of ``disk`` (sdb1, nvme0n1p1, ...-part1), or None."""
    for suffix in (f"{number}", f"p{number}", f"-part{number}"):
        candidate = f"{disk}{suffix}"
        if os.path.exists(candidate):
            return candidate
    return None


def partition_name(disk: str, number: int | str) -> str:
    """The node name the kernel gives partition ``number`` of ``disk`` (whether or not it exists yet)."""
    base = os.path.basename(disk)
    return f"{disk}p{number}" if base[-1:].isdigit() else f"{disk}{number}"


def is_block_device(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def resolve(name: str, aliases: dict | None = None, datasource: Any = None) -> str | None:
    """The device path a cloud-config name stands for, or None when there is no such device.

    ``my_alias.2`` -> the second partition of the aliased disk; ``sdb`` -> ``/dev/sdb1`` when that
    partition exists (cloud-init's rule for a bare disk name), else ``/dev/sdb``.
    """
    if name == "ephemeral":
        name = "ephemeral0"
    if NETWORK_SPEC.match(name) or name.startswith(TAGGED_SPEC):
        return name
    device, number = split_dotted(name)
    if aliases and device in aliases:
        device = str(aliases[device])
    if is_meta_name(device):
        found = mapped_device(device, datasource)
        if not found:
            return None
        device = found
    elif SHORT_NAME.match(device):
        device = f"/dev/{device}"
    if number is not None:
        part = partition_path(device, number)
        return part if part and is_block_device(part) else None
    first = partition_path(device, 1)
    if first and is_block_device(first):
        return first
    return device if is_block_device(device) else None
