"""The structured access log: one JSON object per request, buffered and flushed twice a second."""

from __future__ import annotations

import os
import sys
from json.encoder import encode_basestring_ascii as _quoted
from time import time
from typing import Optional, TextIO


class AccessLog:
    """JSON lines with ts, src, instance, method, path, status, bytes and ms."""

    def __init__(self, target: str):
        self.stream: Optional[TextIO] = None
        if target == "-":
            self.stream = sys.stderr
        elif target:
            self.stream = open(target, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the run
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
        self.pending.clear()

    def close(self) -> None:
        self.flush()
        if self.stream is not None and self.stream is not sys.stderr:
            self.stream.close()


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
