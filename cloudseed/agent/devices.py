"""Finding seed filesystems by label and reading them through a private read-only mount.

Used by the datasources that read a disk (NoCloud ``cidata``, ConfigDrive ``config-2``).
Devices are always the running machine's, also when the agent works on another root.
"""

from __future__ import annotations

import contextlib
import logging
import os

from cloudseed.core.root import run_on_machine

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Iterator, Sequence


LOG = logging.getLogger("cloudseed.devices")

SEED_FSTYPES = ("iso9660", "vfat")


def _blkid(*args: str) -> list[str]:
    proc = run_on_machine(["blkid", *args], timeout=20)
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def _udev_label_path(label: str) -> str:
    encoded = "".join(c if c.isalnum() or c in "#+-.:=@_" else f"\\x{ord(c):02x}" for c in label)
    return f"/dev/disk/by-label/{encoded}"


SYS_BLOCK = "/sys/class/block"
UDEV_DATA = "/run/udev/data"


def _block_devices() -> list[str]:
    """Every block device the kernel knows (disks and partitions) that may hold a filesystem, as /dev paths."""
    try:
        names = sorted(os.listdir(SYS_BLOCK))
    except OSError:
        return []
    devices = []
    for name in names:
        if name.startswith(("ram", "zram", "dm-", "md")):
            continue
        if name.startswith("loop") and not os.path.exists(f"{SYS_BLOCK}/{name}/loop/backing_file"):
            continue  # an unused loop device
        if _sys_value(f"/dev/{name}", "size") == "0" or _empty_disc_drive(name):
            continue  # no medium: an empty drive is slow to open (0.1-0.2 s each under emulation)
        devices.append(f"/dev/{name}")
    return devices


def _empty_disc_drive(name: str) -> bool:
    """Has udev's ``cdrom_id`` found this CD/DVD drive empty? (An empty drive's size reads as 1 GiB.)

    Only udev's own record decides (``ID_CDROM=1`` without ``ID_CDROM_MEDIA=1``); a drive udev has
    not seen yet is opened as before.
    """
    number = _sys_value(f"/dev/{name}", "dev")
    if not number:
        return False
    try:
        with open(f"{UDEV_DATA}/b{number}") as f:
            record = f.read().splitlines()
    except OSError:
        return False
    return "E:ID_CDROM=1" in record and "E:ID_CDROM_MEDIA=1" not in record


# (device, loop backing file, size) -> (fstype, label): read once per process, so detection and
# fetching do not both scan; the key changes when a loop device is re-attached to another image.
_LABELS: dict[tuple[str, str, str], tuple[str, str] | None] = {}


def _sys_value(device: str, name: str) -> str:
    try:
        with open(f"{SYS_BLOCK}/{os.path.basename(device)}/{name}") as f:
            return f.read().strip()
    except OSError:
        return ""


def _label_of(device: str) -> tuple[str, str] | None:
    key = (device, _sys_value(device, "loop/backing_file"), _sys_value(device, "size"))
    if key not in _LABELS:
        from cloudseed.agent.seedfs import read_label

        _LABELS[key] = read_label(device)
    return _LABELS[key]


def find_devices_by_label(labels: Sequence[str], fstypes: Sequence[str] = SEED_FSTYPES) -> list[str]:
    """Block devices carrying one of ``labels`` (compared without case) with one of ``fstypes``.

    The superblocks are read directly (a few KiB per device, no process started), the way
    blkid would; udev's by-label links and blkid are only the fallbacks.
    """
    wanted = {label.lower() for label in labels}
    found: list[str] = []
    scanned = _block_devices()
    for device in scanned:
        probe = _label_of(device)
        if probe and probe[0] in fstypes and probe[1].lower() in wanted:
            found.append(device)
    if found or scanned:
        return found
    for label in labels:  # no sysfs (a container?): ask udev and blkid
        link = _udev_label_path(label)
        if os.path.exists(link):
            found.append(os.path.realpath(link))
        else:
            # no cache: a stale cache entry may name an image file that is not a device here
            found.extend(_blkid("-c", "/dev/null", "-o", "device", "-t", f"LABEL={label}"))
    return sorted(dev for dev in dict.fromkeys(found) if _is_block_device(dev) and fs_type(dev) in fstypes)


def probed_devices() -> list[tuple[str, tuple[str, str] | None]]:
    """Every block device with its ``(fstype, label)`` (None: neither ISO 9660 nor FAT), as
    ``find_devices_by_label`` reads them: one scan that several questions can share."""
    return [(device, _label_of(device)) for device in _block_devices()]


def is_udf(device: str) -> bool:
    """A UDF volume recognition sequence (``NSR02``/``NSR03`` after ``BEA01``) from sector 16 on."""
    try:
        with open(device, "rb") as f:
            f.seek(32768)
            head = f.read(8 * 2048)
    except OSError:
        return False
    return b"BEA01" in head and (b"NSR02" in head or b"NSR03" in head)


def volume_id(device: str) -> str:
    """The filesystem UUID as blkid prints it (FAT: the volume serial ``XXXX-XXXX``), or ''."""
    try:
        with open(device, "rb") as f:
            boot = f.read(512)
    except OSError:
        return ""
    if len(boot) == 512 and boot[510:512] == b"\x55\xaa" and boot[11:13] in (b"\x00\x02", b"\x00\x04",
                                                                           b"\x00\x08", b"\x00\x10"):
        fat32 = int.from_bytes(boot[22:24], "little") == 0  # no 16-bit sectors-per-FAT count
        serial = int.from_bytes(boot[67:71] if fat32 else boot[39:43], "little")
        return f"{serial >> 16:04X}-{serial & 0xFFFF:04X}"
    values = _blkid("-c", "/dev/null", "-o", "value", "-s", "UUID", device)
    return values[0].upper() if values else ""


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
    """Yield a directory with ``device``'s files: its existing mount point or a private copy.

    The files are read in userspace into a private directory (0700, on /run); only when that
    reader cannot handle the filesystem is the device mounted read-only there instead.
    """
    existing = _mountpoint_of(device)
    if existing:
        yield existing
        return
    # /run is there from the first moment of boot; /tmp may not be mounted yet
    target = _private_dir("/run/cloudseed-seed-") if os.path.isdir("/run") else _temporary_dir()
    os.chmod(target, 0o700)
    try:
        # Userspace first: no kernel module to load, no mount/umount processes, works unprivileged.
        userspace_error = _extract_userspace(device, target)
        if userspace_error is None:
            try:
                yield target
            finally:
                _remove_copy(target)
            return
        LOG.info("reading %s in userspace failed (%s); mounting it", device, userspace_error)
        proc = run_on_machine(["mount", "-o", "ro,nosuid,nodev,noexec", "-t", ",".join(fstypes), device, target])
        mount_error = proc.stderr.strip() or f"mount exited {proc.returncode}" if proc.returncode else ""
        if mount_error:
            raise MountError(f"cannot read {device}: {userspace_error}; and mount failed: "
                             f"{mount_error.splitlines()[0]}")
        try:
            yield target
        finally:
            run_on_machine(["umount", target])
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(target)


def _private_dir(prefix: str) -> str:
    """A new directory ``prefix<pid>-<n>``, mode 0700, made by this call (``mkdir`` fails on any name
    that exists, a link included). Not ``tempfile.mkdtemp``: tempfile (with shutil, random, bz2 and
    lzma) is a tenth of a second or more of imports under TCG in the local stage of every boot that
    reads a seed ISO, and /run is writable by root alone, so a name need not be unguessable."""
    for attempt in range(1000):
        path = f"{prefix}{os.getpid()}-{attempt}"
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no unused name for a directory {prefix}...")


def _temporary_dir() -> str:
    import tempfile  # no /run (a container, a test): the user's temporary directory

    return tempfile.mkdtemp(prefix="cloudseed-seed-")


def _remove_copy(target: str) -> None:
    """Remove the private copy of a seed (its files and directories), as far as it can."""
    for top, dirs, files in os.walk(target, topdown=False):
        for name in files:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(top, name))
        for name in dirs:
            path = os.path.join(top, name)
            with contextlib.suppress(OSError):
                os.unlink(path) if os.path.islink(path) else os.rmdir(path)


def _extract_userspace(device: str, target: str) -> str | None:
    """Copy the seed's files into ``target``; None on success, else why not (target left empty)."""
    from cloudseed.agent.seedfs import SeedFSError, extract

    try:
        extract(device, target)
        return None
    except (SeedFSError, OSError) as e:
        return str(e)
