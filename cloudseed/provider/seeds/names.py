"""File name rules shared by both image formats, checked before anything is written.

Paths are relative, '/'-separated, without empty, '.' or '..' components or control
characters. Each component must fit the Joliet limit (64 characters) on ISO 9660 and the long
file name limit (255) on VFAT, where the characters ``"*:<>?\\|`` are not allowed either.
"""

from __future__ import annotations

from typing import Iterable

from cloudseed.provider.seeds.errors import SeedError

JOLIET_MAX = 64
VFAT_MAX = 255
_VFAT_FORBIDDEN = set('"*:<>?\\|')


def check_paths(paths: Iterable[str], fs: str) -> None:
    """Raise SeedError naming the first path that ``fs`` ("iso9660" or "vfat") cannot hold."""
    seen: dict[str, str] = {}
    for path in paths:
        parts = path.split("/")
        if path.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise SeedError(f"file name {path!r}: must be a relative path without empty, '.' or '..' parts")
        for part in parts:
            if any(ord(ch) < 32 or ord(ch) == 127 for ch in part):
                raise SeedError(f"file name {path!r}: control characters are not allowed")
            limit = JOLIET_MAX if fs == "iso9660" else VFAT_MAX
            if len(part) > limit:
                raise SeedError(f"file name {path!r}: {part[:20]!r}... is {len(part)} characters, "
                                f"{fs} allows {limit}")
            if fs == "vfat" and (_VFAT_FORBIDDEN & set(part) or part.endswith((" ", "."))):
                raise SeedError(f"file name {path!r}: VFAT does not allow the characters "
                                f"\"*:<>?\\| or a trailing space or dot")
        if fs == "vfat":
            folded = path.lower()
            if folded in seen:
                raise SeedError(f"file names {seen[folded]!r} and {path!r} differ only in case, "
                                "which VFAT cannot hold")
            seen[folded] = path
