"""The serial console of a lab VM: lines timestamped from qemu start, and what they mean.

``Console`` collects lines from qemu's stdout in a thread, writes them to a log file and lets
callers wait for a line matching a pattern. ``parse_event`` recognises the markers of the
kernel, the cloudseed agent (``cloudseed: stage X start`` / ``finished in``), Debian's
cloud-init (``Cloud-init v. ... running 'init' at``) and the lab collector.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Optional

# How often qemu's serial file is read when nothing new was there: each line is stamped with the
# host's time when it is read, so this is the console times' resolution (the boot benchmark's
# "finished" came in 50 ms steps before; a read of a file that did not grow costs the host ~nothing)
READ_SECONDS = 0.01
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")

STAGE_START = re.compile(r"cloudseed: stage (\w+) start")
STAGE_DONE = re.compile(r"cloudseed: stage (\w+) finished in ([0-9.]+)s \((\d+) modules?, (\d+) errors?\)")
AGENT_DONE = re.compile(r"cloudseed: finished\b")
REF_STAGE = re.compile(r"Cloud-init v\. \S+ running '([\w:-]+)' at")
# cloud-init's names for its stages, as the lab names them for both agents (local, network, config, final)
REF_STAGE_NAMES = {"init-local": "local", "init": "network", "modules:config": "config", "modules:final": "final"}
REF_DONE = re.compile(r"Cloud-init v\. \S+ finished at")
COLLECTED = re.compile(r"cloudseed-lab: (status|result|done) ?(.*)$")
KERNEL = re.compile(r"Linux version \d")
GATE = re.compile(r"cloudseed-lab: gate: (ready|released)")
# systemd's status lines (long unit names are cut with "…" on the console; the description is whole)
TARGET = re.compile(r"Reached target (\S+) - (.+?)\.?$")
STARTED = re.compile(r"\] (?:Started|Finished) (\S+) - (.+?)\.?$")
STARTING = re.compile(r"^\s*Starting (\S+) - (.+?)\.\.\.$")
LOGIN = re.compile(r"login: *$")
# systemd's line when sshd is up: Debian's ssh.service is Type=notify, so "Started" follows sshd's
# report that it is ready (its sockets listen). Unit name and description as systemd 252 (Debian 12)
# prints them; the description alone as older status formats do.
SSHD_STARTED = re.compile(r"\bStarted (?:ssh\.service\b|OpenBSD Secure Shell server\b)")


@dataclass
class Line:
    at: float  # seconds since qemu started
    text: str


@dataclass
class Event:
    kind: str  # kernel, stage-start, stage-done, agent-done, collected, login, gate, target, unit, unit-start
    at: float
    stage: str = ""
    seconds: float = 0.0
    modules: int = 0
    errors: int = 0
    data: Any = None
    text: str = ""


def parse_event(line: Line) -> Optional[Event]:
    text = line.text
    match = STAGE_DONE.search(text)
    if match:
        return Event("stage-done", line.at, stage=match.group(1), seconds=float(match.group(2)),
                     modules=int(match.group(3)), errors=int(match.group(4)), text=text)
    match = STAGE_START.search(text)
    if match:
        return Event("stage-start", line.at, stage=match.group(1), text=text)
    if AGENT_DONE.search(text) or REF_DONE.search(text):
        return Event("agent-done", line.at, text=text)
    match = REF_STAGE.search(text)
    if match:
        return Event("stage-start", line.at, stage=REF_STAGE_NAMES.get(match.group(1), match.group(1)), text=text)
    match = COLLECTED.search(text)
    if match:
        data: Any = None
        if match.group(2):
            try:
                data = json.loads(match.group(2))
            except ValueError:
                data = {"unparsed": match.group(2)[:2000]}
        return Event("collected", line.at, stage=match.group(1), data=data, text=text)
    if KERNEL.search(text):
        return Event("kernel", line.at, text=text)
    match = GATE.search(text)
    if match:
        return Event("gate", line.at, stage=match.group(1), text=text)
    match = TARGET.search(text)
    if match:
        return Event("target", line.at, stage=match.group(1), data=match.group(2), text=text)
    match = STARTED.search(text)
    if match:
        return Event("unit", line.at, stage=match.group(1), data=match.group(2), text=text)
    match = STARTING.search(text)
    if match:
        return Event("unit-start", line.at, stage=match.group(1), data=match.group(2), text=text)
    if LOGIN.search(text):
        return Event("login", line.at, text=text)
    return None


def sshd_started_at(lines: Iterable[Line]) -> Optional[float]:
    """When the console first said sshd had started (seconds after power-on), or None."""
    return next((line.at for line in lines if SSHD_STARTED.search(line.text)), None)


def read_log(path: str) -> list[Line]:
    """The lines of a console log the lab wrote (``[  12.345] text``), with their times."""
    lines = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for raw in handle:
            stamp, _, text = raw.rstrip("\n").partition("] ")
            try:
                lines.append(Line(float(stamp.lstrip("[ ")), text))
            except ValueError:
                if lines:  # a line of the guest's that held a newline of its own
                    lines[-1] = Line(lines[-1].at, lines[-1].text + "\n" + raw.rstrip("\n"))
    return lines


@dataclass
class Console:
    started: float
    log: Optional[IO[str]] = None
    on_event: Optional[Callable[[Event], None]] = None
    lines: list[Line] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    closed: bool = False

    def __post_init__(self) -> None:
        self._cond = threading.Condition()

    def follow_file(self, path: str, alive: Callable[[], bool]) -> threading.Thread:
        """Tail ``path`` (qemu's serial output file) in a thread until ``alive()`` turns false."""
        thread = threading.Thread(target=self._tail, args=(path, alive), daemon=True)
        thread.start()
        return thread

    def _tail(self, path: str, alive: Callable[[], bool]) -> None:
        while not os.path.exists(path) and alive():
            time.sleep(READ_SECONDS)
        buffer = b""
        with open(path, "rb") as stream:
            while True:
                chunk = stream.read(65536)
                if not chunk:
                    if not alive():
                        chunk = stream.read(65536)
                        if not chunk:
                            break
                    else:
                        time.sleep(READ_SECONDS)
                        continue
                buffer += chunk
                while b"\n" in buffer:
                    raw, buffer = buffer.split(b"\n", 1)
                    self._add(raw)
        if buffer:
            self._add(buffer)
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def _add(self, raw: bytes) -> None:
        line = Line(time.monotonic() - self.started, _ANSI.sub("", raw.decode("utf-8", "replace")))
        event = parse_event(line)
        with self._cond:
            self.lines.append(line)
            if event:
                self.events.append(event)
            self._cond.notify_all()
        if self.log:
            with contextlib.suppress(ValueError):  # the log was closed when the VM stopped
                self.log.write(f"[{line.at:8.3f}] {line.text}\n")
                self.log.flush()
        if event and self.on_event:
            self.on_event(event)

    def wait_event(self, predicate: Callable[[Event], bool], timeout: float, since: int = 0) -> Optional[Event]:
        """The first event (from index ``since``) matching ``predicate``, waiting up to ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events[since:]:
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    return None
                self._cond.wait(min(remaining, 1.0))

    def text(self) -> str:
        with self._cond:
            return "\n".join(line.text for line in self.lines)
