"""What a seed filesystem reader builds before anything is written: the image, the tree, the limits.

``Image`` reads byte ranges of the image or device with every range checked to lie inside it;
``Plan`` collects the tree a reader walks (``fat_reader``, ``iso9660_reader``), checking names,
sizes and counts against the limits; ``SeedFSError`` is what any of them raises. ``extract`` in
the package writes a finished plan out.
"""

from __future__ import annotations

import os

DEFAULT_MAX_TOTAL_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_FILES = 10000
_MAX_NAME_BYTES = 255
# directory and continuation-area bytes read while walking: seeds need a few KiB; this stops an image
# whose directories all point at the same large extent from making us read gigabytes
MAX_METADATA_BYTES = 64 * 1024 * 1024


class SeedFSError(Exception):
    """The image could not be read safely: corrupt, hostile, unsupported or over a limit."""


class Image:
    """Bounds-checked reads from an image file or block device."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise SeedFSError(f"{path}: cannot open: {e.strerror}") from e
        try:
            # st_size is 0 for block devices; the end offset is the real size for both
            self.size = os.lseek(self.fd, 0, os.SEEK_END)
        except OSError as e:
            os.close(self.fd)
            raise SeedFSError(f"{path}: cannot determine size: {e.strerror}") from e

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Image:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self, offset: int, length: int, what: str) -> None:
        """Raise unless ``length`` bytes at ``offset`` lie inside the image."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise SeedFSError(
                f"{self.path}: {what} at byte {offset} (+{length}) lies outside the image ({self.size} bytes)"
            )

    def read(self, offset: int, length: int, what: str) -> bytes:
        """Exactly ``length`` bytes at ``offset``; SeedFSError when they are not all there."""
        self.check(offset, length, what)
        try:
            data = os.pread(self.fd, length, offset)
        except OSError as e:
            raise SeedFSError(f"{self.path}: cannot read {what} at byte {offset}: {e.strerror}") from e
        if len(data) != length:
            raise SeedFSError(f"{self.path}: short read of {what} at byte {offset}")
        return data


class Node:
    """One directory or regular file of the image, with where its bytes are.

    A plain class, not a dataclass: ``dataclasses`` (with inspect, ast, dis) took about a quarter of a
    second to import under TCG in the local stage of every boot that reads a seed ISO."""

    __hash__ = None  # compared by value, as a dataclass would be

    def __init__(self, path: tuple[str, ...], is_dir: bool, size: int = 0,
                 extents: list[tuple[int, int]] | None = None):
        self.path = path
        self.is_dir = is_dir
        self.size = size
        self.extents = [] if extents is None else extents  # (byte offset, length) in the image

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.path, self.is_dir, self.size, self.extents) == (other.path, other.is_dir, other.size,
                                                                      other.extents)

    def __repr__(self) -> str:
        return f"Node(path={self.path!r}, is_dir={self.is_dir!r}, size={self.size!r}, extents={self.extents!r})"


class Plan:
    """The validated tree to extract, built by a filesystem reader before anything is written."""

    def __init__(self, image: Image, max_total_bytes: int, max_files: int):
        self.image = image
        self.max_total_bytes = max_total_bytes
        self.max_files = max_files
        self.nodes: dict[tuple[str, ...], Node] = {}
        self.files = 0
        self.dirs = 0
        self.total_bytes = 0
        self.metadata_bytes = 0

    def charge_metadata(self, length: int, what: str) -> None:
        """Count ``length`` bytes of directory data about to be read; SeedFSError over the budget."""
        self.metadata_bytes += length
        if self.metadata_bytes > MAX_METADATA_BYTES:
            raise SeedFSError(
                f"{self.image.path}: more than {MAX_METADATA_BYTES} bytes of directory data (limit), at {what}"
            )

    def _check_path(self, path: tuple[str, ...]) -> None:
        shown = "/".join(path)
        if not path:
            raise SeedFSError(f"{self.image.path}: empty path")
        for part in path:
            if part in ("", ".", ".."):
                raise SeedFSError(f"{self.image.path}: unsafe name {part!r} in {shown!r}")
            if "/" in part or "\0" in part:
                raise SeedFSError(f"{self.image.path}: unsafe name {part!r} (contains '/' or NUL) in {shown!r}")
            try:
                encoded = part.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError as e:
                raise SeedFSError(f"{self.image.path}: name {part!r} cannot be encoded") from e
            if len(encoded) > _MAX_NAME_BYTES:
                raise SeedFSError(f"{self.image.path}: name longer than {_MAX_NAME_BYTES} bytes in {shown!r}")
        if path in self.nodes:
            raise SeedFSError(f"{self.image.path}: duplicate entry {shown!r}")
        parent = path[:-1]
        if parent and (parent not in self.nodes or not self.nodes[parent].is_dir):
            raise SeedFSError(f"{self.image.path}: {shown!r} has no parent directory")

    def add_dir(self, path: tuple[str, ...]) -> Node:
        self._check_path(path)
        self.dirs += 1
        if self.dirs > self.max_files:
            raise SeedFSError(f"{self.image.path}: more than {self.max_files} directories")
        node = self.nodes[path] = Node(path, True)
        return node

    def add_file(self, path: tuple[str, ...], size: int) -> Node:
        """Record a file; the reader then fills ``extents`` (checked again in ``finish``)."""
        self._check_path(path)
        self.files += 1
        if self.files > self.max_files:
            raise SeedFSError(f"{self.image.path}: more than {self.max_files} files (limit)")
        self.total_bytes += size
        if self.total_bytes > self.max_total_bytes:
            raise SeedFSError(
                f"{self.image.path}: files total more than {self.max_total_bytes} bytes (limit),"
                f" reached at {'/'.join(path)!r} ({size} bytes)"
            )
        node = self.nodes[path] = Node(path, False, size)
        return node

    def finish(self) -> None:
        for node in self.nodes.values():
            if node.is_dir:
                continue
            if sum(length for _, length in node.extents) != node.size:
                raise SeedFSError(f"{self.image.path}: extents of {'/'.join(node.path)!r} do not match its size")
            for offset, length in node.extents:
                self.image.check(offset, length, f"data of {'/'.join(node.path)!r}")
