"""FAT12/FAT16/FAT32 reader (Microsoft FAT specification, VFAT long names) for the seed extractor.

The FAT type comes from the count of data clusters, as the specification defines it (not from
the informational type string). Names are the long file name when its LFN entries are complete,
in sequence and carry the checksum of the short entry they precede; otherwise the 8.3 name
(code page 437, with the Windows NT lowercase flags honoured). Cluster chains are checked: every
cluster in range, no free or bad cluster, no loop, long enough for the file size. Directory
loops are refused and directories are bounded to the specification's 65536 entries.
"""

from __future__ import annotations

import struct

from cloudseed.agent.seedfs.plan import Image, Plan, SeedFSError

_ATTR_VOLUME_ID = 0x08
_ATTR_DIRECTORY = 0x10
_ATTR_LONG_NAME = 0x0F
_ATTR_LONG_NAME_MASK = 0x3F
_LAST_LONG_ENTRY = 0x40
_NT_LOWER_BASE = 0x08
_NT_LOWER_EXT = 0x10
_MAX_DIR_BYTES = 65536 * 32
_MAX_DEPTH = 64
_FAT_CHUNK = 64 * 1024


def _bpb_fields(boot: bytes) -> dict[str, int] | None:
    """The BPB fields of a plausible FAT boot sector, or None."""
    if len(boot) < 512 or boot[510:512] != b"\x55\xaa" or boot[0] not in (0xEB, 0xE9):
        return None
    bytes_per_sector, sec_per_clus, reserved, num_fats, root_entries, tot16, media, fatsz16 = struct.unpack_from(
        "<HBHBHHBH", boot, 11
    )
    tot32 = struct.unpack_from("<I", boot, 32)[0]
    fatsz32 = struct.unpack_from("<I", boot, 36)[0]
    if bytes_per_sector not in (512, 1024, 2048, 4096):
        return None
    if sec_per_clus == 0 or sec_per_clus & (sec_per_clus - 1):
        return None
    if reserved == 0 or num_fats == 0 or not (media == 0xF0 or media >= 0xF8):
        return None
    fat_size = fatsz16 or fatsz32
    total = tot16 or tot32
    if fat_size == 0 or total == 0:
        return None
    return {
        "bytes_per_sector": bytes_per_sector,
        "sec_per_clus": sec_per_clus,
        "reserved": reserved,
        "num_fats": num_fats,
        "root_entries": root_entries,
        "total": total,
        "fat_size": fat_size,
        "fatsz16": fatsz16,
    }


def probe(head: bytes) -> bool:
    """True when ``head`` (the start of an image) starts with a FAT boot sector."""
    return _bpb_fields(head[:512]) is not None


def short_name_checksum(raw: bytes) -> int:
    """The LFN checksum of an 11-byte short name."""
    total = 0
    for byte in raw:
        total = (((total & 1) << 7) + (total >> 1) + byte) & 0xFF
    return total


def _short_name(entry: bytes) -> str:
    raw = bytearray(entry[0:11])
    if raw[0] == 0x05:  # a name starting with 0xE5 is stored as 0x05
        raw[0] = 0xE5
    base = bytes(raw[0:8]).rstrip(b" ").decode("cp437")
    ext = bytes(raw[8:11]).rstrip(b" ").decode("cp437")
    if entry[12] & _NT_LOWER_BASE:
        base = base.lower()
    if entry[12] & _NT_LOWER_EXT:
        ext = ext.lower()
    return f"{base}.{ext}" if ext else base


def _lfn_chars(entry: bytes) -> bytes:
    return bytes(entry[1:11] + entry[14:26] + entry[28:32])


class FatVolume:
    """A parsed FAT volume: geometry, FAT access and cluster chains."""

    def __init__(self, image: Image):
        self.image = image
        boot = image.read(0, 512, "boot sector")
        bpb = _bpb_fields(boot)
        if bpb is None:
            raise SeedFSError(f"{image.path}: no valid FAT boot sector")
        self.sector = bpb["bytes_per_sector"]
        self.cluster_bytes = self.sector * bpb["sec_per_clus"]
        fat_size = bpb["fat_size"]
        root_dir_sectors = (bpb["root_entries"] * 32 + self.sector - 1) // self.sector
        first_data_sector = bpb["reserved"] + bpb["num_fats"] * fat_size + root_dir_sectors
        data_sectors = bpb["total"] - first_data_sector
        if data_sectors <= 0:
            raise SeedFSError(f"{image.path}: FAT geometry leaves no data area")
        clusters = data_sectors // bpb["sec_per_clus"]
        if clusters < 4085:
            self.bits = 12
        elif clusters < 65525:
            self.bits = 16
        else:
            self.bits = 32
        active = 0
        self.root_cluster = 0
        if self.bits == 32:
            if bpb["fatsz16"] != 0 or bpb["root_entries"] != 0:
                raise SeedFSError(f"{image.path}: FAT32 volume with a FAT12/16 root directory or FAT size")
            ext_flags = struct.unpack_from("<H", boot, 40)[0]
            if ext_flags & 0x80:  # mirroring off: only one FAT is active
                active = ext_flags & 0x0F
                if active >= bpb["num_fats"]:
                    raise SeedFSError(f"{image.path}: active FAT {active} does not exist")
            self.root_cluster = struct.unpack_from("<I", boot, 44)[0]
        elif bpb["root_entries"] == 0:
            raise SeedFSError(f"{image.path}: FAT{self.bits} volume without root directory entries")
        self.fat_offset = (bpb["reserved"] + active * fat_size) * self.sector
        self.fat_bytes = fat_size * self.sector
        # clusters the FAT can describe: a FAT shorter than the data area limits the volume
        capacity = self.fat_bytes * 8 // self.bits
        self.max_cluster = min(clusters + 1, capacity - 1)
        self.eoc = {12: 0xFF8, 16: 0xFFF8, 32: 0x0FFFFFF8}[self.bits]
        self.bad = self.eoc - 1
        self.first_data = first_data_sector * self.sector
        self.root_offset = (bpb["reserved"] + bpb["num_fats"] * fat_size) * self.sector
        self.root_bytes = root_dir_sectors * self.sector
        self.root_entries = bpb["root_entries"]
        self._chunks: dict[int, bytes] = {}

    # ------------------------------------------------------------------ FAT access
    def _fat_read(self, offset: int, length: int) -> bytes:
        out = b""
        while length:
            index = offset // _FAT_CHUNK
            chunk = self._chunks.get(index)
            if chunk is None:
                start = index * _FAT_CHUNK
                size = min(_FAT_CHUNK, self.fat_bytes - start)
                chunk = self.image.read(self.fat_offset + start, size, "file allocation table")
                self._chunks[index] = chunk
            piece = chunk[offset - index * _FAT_CHUNK:][:length]
            if not piece:
                raise SeedFSError(f"{self.image.path}: FAT entry outside the allocation table")
            out += piece
            offset += len(piece)
            length -= len(piece)
        return out

    def entry(self, cluster: int) -> int:
        if self.bits == 12:
            value = struct.unpack("<H", self._fat_read(cluster + cluster // 2, 2))[0]
            return value >> 4 if cluster & 1 else value & 0xFFF
        if self.bits == 16:
            return struct.unpack("<H", self._fat_read(cluster * 2, 2))[0]
        return struct.unpack("<I", self._fat_read(cluster * 4, 4))[0] & 0x0FFFFFFF

    def chain(self, first: int, what: str, need: int | None = None, limit: int | None = None) -> list[int]:
        """The clusters from ``first``: ``need`` of them exactly, or up to the end-of-chain mark."""
        clusters: list[int] = []
        seen: set[int] = set()
        cluster = first
        while True:
            if cluster < 2 or cluster > self.max_cluster:
                raise SeedFSError(f"{self.image.path}: {what}: cluster {cluster} out of range (2-{self.max_cluster})")
            if cluster in seen:
                raise SeedFSError(f"{self.image.path}: {what}: cluster chain loops at cluster {cluster}")
            seen.add(cluster)
            clusters.append(cluster)
            if need is not None and len(clusters) == need:
                return clusters
            if limit is not None and len(clusters) > limit:
                raise SeedFSError(f"{self.image.path}: {what}: longer than {limit} clusters")
            nxt = self.entry(cluster)
            if nxt >= self.eoc:
                if need is not None:
                    raise SeedFSError(
                        f"{self.image.path}: {what}: cluster chain ends after {len(clusters)} of {need} clusters"
                    )
                return clusters
            if nxt == self.bad:
                raise SeedFSError(f"{self.image.path}: {what}: chain reaches a bad cluster after cluster {cluster}")
            if nxt < 2:
                raise SeedFSError(f"{self.image.path}: {what}: chain reaches a free cluster after cluster {cluster}")
            cluster = nxt

    def extents(self, clusters: list[int], size: int) -> list[tuple[int, int]]:
        """Contiguous (offset, length) runs of ``clusters`` holding ``size`` bytes."""
        runs: list[tuple[int, int]] = []
        left = size
        for cluster in clusters:
            if left <= 0:
                break
            offset = self.first_data + (cluster - 2) * self.cluster_bytes
            length = min(self.cluster_bytes, left)
            if runs and runs[-1][0] + runs[-1][1] == offset:
                runs[-1] = (runs[-1][0], runs[-1][1] + length)
            else:
                runs.append((offset, length))
            left -= length
        return runs

    def read_dir(self, first_cluster: int, what: str, plan: Plan) -> bytes:
        if first_cluster == 0 and self.bits != 32:
            plan.charge_metadata(self.root_bytes, "root directory")
            # the root region is whole sectors; only the declared entries belong to the directory
            return self.image.read(self.root_offset, self.root_bytes, "root directory")[:self.root_entries * 32]
        clusters = self.chain(first_cluster, f"directory {what}", limit=_MAX_DIR_BYTES // self.cluster_bytes or 1)
        plan.charge_metadata(len(clusters) * self.cluster_bytes, f"directory {what}")
        return b"".join(
            self.image.read(offset, length, f"directory {what}")
            for offset, length in self.extents(clusters, len(clusters) * self.cluster_bytes)
        )

    # ------------------------------------------------------------------ directories
    def entries(self, data: bytes, what: str):
        """(name, attributes, first cluster, size) of each live entry in directory ``data``."""
        parts: list[bytes] = []
        expect = 0
        checksum = -1
        for pos in range(0, len(data) - 31, 32):
            entry = data[pos:pos + 32]
            first = entry[0]
            if first == 0x00:
                return
            if first == 0xE5:
                parts, checksum = [], -1
                continue
            attr = entry[11]
            if attr & _ATTR_LONG_NAME_MASK == _ATTR_LONG_NAME:
                order = first & 0x3F
                if first & _LAST_LONG_ENTRY:
                    if not 1 <= order <= 20:
                        parts, checksum = [], -1
                        continue
                    parts = [b""] * order
                    parts[order - 1] = _lfn_chars(entry)
                    expect = order - 1
                    checksum = entry[13]
                elif checksum >= 0 and expect > 0 and order == expect and entry[13] == checksum:
                    parts[order - 1] = _lfn_chars(entry)
                    expect -= 1
                else:
                    parts, checksum = [], -1
                continue
            long_name = None
            if checksum >= 0 and expect == 0 and checksum == short_name_checksum(entry[0:11]):
                long_name = self._decode_lfn(b"".join(parts), what)
            parts, checksum = [], -1
            if attr & _ATTR_VOLUME_ID:
                continue
            if entry[0:11] in (b".          ", b"..         "):
                continue
            name = long_name or _short_name(entry)
            cluster = struct.unpack_from("<H", entry, 26)[0]
            if self.bits == 32:
                cluster |= struct.unpack_from("<H", entry, 20)[0] << 16
            size = struct.unpack_from("<I", entry, 28)[0]
            yield name, attr, cluster, size

    def _decode_lfn(self, raw: bytes, what: str) -> str:
        try:
            text = raw.decode("utf-16-le")
        except UnicodeDecodeError as e:
            raise SeedFSError(f"{self.image.path}: invalid long file name in directory {what}") from e
        end = text.find("\0")
        return text if end < 0 else text[:end]

    def walk(self, plan: Plan) -> None:
        root = self.root_cluster if self.bits == 32 else 0
        visited = {root}
        stack: list[tuple[int, tuple[str, ...]]] = [(root, ())]
        while stack:
            cluster, path = stack.pop()
            what = "/" + "/".join(path)
            if len(path) > _MAX_DEPTH:
                raise SeedFSError(f"{self.image.path}: directories nested deeper than {_MAX_DEPTH} at {what}")
            subdirs = []
            for name, attr, first, size in self.entries(self.read_dir(cluster, what, plan), what):
                child = path + (name,)
                shown = "/" + "/".join(child)
                if attr & _ATTR_DIRECTORY:
                    if first in visited:
                        raise SeedFSError(f"{self.image.path}: directory loop at {shown} (cluster {first})")
                    visited.add(first)
                    plan.add_dir(child)
                    subdirs.append((first, child))
                    continue
                node = plan.add_file(child, size)
                if size == 0:
                    continue
                need = (size + self.cluster_bytes - 1) // self.cluster_bytes
                node.extents = self.extents(self.chain(first, f"file {shown}", need=need), size)
            stack.extend(reversed(subdirs))


def read_tree(image: Image, plan: Plan) -> None:
    """Walk the FAT filesystem in ``image`` into ``plan``."""
    FatVolume(image).walk(plan)
