"""Read one file from the root directory of a UDF volume in userspace (no mount, no kernel module).

Azure attaches its provisioning media (``ovf-env.xml``) as a UDF disc. Linux mounts UDF only
with the ``udf`` module, which a minimal kernel may lack; this reader needs none, as the ISO 9660
seeds are read in userspace too. It follows ECMA-167 / OSTA UDF as far as a root-directory file
needs: the anchor at sector 256, the main volume descriptor sequence (partition and logical volume
descriptors, type 1 partition maps), the file set descriptor, the root directory's (extended) file
entry, its file identifiers (8- or 16-bit OSTA CS0 names), and the file's short, long or embedded
allocation. Metadata partitions (UDF 2.50+) and virtual partitions are not read: ``UdfError`` says
so, and the caller falls back to mounting. Every descriptor's tag checksum is checked and every
length is bounded, so a hostile or truncated image is an error naming what is wrong, never a hang.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

SECTOR_SIZES = (2048, 512, 4096)
MAX_DIRECTORY = 1024 * 1024
MAX_EXTENTS = 64
TAG_AVDP, TAG_PD, TAG_LVD, TAG_TD, TAG_FSD, TAG_FID, TAG_FE, TAG_EFE = 2, 5, 6, 8, 256, 257, 261, 266


class UdfError(Exception):
    """The volume is not UDF, or not readable by this reader (the message says which and why)."""


def _tag(block: bytes, want: tuple[int, ...], what: str) -> int:
    if len(block) < 16:
        raise UdfError(f"{what}: truncated")
    if (sum(block[0:4]) + sum(block[5:16])) & 0xFF != block[4]:
        raise UdfError(f"{what}: bad descriptor tag checksum")
    ident = struct.unpack_from("<H", block, 0)[0]
    if ident not in want:
        raise UdfError(f"{what}: descriptor {ident}, expected {'/'.join(map(str, want))}")
    return ident


class _Volume:
    def __init__(self, f: BinaryIO, size: int):
        self.f, self.size = f, size
        self.sector = 0
        self.partitions: dict[int, int] = {}  # partition number -> start sector
        self.maps: list[int] = []  # partition reference -> partition number
        self.block = 0

    def read(self, sector: int, length: int, what: str) -> bytes:
        offset = sector * self.sector
        if sector < 0 or length < 0 or offset + length > self.size:
            raise UdfError(f"{what}: beyond the end of the volume")
        self.f.seek(offset)
        data = self.f.read(length)
        if len(data) != length:
            raise UdfError(f"{what}: short read")
        return data

    def anchor(self) -> tuple[int, int]:
        for size in SECTOR_SIZES:
            self.sector = size
            if 257 * size > self.size:
                continue
            block = self.read(256, size, "anchor")
            try:
                _tag(block, (TAG_AVDP,), "anchor")
            except UdfError:
                continue
            length, location = struct.unpack_from("<II", block, 16)
            return location, length
        raise UdfError("no UDF anchor volume descriptor at sector 256")

    def descriptors(self, location: int, length: int) -> tuple[int, int]:
        """Partition starts and maps from the main sequence; (FSD block, FSD partition ref)."""
        fsd = None
        for n in range(min(length // self.sector, 64)):
            block = self.read(location + n, self.sector, "volume descriptor")
            try:
                ident = _tag(block, (TAG_PD, TAG_LVD, TAG_TD, 1, 3, 4, 7), "volume descriptor")
            except UdfError:
                break
            if ident == TAG_PD:
                number, = struct.unpack_from("<H", block, 22)
                self.partitions[number], = struct.unpack_from("<I", block, 188)
            elif ident == TAG_LVD:
                self.block, = struct.unpack_from("<I", block, 212)
                fsd = struct.unpack_from("<IH", block, 252)  # long_ad's location: block, partition ref
                table_length, count = struct.unpack_from("<II", block, 264)
                pos = 440
                for _ in range(min(count, 8)):
                    if pos + 2 > len(block):
                        break
                    kind, size = block[pos], block[pos + 1]
                    if kind != 1:
                        raise UdfError("UDF partition maps other than type 1 (metadata, virtual, sparable) "
                                       "are not read in userspace")
                    self.maps.append(struct.unpack_from("<H", block, pos + 4)[0])
                    pos += max(size, 6)
            elif ident == TAG_TD:
                break
        if fsd is None or not self.maps or not self.partitions:
            raise UdfError("no logical volume or partition descriptor in the main sequence")
        if self.block != self.sector:
            raise UdfError(f"logical block size {self.block} differs from the sector size {self.sector}")
        return fsd

    def start(self, ref: int) -> int:
        if ref >= len(self.maps) or self.maps[ref] not in self.partitions:
            raise UdfError(f"partition reference {ref} is not in the volume")
        return self.partitions[self.maps[ref]]

    def entry(self, lbn: int, ref: int, what: str, limit: int) -> bytes:
        """The content of the file whose (extended) file entry is at ``lbn`` of partition ``ref``."""
        start = self.start(ref)
        block = self.read(start + lbn, self.sector, what)
        ident = _tag(block, (TAG_FE, TAG_EFE), what)
        flags, = struct.unpack_from("<H", block, 34)
        length, = struct.unpack_from("<Q", block, 56)
        ea, ad = struct.unpack_from("<II", block, 168 if ident == TAG_FE else 208)
        base = 176 if ident == TAG_FE else 216
        if length > limit:
            raise UdfError(f"{what}: {length} bytes, more than {limit}")
        if base + ea + ad > len(block):
            raise UdfError(f"{what}: allocation descriptors beyond the entry")
        descriptors = block[base + ea:base + ea + ad]
        kind = flags & 7
        if kind == 3:  # embedded in the entry
            return descriptors[:length]
        out = bytearray()
        step = 8 if kind == 0 else 16 if kind == 1 else 0
        if not step:
            raise UdfError(f"{what}: extended allocation descriptors are not read")
        for n, pos in enumerate(range(0, len(descriptors) - step + 1, step)):
            if n >= MAX_EXTENTS or len(out) >= length:
                break
            raw, where = struct.unpack_from("<II", descriptors, pos)
            extent_ref = ref if kind == 0 else struct.unpack_from("<H", descriptors, pos + 8)[0]
            extent_type, extent_length = raw >> 30, raw & 0x3FFFFFFF
            if extent_length == 0:
                break
            if extent_type == 3:
                raise UdfError(f"{what}: continued allocation descriptors are not read")
            wanted = min(extent_length, length - len(out))
            if extent_type in (1, 2):  # allocated but not recorded, or not allocated: zeros
                out += bytes(wanted)
            else:
                out += self.read(self.start(extent_ref) + where, wanted, what)
        if len(out) < length:
            raise UdfError(f"{what}: its extents hold {len(out)} of {length} bytes")
        return bytes(out)


def _name(raw: bytes) -> str:
    if not raw:
        return ""
    if raw[0] == 8:
        return raw[1:].decode("latin-1")
    if raw[0] == 16:
        return raw[1:len(raw) - (len(raw) - 1) % 2].decode("utf-16-be", "replace")
    raise UdfError(f"file identifier with compression id {raw[0]}")


def read_root_file(device: str, name: str, max_bytes: int) -> bytes:
    """The content of ``name`` in the volume's root directory; ``UdfError`` when it cannot be read."""
    try:
        with open(device, "rb") as f:
            f.seek(0, 2)
            volume = _Volume(f, f.tell())
            location, length = volume.anchor()
            fsd_lbn, fsd_ref = volume.descriptors(location, length)
            fsd = volume.read(volume.start(fsd_ref) + fsd_lbn, volume.sector, "file set descriptor")
            _tag(fsd, (TAG_FSD,), "file set descriptor")
            root_lbn, root_ref = struct.unpack_from("<IH", fsd, 404)
            directory = volume.entry(root_lbn, root_ref, "root directory", MAX_DIRECTORY)
            pos = 0
            while pos + 38 <= len(directory):
                _tag(directory[pos:pos + 16], (TAG_FID,), "file identifier")
                characteristics, name_length = directory[pos + 18], directory[pos + 19]
                icb_lbn, icb_ref = struct.unpack_from("<IH", directory, pos + 24)
                use_length, = struct.unpack_from("<H", directory, pos + 36)
                start = pos + 38 + use_length
                found = _name(directory[start:start + name_length])
                if not characteristics & 0x0E and found == name:  # not a directory, deleted or parent
                    return volume.entry(icb_lbn, icb_ref, name, max_bytes)
                pos += (38 + use_length + name_length + 3) & ~3
            raise UdfError(f"no {name} in the root directory")
    except OSError as e:
        raise UdfError(f"cannot read {device}: {e.strerror or e}") from e
    except struct.error as e:
        raise UdfError(f"truncated descriptor: {e}") from e
