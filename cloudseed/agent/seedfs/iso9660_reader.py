"""ISO 9660 reader (ECMA-119 with Joliet and Rock Ridge) for the userspace seed extractor.

Which tree is read and how names are made:
- Rock Ridge (SUSP ``SP`` in the root's "." record, plus an ``ER``/``RR``/``PX`` entry): the
  primary tree, names from ``NM`` entries (``CE`` continuation areas followed), symlinks and
  devices skipped, deep directories followed through ``CL`` and their ``RE`` copies skipped;
- else Joliet (a supplementary descriptor with a UCS-2 escape sequence): its tree, names
  decoded as UTF-16 big endian;
- else the primary tree with the ISO names lowercased.
ISO and Joliet names lose their ``;version`` and a trailing ``.``.
Multi-extent files are joined; interleaved files are refused. Every extent is checked against
the image size, directory loops are detected, and directory sizes, depth and continuation
chains are bounded.
"""

from __future__ import annotations

import struct
from collections import namedtuple

from cloudseed.agent.seedfs.plan import Image, Plan, SeedFSError

SECTOR = 2048
_FIRST_VD = 16
_MAX_VDS = 64
_MAX_DEPTH = 64
_MAX_DIR_BYTES = 16 * 1024 * 1024
_MAX_CE_HOPS = 32
_MAX_CE_BYTES = 64 * 1024
_JOLIET_ESCAPES = (b"%/@", b"%/C", b"%/E")
_RRIP_IDS = (b"RRIP_1991A", b"IEEE_P1282", b"IEEE_1282")

_FLAG_DIR = 0x02
_FLAG_ASSOCIATED = 0x04
_FLAG_MULTI_EXTENT = 0x80

_S_IFMT = 0o170000
_S_IFREG = 0o100000


def probe(head: bytes) -> bool:
    """True when ``head`` (the start of an image) holds an ISO 9660 volume descriptor at sector 16."""
    off = _FIRST_VD * SECTOR
    return len(head) >= off + 7 and head[off + 1:off + 6] == b"CD001" and head[off] in (0, 1, 2, 3, 255)


class Record(namedtuple("Record", "lba ext_attr_len size flags unit_size gap_size name system_use")):
    """One directory record (a plain named tuple: the typing module is not imported at boot)."""

    __slots__ = ()


def _parse_record(buf: bytes, pos: int, where: str) -> Record:
    length = buf[pos]
    if length < 34 or pos + length > len(buf):
        raise SeedFSError(f"{where}: bad directory record length {length} at offset {pos}")
    name_len = buf[pos + 32]
    if 33 + name_len > length:
        raise SeedFSError(f"{where}: directory record name overruns the record at offset {pos}")
    name = bytes(buf[pos + 33:pos + 33 + name_len])
    su_start = 33 + name_len + (0 if name_len % 2 else 1)
    return Record(
        lba=struct.unpack_from("<I", buf, pos + 2)[0],
        ext_attr_len=buf[pos + 1],
        size=struct.unpack_from("<I", buf, pos + 10)[0],
        flags=buf[pos + 25],
        unit_size=buf[pos + 26],
        gap_size=buf[pos + 27],
        name=name,
        system_use=bytes(buf[pos + su_start:pos + length]) if su_start < length else b"",
    )


def _strip_version(name: str) -> str:
    base, sep, version = name.rpartition(";")
    if sep and base and (version.isdigit() or version == ""):
        name = base
    if len(name) > 1 and name.endswith("."):
        name = name[:-1]
    return name


class _Reader:
    def __init__(self, image: Image, plan: Plan):
        self.image = image
        self.plan = plan
        self.block_size = SECTOR
        self.rock = False
        self.su_skip = 0
        self.joliet = False

    # ------------------------------------------------------------------ descriptors
    def descriptors(self) -> tuple[bytes, bytes | None]:
        pvd = None
        joliet = None
        for i in range(_FIRST_VD, _FIRST_VD + _MAX_VDS):
            vd = self.image.read(i * SECTOR, SECTOR, f"volume descriptor {i}")
            if vd[1:6] != b"CD001":
                raise SeedFSError(f"{self.image.path}: sector {i} is not a volume descriptor (no terminator)")
            if vd[0] == 255:
                break
            if vd[0] == 1 and pvd is None:
                pvd = vd
            elif vd[0] == 2 and joliet is None and vd[88:91] in _JOLIET_ESCAPES:
                joliet = vd
        else:
            raise SeedFSError(f"{self.image.path}: no volume descriptor set terminator in {_MAX_VDS} sectors")
        if pvd is None:
            raise SeedFSError(f"{self.image.path}: no primary volume descriptor")
        return pvd, joliet

    def set_block_size(self, vd: bytes) -> None:
        size = struct.unpack_from("<H", vd, 128)[0]
        if size not in (512, 1024, 2048):
            raise SeedFSError(f"{self.image.path}: unsupported logical block size {size}")
        self.block_size = size

    # ------------------------------------------------------------------ extents
    def extent(self, rec: Record, what: str) -> tuple[int, int]:
        if rec.unit_size or rec.gap_size:
            raise SeedFSError(f"{self.image.path}: {what} is interleaved (not supported)")
        offset = (rec.lba + rec.ext_attr_len) * self.block_size
        if rec.size:
            self.image.check(offset, rec.size, what)
        return offset, rec.size

    def read_dir(self, rec: Record, what: str) -> bytes:
        if rec.size > _MAX_DIR_BYTES:
            raise SeedFSError(f"{self.image.path}: directory {what} is {rec.size} bytes (limit {_MAX_DIR_BYTES})")
        offset, size = self.extent(rec, f"directory {what}")
        self.plan.charge_metadata(size, f"directory {what}")
        return self.image.read(offset, size, f"directory {what}")

    def records(self, data: bytes, what: str):
        where = f"{self.image.path}: directory {what}"
        pos = 0
        while pos < len(data):
            if data[pos] == 0:  # records never cross a sector: the rest of this sector is padding
                pos = (pos // SECTOR + 1) * SECTOR
                continue
            rec = _parse_record(data, pos, where)
            pos += data[pos]
            yield rec

    # ------------------------------------------------------------------ SUSP / Rock Ridge
    def susp_entries(self, rec: Record, what: str, skip: int | None = None) -> list[tuple[bytes, bytes]]:
        entries: list[tuple[bytes, bytes]] = []
        area = rec.system_use[self.su_skip if skip is None else skip:]
        hops = 0
        while True:
            cont = None
            i = 0
            while i + 4 <= len(area):
                sig = area[i:i + 2]
                length = area[i + 2]
                if length < 4 or i + length > len(area):
                    break  # padding or a damaged tail: stop reading this area
                body = area[i + 4:i + length]
                if sig == b"ST":
                    break
                if sig == b"CE":
                    if len(body) < 24:
                        raise SeedFSError(f"{self.image.path}: short CE entry for {what}")
                    block, offset, size = struct.unpack_from("<I4xI4xI", body, 0)
                    cont = (block, offset, size)
                else:
                    entries.append((sig, body))
                i += length
            if cont is None:
                return entries
            hops += 1
            if hops > _MAX_CE_HOPS:
                raise SeedFSError(f"{self.image.path}: more than {_MAX_CE_HOPS} SUSP continuation areas for {what}")
            block, offset, size = cont
            if size > _MAX_CE_BYTES:
                raise SeedFSError(f"{self.image.path}: SUSP continuation area of {size} bytes for {what}")
            self.plan.charge_metadata(size, f"SUSP continuation area of {what}")
            area = self.image.read(block * self.block_size + offset, size, f"SUSP continuation area of {what}")

    def detect_rock(self, root: Record) -> None:
        data = self.read_dir(root, "/")
        first = next(self.records(data, "/"), None)
        if first is None or first.name != b"\x00":
            raise SeedFSError(f"{self.image.path}: root directory does not start with its '.' record")
        su = first.system_use
        if not (len(su) >= 7 and su[0:2] == b"SP" and su[2] >= 7 and su[4:6] == b"\xbe\xef"):
            return
        self.su_skip = su[6]
        entries = self.susp_entries(first, "/", skip=0)
        for sig, body in entries:
            if sig in (b"RR", b"PX"):
                self.rock = True
            elif sig == b"ER" and len(body) >= 4:
                id_len = body[0]
                if bytes(body[4:4 + id_len]) in _RRIP_IDS:
                    self.rock = True

    # ------------------------------------------------------------------ names
    def name_of(self, rec: Record, entries: list[tuple[bytes, bytes]], what: str) -> str:
        if self.rock:
            parts = []
            found = False
            for sig, body in entries:
                if sig != b"NM" or not body:
                    continue
                found = True
                flags = body[0]
                if flags & 0x02:
                    return "."
                if flags & 0x04:
                    return ".."
                parts.append(bytes(body[1:]))
                if not flags & 0x01:
                    break
            if found:
                return b"".join(parts).decode("utf-8", "surrogateescape")
            return _strip_version(rec.name.decode("latin-1"))
        if self.joliet:
            if len(rec.name) % 2:
                raise SeedFSError(f"{self.image.path}: odd-length Joliet name in {what}")
            try:
                name = rec.name.decode("utf-16-be")
            except UnicodeDecodeError as e:
                raise SeedFSError(f"{self.image.path}: invalid Joliet name {rec.name!r} in {what}") from e
            return _strip_version(name)
        return _strip_version(rec.name.decode("latin-1")).lower()

    # ------------------------------------------------------------------ traversal
    def walk(self, root: Record) -> None:
        visited = {root.lba}
        stack: list[tuple[Record, tuple[str, ...]]] = [(root, ())]
        while stack:
            dir_rec, path = stack.pop()
            what = "/" + "/".join(path)
            if len(path) > _MAX_DEPTH:
                raise SeedFSError(f"{self.image.path}: directories nested deeper than {_MAX_DEPTH} at {what}")
            data = self.read_dir(dir_rec, what)
            pending: tuple[str, list[tuple[int, int]], int] | None = None
            subdirs: list[tuple[Record, tuple[str, ...]]] = []
            for rec in self.records(data, what):
                if rec.name in (b"\x00", b"\x01"):
                    continue
                if rec.flags & _FLAG_ASSOCIATED:
                    continue
                entries = self.susp_entries(rec, what) if self.rock else []
                sigs = {sig for sig, _ in entries}
                name = self.name_of(rec, entries, what)
                child = path + (name,)
                shown = "/" + "/".join(child)
                if self.rock and b"RE" in sigs:
                    continue  # a relocated directory: reached through its CL entry instead
                child_link = next((body for sig, body in entries if sig == b"CL"), None)
                if child_link is not None:
                    if len(child_link) < 8:
                        raise SeedFSError(f"{self.image.path}: short CL entry for {shown}")
                    rec = self.relocated(struct.unpack_from("<I", child_link, 0)[0], shown)
                if rec.flags & _FLAG_DIR:
                    if pending is not None:
                        raise SeedFSError(f"{self.image.path}: unfinished multi-extent file before {shown}")
                    if rec.lba in visited:
                        raise SeedFSError(f"{self.image.path}: directory loop at {shown} (extent {rec.lba})")
                    visited.add(rec.lba)
                    self.plan.add_dir(child)
                    subdirs.append((rec, child))
                    continue
                if self.rock and not self.is_regular(entries):
                    continue  # symlink, device, fifo or socket
                offset, size = self.extent(rec, f"file {shown}")
                if pending is not None:
                    if pending[0] != name:
                        raise SeedFSError(f"{self.image.path}: unfinished multi-extent file before {shown}")
                    pending[1].append((offset, size))
                    pending = (name, pending[1], pending[2] + size)
                else:
                    pending = (name, [(offset, size)], size)
                if rec.flags & _FLAG_MULTI_EXTENT:
                    continue
                name, extents, total = pending
                pending = None
                node = self.plan.add_file(child, total)
                node.extents = [(o, n) for o, n in extents if n]
            if pending is not None:
                raise SeedFSError(f"{self.image.path}: multi-extent file {pending[0]!r} in {what} has no last extent")
            stack.extend(reversed(subdirs))

    def relocated(self, lba: int, shown: str) -> Record:
        """The "." record of the directory a Rock Ridge CL entry points to."""
        head = self.image.read(lba * self.block_size, 256, f"relocated directory {shown}")
        dot = _parse_record(head, 0, f"{self.image.path}: relocated directory {shown}")
        if dot.name != b"\x00" or not dot.flags & _FLAG_DIR:
            raise SeedFSError(f"{self.image.path}: CL entry of {shown} does not point to a directory")
        return dot

    @staticmethod
    def is_regular(entries: list[tuple[bytes, bytes]]) -> bool:
        for sig, body in entries:
            if sig == b"SL":
                return False
            if sig == b"PX" and len(body) >= 4:
                mode = struct.unpack_from("<I", body, 0)[0]
                if mode & _S_IFMT not in (_S_IFREG, 0):
                    return False
        return True


def read_tree(image: Image, plan: Plan) -> None:
    """Walk the ISO 9660 filesystem in ``image`` into ``plan``."""
    reader = _Reader(image, plan)
    pvd, joliet = reader.descriptors()
    reader.set_block_size(pvd)
    root = _parse_record(pvd, 156, f"{image.path}: primary volume descriptor")
    if not root.flags & _FLAG_DIR:
        raise SeedFSError(f"{image.path}: root directory record is not a directory")
    reader.detect_rock(root)
    if not reader.rock and joliet is not None:
        reader.set_block_size(joliet)
        root = _parse_record(joliet, 156, f"{image.path}: Joliet volume descriptor")
        reader.joliet = True
    reader.walk(root)
