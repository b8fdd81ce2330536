"""Userspace readers for seed filesystems (ISO 9660 and FAT), used when ``mount`` is not possible.

A kernel without iso9660/vfat support, or a container without mount privilege, cannot mount a
NoCloud ``cidata`` or ConfigDrive ``config-2`` seed. ``extract`` reads such an image or block
device with plain file reads and copies its regular files into a private directory.

Extraction is two-phase: the reader for the filesystem first walks the whole tree into a
``Plan`` (names checked, sizes and counts held to the limits, every data extent checked to lie
inside the image), and only then are files written. A corrupt or hostile image therefore fails
with ``SeedFSError`` before anything is written; an I/O error during the copy removes what was
written. Nothing is ever written outside ``dest_dir``: names are single path components (no
``/``, NUL, ``.`` or ``..``), directories are opened with ``O_NOFOLLOW`` and files created with
``O_EXCL``. Files get mode 0600 (seeds hold secrets), directories 0700.
"""

from __future__ import annotations

import os
import stat

from cloudseed.agent.seedfs.plan import (
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_TOTAL_BYTES,
    Image,
    Node,
    Plan,
    SeedFSError,
)

__all__ = ["DEFAULT_MAX_FILES", "DEFAULT_MAX_TOTAL_BYTES", "Image", "Node", "Plan",
           "SeedFSError", "detect_fstype", "extract"]

_COPY_CHUNK = 1024 * 1024


def _read_head(path: str, length: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return b""
    try:
        return os.pread(fd, length, 0)
    except OSError:
        return b""
    finally:
        os.close(fd)


def detect_fstype(path: str) -> str | None:
    """``"iso9660"``, ``"vfat"`` or None, from the superblocks of the image or device at ``path``."""
    from . import fat_reader as fat
    from . import iso9660_reader as iso9660

    head = _read_head(path, 40 * 1024)
    if iso9660.probe(head):
        return "iso9660"
    if fat.probe(head):
        return "vfat"
    return None


def _open_dir(root_fd: int, parts: tuple[str, ...]) -> int:
    """A descriptor for the directory ``parts`` under ``root_fd``, never following a symlink."""
    fd = os.dup(root_fd)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        for part in parts:
            nxt = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _copy(image: Image, node: Node, out_fd: int) -> None:
    for offset, length in node.extents:
        done = 0
        while done < length:
            chunk = image.read(offset + done, min(_COPY_CHUNK, length - done), f"data of {'/'.join(node.path)!r}")
            view = memoryview(chunk)
            while view:
                view = view[os.write(out_fd, view):]
            done += len(chunk)


def _write(plan: Plan, dest_dir: str) -> list[str]:
    try:
        if not os.path.isdir(dest_dir):
            os.makedirs(dest_dir, mode=0o700)
            os.chmod(dest_dir, 0o700)  # makedirs' mode is filtered by the umask
        root_fd = os.open(dest_dir, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise SeedFSError(f"cannot create or open destination {dest_dir}: {e}") from e
    created: list[Node] = []
    written: list[str] = []
    try:
        # parents come before children: nodes were added in traversal order, sort makes it certain
        for node in sorted((n for n in plan.nodes.values() if n.is_dir), key=lambda n: len(n.path)):
            parent_fd = _open_dir(root_fd, node.path[:-1])
            try:
                try:
                    os.mkdir(node.path[-1], 0o700, dir_fd=parent_fd)
                    created.append(node)
                except FileExistsError:
                    pass  # an existing directory is reused; _open_dir refuses a symlink
                fd = _open_dir(parent_fd, node.path[-1:])
                try:
                    os.fchmod(fd, 0o700)
                finally:
                    os.close(fd)
            finally:
                os.close(parent_fd)
        for node in plan.nodes.values():
            if node.is_dir:
                continue
            parent_fd = _open_dir(root_fd, node.path[:-1])
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
                out_fd = os.open(node.path[-1], flags, 0o600, dir_fd=parent_fd)
                created.append(node)
                try:
                    os.fchmod(out_fd, 0o600)
                    _copy(plan.image, node, out_fd)
                finally:
                    os.close(out_fd)
            finally:
                os.close(parent_fd)
            written.append("/".join(node.path))
    except BaseException as e:
        _remove(root_fd, created)
        os.close(root_fd)
        if isinstance(e, OSError):
            raise SeedFSError(f"cannot write seed files into {dest_dir}: {e}") from e
        raise
    os.close(root_fd)
    return written


def _remove(root_fd: int, created: list[Node]) -> None:
    """Best-effort removal of what this extraction created, children first."""
    for node in reversed(created):
        try:
            parent_fd = _open_dir(root_fd, node.path[:-1])
        except OSError:
            continue
        try:
            st = os.stat(node.path[-1], dir_fd=parent_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(node.path[-1], dir_fd=parent_fd)
            else:
                os.unlink(node.path[-1], dir_fd=parent_fd)
        except OSError:
            pass
        finally:
            os.close(parent_fd)


def extract(
    path: str,
    dest_dir: str,
    *,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    max_files: int = DEFAULT_MAX_FILES,
) -> list[str]:
    """Copy every regular file of the ISO 9660 or FAT image/device ``path`` into ``dest_dir``.

    The directory tree is kept; the relative paths of the files written are returned (``/``
    separated, in image order). Raises SeedFSError when the image is not ISO 9660 or FAT, is
    corrupt or hostile, or its files exceed ``max_total_bytes`` or ``max_files``; in that case
    nothing is left in ``dest_dir``. Existing files in ``dest_dir`` are never overwritten.
    """
    from . import fat_reader as fat
    from . import iso9660_reader as iso9660

    fstype = detect_fstype(path)
    if fstype is None:
        raise SeedFSError(f"{path}: neither an ISO 9660 nor a FAT filesystem")
    with Image(path) as image:
        plan = Plan(image, max_total_bytes, max_files)
        if fstype == "iso9660":
            iso9660.read_tree(image, plan)
        else:
            fat.read_tree(image, plan)
        plan.finish()
        return _write(plan, dest_dir)


def read_label(path: str) -> tuple[str, str] | None:
    """``(fstype, label)`` of an ISO 9660 or FAT image/device, from its superblocks; None otherwise.

    ISO 9660: the primary volume identifier (or the Joliet one when the primary is blank).
    FAT: the volume label entry of a FAT12/16 root directory, else the boot sector's label.
    Cheap (a few KiB read, no process started), so every block device can be asked at boot.
    """
    from . import fat_reader as fat
    from . import iso9660_reader as iso9660

    try:
        head = _read_head(path, 40 * 1024)
    except (OSError, SeedFSError):
        return None
    if iso9660.probe(head):
        return "iso9660", _iso_label(head, iso9660.SECTOR)
    fields = fat._bpb_fields(head[:512])
    if fields is None:
        return None
    label = ""
    if fields["fatsz16"]:
        start = (fields["reserved"] + fields["num_fats"] * fields["fat_size"]) * fields["bytes_per_sector"]
        try:
            root = _read_range(path, start, min(fields["root_entries"], 512) * 32)
        except (OSError, SeedFSError):
            root = b""
        for pos in range(0, len(root) - 31, 32):
            entry = root[pos:pos + 32]
            if entry[0] == 0:
                break
            if entry[0] != 0xE5 and entry[11] & 0x3F == 0x08:  # volume label, not a long-name entry
                label = entry[:11].decode("cp437", "replace").rstrip()
                break
        boot_label_at = 43 if head[38] == 0x29 else None
    else:
        boot_label_at = 71 if head[66] == 0x29 else None
    if not label and boot_label_at is not None:
        label = head[boot_label_at:boot_label_at + 11].decode("cp437", "replace").rstrip()
        if label == "NO NAME":
            label = ""
    return "vfat", label


def _iso_label(head: bytes, sector: int) -> str:
    primary = joliet = ""
    for index in range(16, len(head) // sector):
        vd = head[index * sector:(index + 1) * sector]
        if vd[1:6] != b"CD001" or vd[0] == 255:
            break
        if vd[0] == 1:
            primary = vd[40:72].decode("ascii", "replace").rstrip(" \0")
        elif vd[0] == 2 and vd[88:91] in (b"%/@", b"%/C", b"%/E"):
            joliet = vd[40:72].decode("utf-16-be", "replace").rstrip(" \0")
    return primary or joliet


def _read_range(path: str, offset: int, length: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)
