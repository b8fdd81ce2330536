"""New partition tables for ``disk_setup``: the layout rule, probing what a disk holds, writing with sfdisk/sgdisk.

A layout is ``true`` (one partition filling the disk) or a list of sizes in percent of the disk,
each optionally with a partition type (``[[66, 82], 33]``): MBR types as hex bytes (83 Linux, 82
swap), GPT types as sgdisk codes (``82`` is ``8200``). The last partition takes the rest of the
disk. MBR tables are written with one ``sfdisk`` script, GPT tables with one ``sgdisk`` run, or
with ``sfdisk`` (types as GUIDs) on images without gdisk; all through the target root. A disk is
probed with ``blkid`` (filesystem or partition table signatures) and sysfs (partitions the kernel
knows): a disk with anything on it is only written with ``overwrite``.
"""

from __future__ import annotations

import os
import time

from cloudseed.core.root import CommandError, TargetRoot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class LayoutError(Exception):
    """The layout cannot be applied; the message names the key and the reason."""


def probe(root: TargetRoot, device: str) -> dict[str, str]:
    """``blkid`` facts of ``device`` (TYPE, LABEL, PTTYPE, ...), {} when it holds no signature."""
    try:
        proc = root.run(["blkid", "-c", "/dev/null", "-o", "export", "-p", device], check=False)
    except CommandError as e:
        raise LayoutError(f"cannot probe {device}: {e}") from None
    if proc.returncode not in (0, 2):
        detail = (proc.stderr or proc.stdout).strip()
        raise LayoutError(f"blkid {device} exited {proc.returncode}" + (f": {detail}" if detail else ""))
    facts = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            facts[key.strip()] = value.strip()
    return facts


def kernel_name(device: str) -> str:
    return os.path.basename(os.path.realpath(device))


def is_whole_disk(device: str) -> bool:
    name = kernel_name(device)
    return os.path.isdir(f"/sys/class/block/{name}") and not os.path.exists(f"/sys/class/block/{name}/partition")


def kernel_partitions(device: str) -> list[str]:
    """The partitions the kernel knows on ``device``, as /dev paths in number order."""
    name = kernel_name(device)
    found = []
    try:
        entries = os.listdir(f"/sys/class/block/{name}")
    except OSError:
        return []
    for entry in entries:
        try:
            with open(f"/sys/class/block/{name}/{entry}/partition") as handle:
                found.append((int(handle.read().strip()), f"/dev/{entry}"))
        except (OSError, ValueError):
            continue
    return [path for _, path in sorted(found)]


def disk_sectors(device: str) -> tuple[int, int]:
    """(size in logical sectors, logical sector size) from sysfs."""
    name = kernel_name(device)
    with open(f"/sys/class/block/{name}/size") as handle:
        size_512 = int(handle.read().strip())
    try:
        with open(f"/sys/class/block/{name}/queue/logical_block_size") as handle:
            sector = int(handle.read().strip())
    except (OSError, ValueError):
        sector = 512
    return size_512 * 512 // sector, sector


def normalise_layout(layout: Any, where: str) -> list[tuple[int, str | None]]:
    """``[(percent, type or None), ...]``; ``true`` is one partition of 100%."""
    if layout is True:
        return [(100, None)]
    if not isinstance(layout, list) or not layout:
        raise LayoutError(f"{where}.layout: expected true, 'remove' or a list of sizes in percent, got {layout!r}")
    parts: list[tuple[int, str | None]] = []
    for index, item in enumerate(layout):
        kind = None
        if isinstance(item, list):
            if len(item) != 2:
                raise LayoutError(f"{where}.layout[{index}]: expected [percent, type], got {item!r}")
            item, kind = item
            kind = str(kind)
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not 0 < item <= 100:
            raise LayoutError(f"{where}.layout[{index}]: expected a size in percent (1-100), got {item!r}")
        parts.append((int(item), kind))
    if sum(p for p, _ in parts[:-1]) >= 100:
        raise LayoutError(f"{where}.layout: the sizes add up to more than 100%")
    return parts


def mbr_script(parts: list[tuple[int, str | None]], sectors: int) -> str:
    if len(parts) > 4:
        raise LayoutError("layout: an MBR table holds at most 4 primary partitions (use table_type: gpt)")
    lines = ["label: dos"]
    for index, (percent, kind) in enumerate(parts):
        kind = kind or "83"
        try:
            int(kind, 16)
        except ValueError:
            raise LayoutError(f"layout[{index}]: MBR partition type {kind!r} is not a hex byte (83, 82)") from None
        if index == len(parts) - 1:
            lines.append(f"type={kind}")
        else:
            lines.append(f"size={int(sectors * percent / 100)}, type={kind}")
    return "\n".join(lines) + "\n"


# sgdisk type codes -> GPT partition type GUIDs (the common ones), for writing GPT with sfdisk
GPT_TYPES = {
    "8300": "0FC63DAF-8483-4772-8E79-3D69D8477DE4", "8200": "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F",
    "8e00": "E6D6D379-F507-44C2-A23C-238F2A3DF928", "fd00": "A19D880F-05FC-4D3B-A006-743F0F84911E",
    "ef00": "C12A7328-F81F-11D2-BA4B-00A0C93EC93B", "ef02": "21686148-6449-6E6F-744E-656564454649",
    "0700": "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7", "8301": "8DA63339-0007-60C0-C436-083AC8230908",
    "8302": "933AC7E1-2EB4-4F13-B844-0E14E2AEF915", "8304": "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709",
}


def gpt_guid(kind: str | None) -> str | None:
    """The type GUID for a cloud-config GPT type (``82``, ``8200``, a GUID); None when not known here."""
    if kind is None:
        return GPT_TYPES["8300"]
    if len(kind) == 36 and kind.count("-") == 4:
        return kind.upper()
    return GPT_TYPES.get(gpt_code(kind).lower())


def gpt_script(parts: list[tuple[int, str | None]], sectors: int) -> str:
    """The sfdisk script of a GPT layout (every type known as a GUID); LayoutError otherwise."""
    lines = ["label: gpt"]
    for index, (percent, kind) in enumerate(parts):
        guid = gpt_guid(kind)
        if guid is None:
            raise LayoutError(f"layout[{index}]: GPT type {kind!r} needs sgdisk (gdisk) on the target, "
                              f"or give it as a GUID")
        size = "" if index == len(parts) - 1 else f"size={int(sectors * percent / 100)}, "
        lines.append(f"{size}type={guid}")
    return "\n".join(lines) + "\n"


def gpt_code(kind: str) -> str:
    """sgdisk's type code for a cloud-config type: ``82`` -> ``8200``, ``8e00`` and GUIDs as given."""
    return kind if len(kind) > 4 else kind.ljust(4, "0")


def sgdisk_args(parts: list[tuple[int, str | None]], sectors: int) -> list[str]:
    args = []
    for number, (percent, kind) in enumerate(parts, start=1):
        end = "0" if number == len(parts) else f"+{int(sectors * percent / 100)}"
        args += ["-n", f"{number}:0:{end}"]
        if kind is not None:
            args += ["-t", f"{number}:{gpt_code(kind)}"]
    return args


def current_types(root: TargetRoot, device: str, table_type: str) -> list[str] | None:
    """The partition types of the table on ``device`` in the style of the layout, None without one."""
    import json

    proc = root.run(["sfdisk", "--json", device], check=False)
    if proc.returncode != 0:
        return None
    try:
        table = json.loads(proc.stdout)["partitiontable"]
    except (ValueError, KeyError):
        return None
    label = "mbr" if table.get("label") == "dos" else table.get("label")
    if label != table_type:
        return None
    types = [str(p.get("type", "")).lower() for p in table.get("partitions", [])]
    if table_type == "mbr":
        return [t for t in types if t not in ("5", "f", "85", "0")]
    return types  # GPT type GUIDs


def layout_matches(found: list[str] | None, parts: list[tuple[int, str | None]], table_type: str) -> bool:
    if found is None or len(found) != len(parts):
        return False
    for have, (_percent, kind) in zip(found, parts):
        if kind is None:
            continue
        if table_type == "mbr":
            try:
                if int(have, 16) != int(kind, 16):
                    return False
            except ValueError:
                return False
        elif (gpt_guid(kind) or "").lower() != have:
            return False
    return True


def wipe(root: TargetRoot, device: str) -> None:
    """Remove every signature of the partitions of ``device`` and of the disk itself."""
    for partition in kernel_partitions(device):
        root.run(["wipefs", "--all", "--force", partition])
    root.run(["wipefs", "--all", "--force", device])


def write_table(root: TargetRoot, device: str, table_type: str, parts: list[tuple[int, str | None]]) -> None:
    sectors, _sector_size = disk_sectors(device)
    if table_type == "mbr":
        root.run(["sfdisk", "--wipe", "always", "--wipe-partitions", "always", device],
                 input=mbr_script(parts, sectors))
    elif root.which("sgdisk") or any(gpt_guid(kind) is None for _, kind in parts):
        # one run (sgdisk waits about a second for the kernel each time): a new empty GPT, then the partitions
        root.run(["sgdisk", "--clear", *sgdisk_args(parts, sectors), device])
    else:  # images without gdisk: sfdisk writes GPT too (the types as GUIDs)
        root.run(["sfdisk", "--wipe", "always", "--wipe-partitions", "always", device],
                 input=gpt_script(parts, sectors))
    settle(root, device, len(parts))


def settle(root: TargetRoot, device: str, count: int, timeout: float = 10.0) -> None:
    """Have the kernel re-read the table and wait until its ``count`` partition nodes exist."""
    root.run(["partx", "--update", device], check=False)
    if root.is_live and root.which("udevadm"):
        root.run(["udevadm", "settle", "--timeout=10"], check=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        parts = kernel_partitions(device)
        if len(parts) >= count and all(os.path.exists(p) for p in parts[:count]):
            return
        time.sleep(0.1)
    raise LayoutError(f"{device}: the kernel shows {len(kernel_partitions(device))} of {count} new partitions")
