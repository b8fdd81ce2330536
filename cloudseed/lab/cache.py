"""Where the lab keeps what it builds once and reuses: debootstrap trees, disk images, kernels.

Everything lives under ``$CLOUDSEED_CACHE`` or ``~/.cache/cloudseed`` (never in the git tree).
Builds are serialised with a lock file so that parallel test runs share one build.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from typing import Iterable, Iterator


def cache_root() -> str:
    """The cache directory, created on first use."""
    root = os.environ.get("CLOUDSEED_CACHE") or os.path.expanduser("~/.cache/cloudseed")
    os.makedirs(root, exist_ok=True)
    return root


def lab_dir(*parts: str) -> str:
    """A directory under ``<cache>/lab``, created on first use."""
    path = os.path.join(cache_root(), "lab", *parts)
    os.makedirs(path, exist_ok=True)
    return path


@contextlib.contextmanager
def build_lock(name: str) -> Iterator[None]:
    """Hold an exclusive lock named ``name`` for the duration of a build."""
    path = os.path.join(lab_dir("locks"), f"{name}.lock")
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def digest(items: Iterable[str | bytes], length: int = 12) -> str:
    """A short stable hash of a sequence of strings or bytes."""
    hasher = hashlib.sha256()
    for item in items:
        data = item.encode() if isinstance(item, str) else item
        hasher.update(len(data).to_bytes(8, "big"))
        hasher.update(data)
    return hasher.hexdigest()[:length]
