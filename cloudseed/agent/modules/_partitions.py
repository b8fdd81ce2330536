"""Partition tables (MBR and GPT) read and grown in place: the work behind the growpart module.

Growing a partition into free space after it is a few sector writes: its new end (for GPT also
the backup header and entry array moved to the new end of the disk, with fresh CRCs), then the
kernel is told the new size with BLKPG_RESIZE_PARTITION, as ``partx --update`` does. This takes
milliseconds where the ``growpart`` script takes seconds of ``sfdisk`` runs. The new end is the
one cloud-utils' growpart picks: up to the next partition or the end of the disk, 33 sectors kept
free at the end for a GPT backup, and no change for less than 1 MiB. Layouts not handled here
(MBR extended and logical partitions, GPT headers that fail their checks) raise ``Unsupported``
so the caller can fall back to the ``growpart`` command.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from dataclasses import dataclass

GPT_SIGNATURE = b"EFI PART"
GPT_BACKUP_RESERVE = 33  # sectors growpart leaves after the last partition (GPT backup entries + header)
FUDGE_BYTES = 1024 * 1024  # growing by less than this is not worth it (growpart's FUDGE)
MBR_EXTENDED_TYPES = (0x05, 0x0F, 0x85)
MBR_PROTECTIVE_TYPE = 0xEE
_GPT_HEADER = struct.Struct("<8sIIIIQQQQ16sQIII")  # up to and including the entry array CRC (92 bytes)


class PartitionError(Exception):
    """The partition table cannot be read or written."""


class Unsupported(PartitionError):
    """A layout this module does not grow itself (the growpart command may)."""


@dataclass
class Growth:
    """What growing one partition did (or would do): sectors are in the disk's logical sector size."""

    device: str
    number: int
    table: str  # "gpt" or "dos"
    sector_size: int
    start: int
    old_end: int
    new_end: int
    reason: str = ""  # why nothing changed

    @property
    def changed(self) -> bool:
        return self.new_end != self.old_end


@dataclass
class _Gpt:
    header: bytes
    entries: bytearray
    entries_lba: int
    entry_count: int
    entry_size: int


def _read(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise PartitionError(f"short read at byte {offset}")
    return data


def _write(fd: int, data: bytes, offset: int) -> None:
    if os.pwrite(fd, data, offset) != len(data):
        raise PartitionError(f"short write at byte {offset}")


def _sector_size(device: str, fd: int) -> int:
    if stat.S_ISBLK(os.fstat(fd).st_mode):
        name = os.path.basename(os.path.realpath(device))
        try:
            with open(f"/sys/class/block/{name}/queue/logical_block_size") as f:
                return int(f.read())
        except (OSError, ValueError):
            return 512
    for size in (512, 4096):  # an image file: where the GPT header is tells the sector size
        if os.pread(fd, 8, size) == GPT_SIGNATURE:
            return size
    return 512


def _gpt_header_crc(header: bytes) -> int:
    return zlib.crc32(header[:16] + b"\0\0\0\0" + header[20:])


def _read_gpt(fd: int, sector_size: int) -> _Gpt:
    raw = _read(fd, sector_size, sector_size)
    (signature, _revision, header_size, header_crc, _reserved, my_lba, _alternate, _first, _last, _guid,
     entries_lba, entry_count, entry_size, entries_crc) = _GPT_HEADER.unpack_from(raw)
    if signature != GPT_SIGNATURE:
        raise Unsupported("a protective MBR but no GPT header")
    if not _GPT_HEADER.size <= header_size <= sector_size or my_lba != 1:
        raise Unsupported("the GPT header is malformed")
    header = raw[:header_size]
    if _gpt_header_crc(header) != header_crc:
        raise Unsupported("the primary GPT header fails its CRC check")
    if entry_size < 128 or entry_size % 8 or not 0 < entry_count * entry_size <= 4 * 1024 * 1024:
        raise Unsupported("the GPT partition entry array has an unusual size")
    entries = bytearray(_read(fd, entry_count * entry_size, entries_lba * sector_size))
    if zlib.crc32(entries) != entries_crc:
        raise Unsupported("the GPT partition entries fail their CRC check")
    return _Gpt(header, entries, entries_lba, entry_count, entry_size)


def _gpt_header_with(header: bytes, my_lba: int, alternate: int, last_usable: int, entries_lba: int,
                     entries_crc: int) -> bytes:
    fields = list(_GPT_HEADER.unpack_from(header))
    fields[3] = 0
    fields[5], fields[6], fields[8], fields[10], fields[13] = my_lba, alternate, last_usable, entries_lba, entries_crc
    updated = _GPT_HEADER.pack(*fields) + header[_GPT_HEADER.size:]
    return updated[:16] + struct.pack("<I", _gpt_header_crc(updated)) + updated[20:]


def _max_end(start: int, old_end: int, other_starts: list[int], disk_sectors: int, sector_size: int,
             table: str, gpt_last_usable: int | None) -> tuple[int, str]:
    """The end sector growpart would choose, and why there is no change when it is the old end."""
    following = [s for s in other_starts if s > old_end]
    max_end = min(following, default=disk_sectors) - 1
    if table == "dos":
        max_end = min(max_end, 0xFFFFFFFF)  # an MBR entry counts sectors in 32 bits
    if max_end > disk_sectors - GPT_BACKUP_RESERVE:
        max_end = disk_sectors - GPT_BACKUP_RESERVE - 1
    if gpt_last_usable is not None:
        max_end = min(max_end, gpt_last_usable)
    if max_end == old_end:
        return old_end, f"partition already fills the space up to sector {max_end}"
    if old_end + FUDGE_BYTES // sector_size > max_end:
        return old_end, f"partition could only be grown by {max(max_end - old_end, 0)} sectors"
    return max_end, ""


def _mbr_chs(lba: int) -> bytes:
    """The CHS bytes for ``lba`` in the usual 255-head, 63-sector geometry (the maximum past 1024 cylinders)."""
    cylinder, rest = divmod(lba, 255 * 63)
    if cylinder > 1023:
        return b"\xfe\xff\xff"
    head, sector = divmod(rest, 63)
    return bytes((head, (sector + 1) | ((cylinder >> 2) & 0xC0), cylinder & 0xFF))


def _tell_kernel(fd: int, number: int, start_bytes: int, length_bytes: int) -> None:
    """BLKPG_RESIZE_PARTITION: the kernel's view of a (mounted) partition follows the new table."""
    import ctypes
    import fcntl

    class BlkpgPartition(ctypes.Structure):
        _fields_ = [("start", ctypes.c_longlong), ("length", ctypes.c_longlong), ("pno", ctypes.c_int),
                    ("devname", ctypes.c_char * 64), ("volname", ctypes.c_char * 64)]

    class BlkpgIoctlArg(ctypes.Structure):
        _fields_ = [("op", ctypes.c_int), ("flags", ctypes.c_int), ("datalen", ctypes.c_int),
                    ("data", ctypes.c_void_p)]

    blkpg, resize_partition = 0x1269, 3  # _IO(0x12, 105); BLKPG_RESIZE_PARTITION
    partition = BlkpgPartition(start_bytes, length_bytes, number)
    arg = BlkpgIoctlArg(resize_partition, 0, ctypes.sizeof(partition), ctypes.addressof(partition))
    fcntl.ioctl(fd, blkpg, arg)


def grow(device: str, number: int, dry_run: bool = False) -> Growth:
    """Grow partition ``number`` of ``device`` (a disk or a disk image file) into the free space after it.

    Raises Unsupported for layouts left to the growpart command, PartitionError when the table
    cannot be read or written, and OSError (with the table already written) when the kernel
    refuses the new size of a block device's partition.
    """
    # planned read-only first: with nothing to do (every later boot) the disk is never opened for
    # writing, whose close would make udev probe it and its partitions again
    planned = _grow_opened(device, number, dry_run=True)
    if dry_run or not planned.changed:
        return planned
    return _grow_opened(device, number, dry_run=False)


def _grow_opened(device: str, number: int, dry_run: bool) -> Growth:
    fd = os.open(device, os.O_RDONLY if dry_run else os.O_RDWR)
    try:
        sector_size = _sector_size(device, fd)
        disk_sectors = os.lseek(fd, 0, os.SEEK_END) // sector_size
        mbr = _read(fd, 512, 0)
        if mbr[510:512] != b"\x55\xaa":
            raise PartitionError(f"{device} has no partition table")
        entries = [struct.unpack_from("<4xB3xII", mbr, 446 + 16 * i) for i in range(4)]
        if any(kind == MBR_PROTECTIVE_TYPE for kind, _start, _count in entries):
            protective = next(i for i, (kind, _s, _c) in enumerate(entries) if kind == MBR_PROTECTIVE_TYPE)
            growth = _grow_gpt(fd, device, number, sector_size, disk_sectors, protective, dry_run)
        else:
            growth = _grow_mbr(fd, device, number, sector_size, disk_sectors, mbr, entries, dry_run)
        if growth.changed and not dry_run and stat.S_ISBLK(os.fstat(fd).st_mode):
            _tell_kernel(fd, number, growth.start * sector_size, (growth.new_end - growth.start + 1) * sector_size)
        return growth
    finally:
        os.close(fd)


def _grow_mbr(fd: int, device: str, number: int, sector_size: int, disk_sectors: int, mbr: bytes,
              entries: list[tuple[int, int, int]], dry_run: bool) -> Growth:
    if any(kind in MBR_EXTENDED_TYPES for kind, _start, _count in entries):
        raise Unsupported("an MBR with an extended partition")
    if not 1 <= number <= 4 or entries[number - 1][2] == 0:
        raise PartitionError(f"{device} has no partition {number}")
    _kind, start, count = entries[number - 1]
    old_end = start + count - 1
    others = [s for i, (k, s, c) in enumerate(entries) if c and i != number - 1]
    new_end, reason = _max_end(start, old_end, others, disk_sectors, sector_size, "dos", None)
    growth = Growth(device, number, "dos", sector_size, start, old_end, new_end, reason)
    if growth.changed and not dry_run:
        offset = 446 + 16 * (number - 1)
        _write(fd, _mbr_chs(new_end), offset + 5)
        _write(fd, struct.pack("<I", new_end - start + 1), offset + 12)
        os.fsync(fd)
    return growth


def _grow_gpt(fd: int, device: str, number: int, sector_size: int, disk_sectors: int, protective: int,
              dry_run: bool) -> Growth:
    gpt = _read_gpt(fd, sector_size)
    if not 1 <= number <= gpt.entry_count:
        raise PartitionError(f"{device} has no partition {number}")

    def entry(index: int) -> tuple[bytes, int, int]:
        base = index * gpt.entry_size
        return bytes(gpt.entries[base:base + 16]), *struct.unpack_from("<QQ", gpt.entries, base + 32)

    kind, start, old_end = entry(number - 1)
    if kind == bytes(16):
        raise PartitionError(f"{device} has no partition {number}")
    others = []
    for index in range(gpt.entry_count):
        other_kind, other_start, _other_end = entry(index)
        if index != number - 1 and other_kind != bytes(16):
            others.append(other_start)
    entries_sectors = -(-len(gpt.entries) // sector_size)
    alternate = disk_sectors - 1
    backup_entries_lba = alternate - entries_sectors
    last_usable = backup_entries_lba - 1
    new_end, reason = _max_end(start, old_end, others, disk_sectors, sector_size, "gpt", last_usable)
    growth = Growth(device, number, "gpt", sector_size, start, old_end, new_end, reason)
    if not growth.changed or dry_run:
        return growth
    struct.pack_into("<Q", gpt.entries, (number - 1) * gpt.entry_size + 40, new_end)
    entries_crc = zlib.crc32(gpt.entries)
    pad = bytes(sector_size - len(gpt.header))
    backup = _gpt_header_with(gpt.header, alternate, 1, last_usable, backup_entries_lba, entries_crc)
    primary = _gpt_header_with(gpt.header, 1, alternate, last_usable, gpt.entries_lba, entries_crc)
    # the new backup first (fresh sectors past the old table), then the primary: the header sector
    # last, so until then the old primary and its old backup still describe the disk consistently
    _write(fd, bytes(gpt.entries), backup_entries_lba * sector_size)
    _write(fd, backup + pad, alternate * sector_size)
    os.fsync(fd)
    _write(fd, bytes(gpt.entries), gpt.entries_lba * sector_size)
    os.fsync(fd)
    _write(fd, primary + pad, sector_size)
    _write(fd, struct.pack("<I", min(disk_sectors - 1, 0xFFFFFFFF)), 446 + 16 * protective + 12)
    os.fsync(fd)
    return growth
