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

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
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
            # no cache: a stale cache entry may name an image file that is not a device here
            found.extend(_blkid("-c", "/dev/null", "-o", "device", "-t", f"LABEL={label}"))
    devices = []
    for dev in dict.fromkeys(found):
        if not _is_block_device(dev):
            continue
        fstype = fs_type(dev)
        if fstype in fstypes:
            devices.append(dev)
        else:
            LOG.debug("ignoring %s: filesystem %r is not one of %s", dev, fstype, ", ".join(fstypes))
    return sorted(devices)


def _is_block_device(path: str) -> bool:
    import stat

    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def fs_type(device: str) -> str | None:
    values = _blkid("-c", "/dev/null", "-o", "value", "-s", "TYPE", device)
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
    """Yield a directory with ``device``'s files: its existing mount point or a private one.

    When the kernel cannot mount the filesystem (no iso9660/vfat support, no privilege to
    mount), the files are read in userspace into a private directory instead.
    """
    existing = _mountpoint_of(device)
    if existing:
        yield existing
        return
    # /run is there from the first moment of boot; /tmp may not be mounted yet
    target = tempfile.mkdtemp(prefix="cloudseed-seed-", dir="/run" if os.path.isdir("/run") else None)
    os.chmod(target, 0o700)
    try:
        try:
            proc = subprocess.run(
                ["mount", "-o", "ro,nosuid,nodev,noexec", "-t", ",".join(fstypes), device, target],
                capture_output=True, text=True, timeout=30,
            )
            mount_error = proc.stderr.strip() or f"mount exited {proc.returncode}" if proc.returncode else ""
        except (OSError, subprocess.TimeoutExpired) as e:
            mount_error = str(e)
        if not mount_error:
            try:
                yield target
            finally:
                subprocess.run(["umount", target], capture_output=True, timeout=30)
            return
        LOG.info("cannot mount %s (%s); reading it in userspace", device, mount_error.splitlines()[0])
        _extract_userspace(device, target, mount_error)
        try:
            yield target
        finally:
            import shutil

            shutil.rmtree(target, ignore_errors=True)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(target)


def _extract_userspace(device: str, target: str, mount_error: str) -> None:
    try:
        from cloudseed.agent.seedfs import SeedFSError, extract
    except ImportError:
        raise MountError(f"cannot mount {device}: {mount_error}") from None
    try:
        extract(device, target)
    except (SeedFSError, OSError) as e:
        raise MountError(f"cannot read {device}: mount failed ({mount_error.splitlines()[0]}) "
                         f"and the userspace reader failed too: {e}") from None
