"""The structured access log: one JSON object per request, buffered and flushed twice a second."""

from __future__ import annotations

import json
import sys
import time
from typing import Optional, TextIO


class AccessLog:
    """JSON lines with ts, src, instance, method, path, status, bytes and ms."""

    def __init__(self, target: str):
        self.stream: Optional[TextIO] = None
        if target == "-":
            self.stream = sys.stderr
        elif target:
            self.stream = open(target, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the run
        self.pending: list[str] = []

    @property
    def enabled(self) -> bool:
        return self.stream is not None

    def write(self, source: str, instance: str, method: str, path: str, status: int, size: int,
              seconds: float) -> None:
        self.pending.append(json.dumps({
            "ts": round(time.time(), 3), "src": source, "instance": instance or None, "method": method,
            "path": path, "status": status, "bytes": size, "ms": round(seconds * 1000, 3)}))
        if len(self.pending) >= 1000:
            self.flush()

    def flush(self) -> None:
        if self.pending and self.stream is not None:
            self.stream.write("\n".join(self.pending) + "\n")
            self.stream.flush()
        self.pending.clear()

    def close(self) -> None:
        self.flush()
        if self.stream is not None and self.stream is not sys.stderr:
            self.stream.close()
