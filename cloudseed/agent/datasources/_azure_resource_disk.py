"""Azure's resource ("temporary storage") disk: may it be reformatted as ext4 for ``/mnt``?

Facts from cloud-init 22.4's DataSourceAzure (``RESOURCE_DISK_PATH``,
``BUILTIN_CLOUD_EPHEMERAL_DISK_CONFIG``, ``can_dev_be_reformatted``, ``address_ephemeral_resize``,
``never_destroy_ntfs``) and its ``66-azure-ephemeral.rules``; the code is ours. The platform hands
the disk out NTFS-formatted: a partition table with one partition (two on disks over 2 TB, a
Microsoft reserved partition first), the last one NTFS, holding only
``DATALOSS_WARNING_README.txt``. Only such a disk is reformatted; anything else is left alone and
the reason said. The NTFS root is listed read-only: mounted (``ntfs3``, or ``ntfs``, which may be
ntfs-3g's FUSE helper), else with ntfs-3g's ``ntfsls``; when neither can read it the disk is kept
(cloud-init 22.4 then assumes it is empty and formats it).
"""

from __future__ import annotations

import logging
import os
import shutil

from cloudseed.core.root import run_on_machine

LOG = logging.getLogger("cloudseed.datasources.azure")

RESOURCE_DISK = "/dev/disk/cloud/azure_resource"  # the udev rule's link (66-cloudseed-azure-ephemeral.rules)
PRESERVE_KEY = "never_destroy_ntfs"  # datasource: Azure: {never_destroy_ntfs: true}
# names a fresh resource disk may hold (compared without case); cloud-init 22.4 ignores only the first
IGNORED_NAMES = ("dataloss_warning_readme.txt", "system volume information")
# cloud-init's built-in config for the disk, merged only when it may be reformatted
EPHEMERAL_CLOUD_CONFIG = {
    "disk_setup": {"ephemeral0": {"table_type": "gpt", "layout": [100], "overwrite": True}},
    "fs_setup": [{"filesystem": "ext4", "device": "ephemeral0.1"}],
}
TIMEOUT = 30  # seconds for one mount, ntfsls or umount


class Verdict:
    """Whether the disk may be reformatted, and why (a sentence naming the disk)."""

    __slots__ = ("safe", "reason")

    def __init__(self, safe: bool, reason: str):
        self.safe = safe
        self.reason = reason

    def __repr__(self) -> str:
        return f"Verdict({self.safe}, {self.reason!r})"


class NtfsReadError(Exception):
    """The NTFS root could not be listed; the message says why and what to install."""


def partitions(disk: str, limit: int = 16) -> list[str]:
    """The partition nodes of ``disk`` (``-part1`` for udev's links, ``p1``, ``1``), in number order."""
    for suffix in ("-part", "p", ""):
        found = [f"{disk}{suffix}{n}" for n in range(1, limit) if os.path.exists(f"{disk}{suffix}{n}")]
        if found:
            return found
    return []


def is_ntfs(node: str) -> bool:
    """Does ``node`` start with an NTFS boot sector (OEM id ``NTFS    ``, the 0x55AA signature)?"""
    try:
        with open(node, "rb") as f:
            sector = f.read(512)
    except OSError:
        return False
    return len(sector) == 512 and sector[3:11] == b"NTFS    " and sector[510:512] == b"\x55\xaa"


def looks_fresh(disk: str) -> bool:
    """1 or 2 partitions, the last one NTFS: what a later boot checks first (no process started)."""
    found = partitions(disk)
    return 1 <= len(found) <= 2 and is_ntfs(found[-1])


def filesystem_of(node: str) -> str:
    """What blkid's low-level probe says ``node`` holds (``ext4``...), or a phrase when nothing."""
    proc = run_on_machine(["blkid", "-c", "/dev/null", "-p", "-o", "value", "-s", "TYPE", node], timeout=TIMEOUT)
    if proc.returncode in (124, 127):  # blkid missing or stuck
        return "no NTFS boot sector"
    return proc.stdout.strip() or "no filesystem blkid knows"


def _mounted_listing(node: str) -> tuple[list[str] | None, str]:
    """(names in the root, "") when a read-only mount worked; (None, why) otherwise."""
    import tempfile

    errors = []
    for fstype in ("ntfs3", "ntfs"):
        target = tempfile.mkdtemp(prefix="cloudseed-ntfs-", dir="/run" if os.path.isdir("/run") else None)
        try:
            proc = run_on_machine(["mount", "-o", "ro,nosuid,nodev,noexec", "-t", fstype, node, target],
                                  timeout=TIMEOUT)
            if proc.returncode != 0:
                lines = (proc.stderr or proc.stdout).strip().splitlines()
                errors.append(f"mount -t {fstype}: {lines[0] if lines else f'exit {proc.returncode}'}")
                continue
            try:
                return os.listdir(target), ""
            finally:
                run_on_machine(["umount", target], timeout=TIMEOUT)
        finally:
            try:
                os.rmdir(target)
            except OSError:
                LOG.warning("Azure: %s could not be removed (still mounted?)", target)
    return None, "; ".join(errors)


def _ntfsls_listing(node: str) -> list[str]:
    tool = shutil.which("ntfsls")
    if tool is None:
        raise FileNotFoundError("ntfsls")
    proc = run_on_machine([tool, node], timeout=TIMEOUT, text=False)
    if proc.returncode == 124:
        raise NtfsReadError(f"ntfsls {node} did not finish in {TIMEOUT}s")
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise NtfsReadError(f"ntfsls {node} exited {proc.returncode}" + (f": {lines[0]}" if lines else ""))
    return [line for line in proc.stdout.decode("utf-8", "replace").splitlines() if line not in ("", ".", "..")]


def list_ntfs_root(node: str, ways: tuple[str, ...] = ("mount", "ntfsls")) -> tuple[list[str], str]:
    """(the names in the root of NTFS ``node``, how they were read); NtfsReadError when unreadable."""
    problems = []
    for way in ways:
        if way == "mount":
            names, why = _mounted_listing(node)
            if names is not None:
                return names, "mounted read-only"
            problems.append(why)
        elif way == "ntfsls":
            try:
                return _ntfsls_listing(node), "ntfsls"
            except FileNotFoundError:
                problems.append("ntfsls is not installed")
    if problems and not any("unknown filesystem type" in p or "not installed" in p for p in problems):
        raise NtfsReadError("; ".join(problems))
    raise NtfsReadError("this system can read NTFS neither with the kernel (ntfs3) nor with ntfs-3g's ntfsls: "
                        "install ntfs-3g" + (f" ({'; '.join(problems)})" if problems else ""))


def reformat_verdict(disk: str, preserve_ntfs: bool = False,
                     ways: tuple[str, ...] = ("mount", "ntfsls")) -> Verdict:
    """May resource disk ``disk`` be repartitioned and formatted? Only a fresh one from the platform.

    As cloud-init 22.4's checks: the config's ``never_destroy_ntfs``; 1 or 2 partitions, the last
    NTFS; nothing on it but the dataloss warning. Unlike 22.4, an NTFS this system cannot read
    (and one whose listing fails) is kept, and ``System Volume Information`` is ignored too.
    """
    if preserve_ntfs:
        return Verdict(False, f"the config says never to destroy NTFS (datasource.Azure.{PRESERVE_KEY})")
    if not os.path.exists(disk):
        return Verdict(False, f"{disk} does not exist")
    found = partitions(disk)
    if not found:
        return Verdict(False, f"{disk} is not partitioned")
    if len(found) > 2:
        return Verdict(False, f"{disk} has {len(found)} partitions ({' '.join(found)}); "
                              "a fresh resource disk has 1 or 2")
    number, node = len(found), found[-1]
    where = f"partition {number} ({os.path.realpath(node)}) of {disk}"
    if not is_ntfs(node):
        return Verdict(False, f"{where} is not NTFS ({filesystem_of(node)})")
    try:
        names, how = list_ntfs_root(node, ways)
    except NtfsReadError as e:
        return Verdict(False, f"{where} is NTFS but its files could not be listed: {e}")
    kept = sorted(n for n in names if n.lower() not in IGNORED_NAMES)
    if kept:
        shown = ", ".join(kept[:5]) + (f" and {len(kept) - 5} more" if len(kept) > 5 else "")
        return Verdict(False, f"{where} is NTFS and holds files: {shown}")
    return Verdict(True, f"{where} is NTFS holding only the platform's dataloss warning ({how})")
