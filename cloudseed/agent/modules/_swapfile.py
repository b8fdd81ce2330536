"""Swap files for the ``mounts`` module: the size rule of ``size: auto`` and making the file.

``size: auto`` follows cloud-init's documented rule: as much swap as memory below 4 GiB of
memory, 4 GiB up to 16 GiB, then the square root of the memory in GiB (rounded) in GiB; never
more than ``maxsize``, which defaults to twice the memory, or, where the file system is known,
a quarter of its free space (and never more than 90% of it when ``maxsize`` is given). The file
is made beside its final name (``fallocate``, or ``dd`` where fallocate'd files cannot be swap:
btrfs, and xfs before Linux 4.18), set to 0600, formatted with ``mkswap`` and only then renamed
into place, so a failure leaves no half-made swap file behind.
"""

from __future__ import annotations

import math
import os

from cloudseed.core.root import CommandError, TargetRoot

MIB = 2**20
GIB = 2**30


class SwapError(Exception):
    """The swap file could not be made; the message names the key and the reason."""


def memory_bytes(meminfo: str = "/proc/meminfo") -> int:
    with open(meminfo) as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no MemTotal in {meminfo}")


def suggested_size(memory: int, maxsize: int | None = None, free: int | None = None) -> int:
    """Bytes of swap for ``memory`` bytes of RAM, ``free`` bytes free where the file goes."""
    ceiling = memory * 2
    if free is not None:
        if maxsize is None:
            maxsize = min(free // 4, ceiling)
        elif maxsize > free * 0.9:
            maxsize = int(free * 0.9)
    elif maxsize is None:
        maxsize = ceiling
    if memory < 4 * GIB:
        wanted = memory
    elif memory < 16 * GIB:
        wanted = 4 * GIB
    else:
        wanted = round(math.sqrt(memory / GIB)) * GIB
    return min(wanted, maxsize)


def _fs_type_of(host_path: str, mounts: str = "/proc/self/mounts") -> str:
    best, fstype = "", ""
    try:
        with open(mounts) as handle:
            for line in handle:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = host_path == point or host_path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, fstype = point, fields[2]
    except OSError:
        pass
    return fstype


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        parts = os.uname().release.split(".")
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (ValueError, IndexError):
        return True


def is_swap_file(root: TargetRoot, inner: str) -> bool:
    """Does ``inner`` start with a swap signature (``SWAPSPACE2`` at the end of the first page)?"""
    try:
        with open(root.path(inner), "rb") as handle:
            for page in (4096, 8192, 16384, 65536):
                handle.seek(page - 10)
                if handle.read(10) in (b"SWAPSPACE2", b"SWAP-SPACE"):
                    return True
    except OSError:
        return False
    return False


def make_swap_file(root: TargetRoot, inner: str, size: int, log) -> None:
    """Create a swap file of ``size`` bytes at ``inner`` (inside ``root``); SwapError on failure."""
    mib = size // MIB
    if mib < 1:
        raise SwapError(f"swap.size: {size} bytes is less than 1 MiB")
    directory = os.path.dirname(inner) or "/"
    root.makedirs(directory)
    tmp = f"{directory.rstrip('/')}/.{os.path.basename(inner)}.cloudseed-new"
    root.remove(tmp)
    fstype = _fs_type_of(root.path(directory))
    use_dd = fstype == "btrfs" or (fstype == "xfs" and not _kernel_at_least(4, 18))
    try:
        if not use_dd:
            try:
                root.run(["fallocate", "-l", f"{mib}M", tmp])
            except CommandError as e:
                log.info("fallocate of %s failed (%s); writing it with dd", inner, e)
                root.remove(tmp)
                use_dd = True
        if use_dd:
            root.run(["dd", "if=/dev/zero", f"of={tmp}", "bs=1M", f"count={mib}"])
        root.chmod(tmp, 0o600)
        root.run(["mkswap", tmp])
        os.rename(root.path(tmp), root.path_nofollow(inner))
    except CommandError as e:
        root.remove(tmp)
        raise SwapError(f"swap.filename: could not make {inner} ({mib} MiB): {e}") from None
    except OSError as e:
        root.remove(tmp)
        raise SwapError(f"swap.filename: could not make {inner}: {e.strerror or e}") from None
    log.info("made swap file %s (%d MiB%s)", inner, mib, ", with dd" if use_dd else "")
