"""A small QMP client (qemu's JSON machine protocol on a unix socket): commands and their answers.

Used to stop a lab VM, save it to a file (``migrate``), restore it (``migrate-incoming``) and
power it down. Events that arrive while waiting for an answer are kept in ``events``.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any, Optional


class QmpError(Exception):
    """qemu refused a command, or its monitor could not be reached."""


class Qmp:
    def __init__(self, path: str, timeout: float = 10.0):
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._buffer = b""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(path)
                break
            except OSError as e:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise QmpError(f"cannot reach qemu's monitor at {path}: {e}") from None
                time.sleep(0.02)
        self.sock.settimeout(timeout)
        self._read()  # the greeting
        self.command("qmp_capabilities")

    def _read(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise QmpError("qemu closed its monitor")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def command(self, name: str, **arguments: Any) -> Any:
        message: dict[str, Any] = {"execute": name}
        if arguments:
            message["arguments"] = arguments
        self.sock.sendall(json.dumps(message).encode() + b"\n")
        while True:
            try:
                reply = self._read()
            except OSError as e:
                raise QmpError(f"{name}: {e}") from None
            if "event" in reply:
                self.events.append(reply)
                continue
            if "error" in reply:
                raise QmpError(f"{name}: {reply['error'].get('desc', reply['error'])}")
            return reply.get("return")

    def wait_migration(self, timeout: float) -> dict[str, Any]:
        """Poll ``query-migrate`` until the migration completed (its stats) or failed (QmpError)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.command("query-migrate") or {}
            status = info.get("status")
            if status == "completed":
                return info
            if status in ("failed", "cancelled"):
                raise QmpError(f"migration {status}: {info.get('error-desc', '')}")
            time.sleep(0.01)  # a restore's device state loads in a few ms
        raise QmpError(f"migration did not complete within {timeout:.0f}s")

    def wait_event(self, name: str, timeout: float) -> Optional[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("event") == name:
                    self.events.remove(event)
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(remaining)
            try:
                reply = self._read()
            except (OSError, QmpError):
                return None
            if "event" in reply:
                self.events.append(reply)

    def close(self) -> None:
        self.sock.close()
