"""Reading a small labelled disk (ISO 9660 or FAT) in userspace, for the datasources whose whole
data is a few files on such a disk (AltCloud, RbxCloud, IBMCloud): nothing is mounted, the files
are copied into a private temporary directory (``cloudseed.agent.seedfs``) that is removed after.
"""

from __future__ import annotations

import contextlib
import os

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Iterator


class DiskError(Exception):
    """The disk could not be read safely; the message names the device."""


@contextlib.contextmanager
def extracted(device: str, max_bytes: int = 64 * 1024 * 1024, max_files: int = 1000) -> Iterator[str]:
    """A private directory holding the files of the image or block device ``device``."""
    import shutil
    import tempfile

    from cloudseed.agent.seedfs import SeedFSError, extract

    tmp = tempfile.mkdtemp(prefix="cloudseed-disk-", dir="/run" if os.access("/run", os.W_OK) else None)
    try:
        try:
            extract(device, tmp, max_total_bytes=max_bytes, max_files=max_files)
        except SeedFSError as e:
            raise DiskError(f"{device}: {e}") from None
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_file(top: str, relative: str, limit: int = 16 * 1024 * 1024) -> bytes | None:
    """``top``/``relative`` (never leaving ``top``), or None when it is not there; bounded."""
    real_top = os.path.realpath(top)
    path = os.path.realpath(os.path.join(real_top, relative))
    if not path.startswith(real_top + os.sep) or not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise DiskError(f"{path}: larger than {limit} bytes")
    return data
