"""Debian's headless Chromium, driven over the DevTools protocol on a pipe (no WebSocket, no driver).

``Browser(path)`` starts ``chromium --headless --remote-debugging-pipe`` (as root: the sandbox off,
a fresh profile directory); ``open(url)`` loads a page and waits for its load event;
``evaluate(js)`` returns a value from the page; ``screenshot(path)`` saves the whole page as PNG.
Messages are JSON, NUL-terminated, on file descriptors 3 (to the browser) and 4 (from it).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Optional

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--remote-debugging-pipe")


def chromium() -> Optional[str]:
    return shutil.which("chromium")


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, width: int = 1200, height: int = 900, timeout: float = 60):
        binary = chromium()
        if binary is None:
            raise BrowserError("chromium is not installed (scripts/setup.sh)")
        self.profile = tempfile.mkdtemp(prefix="cloudseed-chromium-")
        self.timeout = timeout
        self._stderr = open(os.path.join(self.profile, "stderr"), "w")  # noqa: SIM115 - the browser's lifetime
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # the browser reads fd 3 and writes fd 4: arranged in the child before exec (close_fds would
        # close them again; the parent's other descriptors are close-on-exec anyway)
        def arrange() -> None:
            reading, writing = os.dup(to_browser_r), os.dup(from_browser_w)  # out of the way of 3 and 4
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self.process = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}",
                                         f"--window-size={width},{height}", "about:blank"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=self._stderr, close_fds=False, preexec_fn=arrange)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result") or {}
            self.events.append(reply)

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not load")
            self.events.append(self._read())

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def console_errors(self) -> list[str]:
        return [json.dumps(e["params"]) for e in self.events
                if e.get("method") in ("Runtime.exceptionThrown",) or
                (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error")]

    def screenshot(self, path: str) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
