"""Writing rendered files into a target root, and removing the ones a previous render left."""

from __future__ import annotations

import fnmatch
import os

from cloudseed.network.renderers._common import MARK


def write_files(root, files: list, owned: list | None = None) -> list:
    """Write every ``RenderedFile`` atomically through ``root``; return the paths written.

    Files matching ``owned`` (glob patterns) that carry cloudseed's header and are not part of
    this render are stale (an interface that is gone) and are removed.
    """
    written = []
    for f in files:
        root.write(f.path, f.content, mode=f.mode)
        written.append(f.path)
    for path in stale_files(root, owned or [], set(written)):
        root.remove(path)
    return written


def stale_files(root, patterns: list, keep: set) -> list:
    out = []
    for pattern in patterns:
        directory, base = os.path.split(pattern)
        for name in root.listdir(directory):
            path = f"{directory}/{name}"
            if path in keep or not fnmatch.fnmatch(name, base) or not root.isfile(path):
                continue
            try:
                head = root.read_text(path)[:400]
            except OSError:
                continue
            if MARK in head:
                out.append(path)
    return out
