"""The host's end of a lab VM's virtio-serial ports: JSON lines to and from ``labguest.py``.

qemu listens on a unix socket per port (``-chardev socket,server=on,wait=off``); the lab
connects to it. The gate port carries ``ready`` / ``release`` / ``released``; the exec port
carries requests (facts for ``--expect``, the system state for ``--compare``) and their answers.
"""

from __future__ import annotations

import itertools
import json
import socket
import time
from typing import Any, Optional

GATE_PORT = "org.cloudseed.lab.gate"
EXEC_PORT = "org.cloudseed.lab.exec"


class ChannelError(Exception):
    """The guest's helper did not answer as expected."""


class Channel:
    def __init__(self, path: str, name: str):
        self.path = path
        self.name = name
        self.sock: Optional[socket.socket] = None
        self._buffer = b""
        self._ids = itertools.count(1)

    def connect(self, timeout: float = 10.0) -> Channel:
        deadline = time.monotonic() + timeout
        while self.sock is None:
            sock = socket.socket(socket.AF_UNIX)
            try:
                sock.connect(self.path)
                self.sock = sock
            except OSError as e:
                sock.close()
                if time.monotonic() > deadline:
                    raise ChannelError(f"cannot connect to the VM's {self.name} port ({self.path}): {e}") from None
                time.sleep(0.02)
        return self

    def send(self, message: dict[str, Any]) -> None:
        assert self.sock is not None
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def receive(self, timeout: float) -> dict[str, Any]:
        assert self.sock is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelError(f"no answer from the guest on {self.name} within {timeout:.0f}s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            if not chunk:
                raise ChannelError(f"the VM closed its {self.name} port")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            raise ChannelError(f"unreadable answer on {self.name}: {line[:200]!r}") from None

    def wait_for(self, event: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self.receive(max(0.0, deadline - time.monotonic()))
            if message.get("event") == event:
                return message

    def request(self, op: str, wait: float = 120.0, **fields: Any) -> dict[str, Any]:
        """Send one request to the guest's exec loop and return its answer within ``wait`` seconds
        (ChannelError when there is none, or when the guest reports an error)."""
        ident = next(self._ids)
        self.send({"op": op, "id": ident, **fields})
        deadline = time.monotonic() + wait
        while True:
            reply = self.receive(max(0.0, deadline - time.monotonic()))
            if reply.get("id") != ident:
                continue  # a late answer to an earlier request that timed out
            if "error" in reply and op != "exec":
                raise ChannelError(f"the guest could not do {op}: {reply['error']}")
            return reply

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
