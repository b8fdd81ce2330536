"""Headless Chromium (Debian's ``chromium`` package) driven over the DevTools protocol, for page tests.

``Browser()`` starts ``chromium --headless`` as root needs it (``--no-sandbox``, a fresh
``--user-data-dir``, no background networking, sync or component updates) with
``--remote-debugging-port=0``, opens one page target and talks to it over a WebSocket (a small
RFC 6455 client here: the standard library has none). ``page.call(method, **params)`` sends one
DevTools command and returns its result; ``evaluate(js)`` runs an expression in the page;
``navigate(url)`` waits for the load; ``screenshot(path)`` writes a PNG.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio",
         "--window-size=1280,900", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")


class WebSocket:
    """A client WebSocket: text frames out (masked), whole messages in."""

    def __init__(self, url: str, timeout: float = 30.0):
        found = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        assert found, url
        host, port, path = found.group(1), int(found.group(2)), found.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            assert chunk, "the DevTools socket closed during the handshake"
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        assert b" 101 " in head.split(b"\r\n")[0], head

    def send(self, text: str) -> None:
        payload = text.encode()
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _read(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.sock.recv(1 << 20)
            assert chunk, "the DevTools socket closed"
            self.buffer += chunk
        out, self.buffer = self.buffer[:count], self.buffer[count:]
        return out

    def receive(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(length)
            if first & 0x0F in (0x8, 0x9, 0xA):  # close, ping, pong: nothing we act on here
                continue
            message += payload
            if first & 0x80:
                return message.decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    def __init__(self):
        assert CHROMIUM, "chromium is not installed (apt-get install chromium)"
        self.profile = tempfile.mkdtemp(prefix="cloudseed-chromium-")
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and port is None:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"chromium exited {self.proc.returncode}")
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                port = int(found.group(1))
        assert port, "chromium did not open its DevTools port"
        self.port = port
        request = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
        target = json.loads(urllib.request.urlopen(request, timeout=30).read())
        self.ws = WebSocket(target["webSocketDebuggerUrl"])
        self.next_id = 0
        self.events: list[dict] = []
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method: str, timeout: float = 30.0, **params) -> dict:
        self.next_id += 1
        ident = self.next_id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(self.ws.receive())
            if message.get("id") == ident:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)
        raise AssertionError(f"{method}: no answer within {timeout}s")

    def navigate(self, url: str, timeout: float = 30.0) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for(lambda: any(e.get("method") == "Page.loadEventFired" for e in self.events), timeout)

    def wait_for(self, condition, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "timed out waiting for the page"
            self.ws.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                self.events.append(json.loads(self.ws.receive()))
            except (TimeoutError, socket.timeout):
                pass
            finally:
                self.ws.sock.settimeout(30)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: str) -> None:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(data))

    def console_errors(self) -> list[str]:
        """CSP violations and script errors the page reported so far."""
        out = []
        for event in self.events:
            if event.get("method") == "Runtime.exceptionThrown":
                out.append(json.dumps(event["params"]["exceptionDetails"])[:300])
            if event.get("method") == "Runtime.consoleAPICalled" and event["params"].get("type") == "error":
                out.append(json.dumps(event["params"]["args"])[:300])
        return out

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)
