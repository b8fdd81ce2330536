"""Read files back from a guest disk without trusting the guest (or booting anything).

``GuestDisk.from_overlay`` flattens a VM's qcow2 overlay (with its base) into a raw file with
``qemu-img convert``; files are then read with ``debugfs`` at the root partition's offset. The
guest must be powered off (or the image is read as it was last flushed).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Optional

from cloudseed.lab.images.image import PARTITION_OFFSET


class ReadbackError(Exception):
    """The guest disk could not be read."""


@dataclass
class FileStat:
    mode: int  # permission bits
    uid: int
    gid: int
    size: int
    kind: str  # regular, directory, symlink, ...


class GuestDisk:
    def __init__(self, raw: str, offset: int = PARTITION_OFFSET, owned: bool = False):
        self.raw = raw
        self.offset = offset
        self._owned = owned

    @classmethod
    def from_overlay(cls, overlay: str, workdir: Optional[str] = None) -> GuestDisk:
        handle, raw = tempfile.mkstemp(suffix=".raw", dir=workdir or os.path.dirname(overlay))
        os.close(handle)
        proc = subprocess.run(["qemu-img", "convert", "-O", "raw", overlay, raw],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            os.unlink(raw)
            raise ReadbackError(f"qemu-img convert {overlay}: {proc.stderr.strip()}")
        return cls(raw, owned=True)

    def close(self) -> None:
        if self._owned and os.path.exists(self.raw):
            os.unlink(self.raw)

    def __enter__(self) -> GuestDisk:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _debugfs(self, request: str) -> subprocess.CompletedProcess:
        return subprocess.run(["debugfs", "-R", request, f"{self.raw}?offset={self.offset}"],
                              capture_output=True)

    def read(self, path: str) -> Optional[bytes]:
        """The content of ``path`` in the guest, or None if it does not exist."""
        if self.stat(path) is None:
            return None
        proc = self._debugfs(f'cat "{path}"')
        if proc.returncode != 0:
            raise ReadbackError(f"debugfs cat {path}: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    def text(self, path: str) -> Optional[str]:
        data = self.read(path)
        return None if data is None else data.decode("utf-8", "replace")

    def stat(self, path: str) -> Optional[FileStat]:
        proc = self._debugfs(f'stat "{path}"')
        out = proc.stdout.decode(errors="replace")
        match = re.search(r"Type: (\w+)\s+Mode:\s+(\d+)", out)
        if not match:
            return None
        owner = re.search(r"User:\s+(\d+)\s+Group:\s+(\d+)", out)
        size = re.search(r"Size: (\d+)", out)
        return FileStat(mode=int(match.group(2), 8), kind=match.group(1),
                        uid=int(owner.group(1)) if owner else -1, gid=int(owner.group(2)) if owner else -1,
                        size=int(size.group(1)) if size else 0)

    def listdir(self, path: str) -> list[str]:
        proc = self._debugfs(f'ls -p "{path}"')
        names = []
        for line in proc.stdout.decode(errors="replace").splitlines():
            fields = line.strip().strip("/").split("/")
            if len(fields) >= 5 and fields[4] not in (".", ".."):
                names.append(fields[4])
        return sorted(names)
