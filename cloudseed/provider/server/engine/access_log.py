"""The structured access log: one JSON object per request, buffered and flushed twice a second.

A log file is bounded: past ``max_bytes`` it is renamed to FILE.1 (FILE.1 to FILE.2 ..., the
oldest of ``backups`` dropped; with ``backups: 0`` it is emptied) and a new FILE started. Several
server processes append to one file (``processes: N``): the one that rotates holds an exclusive
``flock`` on the file while it renames, and the others, seeing that FILE is no longer the file
they write to, open the new one.
"""

from __future__ import annotations

import fcntl
import os
import sys
from json.encoder import encode_basestring_ascii as _quoted
from time import time
from typing import Optional, TextIO

MODE = 0o640  # not world-readable


class AccessLog:
    """JSON lines with ts, src, instance, method, path, status, bytes and ms."""

    def __init__(self, target: str, max_bytes: int = 100 * 1024 * 1024, backups: int = 1):
        self.stream: Optional[TextIO] = None
        self.path = ""
        self.max_bytes = max_bytes
        self.backups = backups
        if target == "-":
            self.stream = sys.stderr
        elif target:
            self.path = target
            self.stream = _open(target)
        self.pending: list[tuple] = []

    @property
    def enabled(self) -> bool:
        return self.stream is not None

    def write(self, source: str, instance: str, method: str, path: str, status: int, size: int,
              seconds: float) -> None:
        """Queue one entry; it is formatted when flushed (off the request's path)."""
        pending = self.pending
        pending.append((time(), source, instance, method, path, status, size, seconds))
        if len(pending) >= 1000:
            self.flush()

    def flush(self) -> None:
        """Write the queued lines in writes of whole lines of at most 4 KiB, which other server
        processes appending to the same file or pipe cannot split (``processes: N``)."""
        if self.pending and self.stream is not None:
            data = "".join(_line(*entry) for entry in self.pending).encode("utf-8")
            self.stream.flush()
            try:
                fd = self.stream.fileno()
            except (AttributeError, OSError, ValueError):  # not a real file (captured stream)
                self.stream.write(data.decode("utf-8"))
                self.stream.flush()
            else:
                _write_lines(fd, data)
                if self.path:
                    self._rotate_if_full(fd)
        self.pending.clear()

    def _rotate_if_full(self, fd: int) -> None:
        """Start a new file when this one is past ``max_bytes`` or was rotated by another process."""
        size = os.fstat(fd).st_size
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        mine = current is not None and os.path.samestat(current, os.fstat(fd))
        if mine and size < self.max_bytes:
            return
        if mine:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(self.path)  # another process may have rotated it meanwhile
                if os.path.samestat(current, os.fstat(fd)):
                    if self.backups:
                        for index in range(self.backups - 1, 0, -1):
                            if os.path.exists(f"{self.path}.{index}"):
                                os.replace(f"{self.path}.{index}", f"{self.path}.{index + 1}")
                        os.replace(self.path, f"{self.path}.1")
                    else:
                        os.truncate(self.path, 0)
                        return
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        assert self.stream is not None
        self.stream.close()
        self.stream = _open(self.path)

    def close(self) -> None:
        self.flush()
        if self.stream is not None and self.stream is not sys.stderr:
            self.stream.close()


def _open(path: str) -> TextIO:
    return open(path, "a", encoding="utf-8",  # noqa: SIM115 - kept open for the run
                opener=lambda name, flags: os.open(name, flags, MODE))


def _line(ts: float, source: str, instance: str, method: str, path: str, status: int, size: int,
          seconds: float) -> str:
    """The JSON object ``json.dumps`` would write for this entry (same keys, order and spacing)."""
    return (f'{{"ts": {round(ts, 3)!r}, "src": {_quoted(source)}, '
            f'"instance": {_quoted(instance) if instance else "null"}, "method": {_quoted(method)}, '
            f'"path": {_quoted(path)}, "status": {status:d}, "bytes": {size:d}, '
            f'"ms": {round(seconds * 1000, 3)!r}}}\n')


def _write_lines(fd: int, data: bytes, chunk: int = 4096) -> None:
    start, size = 0, len(data)
    while start < size:
        stop = size if size - start <= chunk else data.rfind(b"\n", start, start + chunk) + 1
        if stop <= start:  # one line longer than a chunk: write it whole
            stop = data.find(b"\n", start) + 1 or size
        view = memoryview(data)[start:stop]
        while view:
            view = view[os.write(fd, view):]
        start = stop
