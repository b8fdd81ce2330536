"""When a lab guest's sshd first answers, read from the host through qemu's user-mode network.

What the probe has to live with (libslirp, read in its source): a host connection to a ``hostfwd``
port is accepted by slirp at once, whatever the guest does; slirp then sends the SYN to the guest.
Until the guest has its address the SYN is lost (slirp holds it 1 s for the guest's answer to its
ARP request, then drops it), and slirp sends it again only after its initial retransmission timeout (12
ticks of its 0.5 s slow timer, about 6 s), then every 12 s until it gives up after 75 s. Closing
the host side does not cancel that: slirp does not look at the host socket before the guest has
answered. So every connection made to port 22 while the guest has no network reaches sshd later
(each one a fork and re-exec of sshd, slow under TCG), and a probe that waits for such a
connection's banner reads readiness in steps of slirp's retransmissions. Once the guest has its
network, a port nothing listens on answers with a reset (the host sees EOF at once), and so does
port 22 until sshd listens.

So the probe works in two phases, one thread, non-blocking sockets:

1. **Is the guest's network up?** Every ``INTERVAL`` (0.25 s) a connection to a second forwarded
   port, one the guest does not listen on (``CANARY_GUEST_PORT``), living ``CANARY_LIFE``; its
   first EOF says the guest answers (a refused connection only says that qemu does not forward
   yet). These cost the guest a kernel reset each, nothing of sshd's.
2. **Does sshd answer?** Every ``INTERVAL`` a connection to port 22, at most ``most_open`` open at
   once (1 in the lab): EOF means nothing listens yet; the first ``SSH-`` banner is the reading
   (the host's time when it arrived) and every other attempt is closed at once. An attempt with no
   answer for its life (``SSH_LIFE``, 5 s, under slirp's first retransmission; doubled after each
   such) is closed and counted, and the probe goes back to phase 1 (the guest's network went away,
   or sshd is very slow).

If the canary never answers (a guest that drops what it does not serve instead of refusing it),
port 22 is tried every ``FALLBACK_INTERVAL`` (5 s) after ``FALLBACK_AFTER`` (60 s) as well.

Reading error: with the guest's resets arriving within r, the first attempt that reaches a
listening sshd starts at most ``INTERVAL`` + r after sshd listens; the banner then takes what
sshd's accept, fork and re-exec take, as for any client. Cost to sshd: only the attempts that did
not end in EOF can have reached it: in a boot whose network comes up once, ``most_open`` (1), plus
one per attempt closed unanswered (``counts.unanswered``; they happen when the network goes away
after the canary saw it, or in the fallback).
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

INTERVAL = 0.25  # between two attempts of one kind
CANARY_GUEST_PORT = 1  # tcpmux: nothing listens on it in the lab's images
CANARY_LIFE = 1.0  # a canary unanswered this long was lost (the guest had no network yet)
SSH_LIFE = 5.0  # under slirp's first SYN retransmission (12 slow ticks of 0.5 s, about 6 s)
FALLBACK_AFTER = 60.0
FALLBACK_INTERVAL = 5.0


@dataclass
class ProbeCounts:
    """What the probe did: the bound on the connections that may have reached sshd is ``to_sshd``."""

    canary: int = 0  # connections to the canary port
    network_up: int = 0  # times the canary answered (the probe went to port 22)
    attempts: int = 0  # connections to port 22
    refused: int = 0  # ... ended by EOF or refused: they never reached sshd
    unanswered: int = 0  # ... closed after their life with no answer: slirp may still take them to sshd
    open_at_banner: int = 0  # ... still open when the first banner came (closed then)
    banner: int = 0  # ... that brought the banner (0 or 1)
    network_up_at: Optional[float] = field(default=None)  # time.monotonic() of the canary's first answer

    @property
    def to_sshd(self) -> int:
        """Connections to port 22 that did not end in EOF: at most this many reached sshd."""
        return self.attempts - self.refused

    def as_dict(self) -> dict:
        return {"canary": self.canary, "network_up": self.network_up, "attempts": self.attempts,
                "refused": self.refused, "unanswered": self.unanswered, "open_at_banner": self.open_at_banner,
                "banner": self.banner, "to_sshd": self.to_sshd}


@dataclass
class _Attempt:
    sock: socket.socket
    canary: bool
    started: float
    life: float
    data: bytes = b""


class SshProbe:
    """Watch ``ssh`` (host address of the guest's port 22) with ``canary`` (a forwarded closed port)."""

    def __init__(self, ssh: tuple[str, int], canary: Optional[tuple[str, int]], most_open: int = 1,
                 interval: float = INTERVAL):
        self.ssh, self.canary_address = ssh, canary
        self.most_open, self.interval = most_open, interval
        self.counts = ProbeCounts()
        self.ready_at: Optional[float] = None  # time.monotonic() when the first banner arrived

    def run(self, stop: threading.Event, alive: Callable[[], bool] = lambda: True) -> Optional[float]:
        """Probe until a banner arrives (its time.monotonic(), also ``ready_at``), ``stop`` is set or
        ``alive()`` turns false (None)."""
        selector = selectors.DefaultSelector()
        open_: list[_Attempt] = []
        began = time.monotonic()
        self._network_up = self.canary_address is None  # without a canary: straight to port 22
        self._ssh_life, self._last_ssh, last_canary = SSH_LIFE, float("-inf"), float("-inf")
        try:
            while not stop.is_set() and alive():
                now = time.monotonic()
                ssh_open = sum(not a.canary for a in open_)
                if self._network_up:
                    if now - self._last_ssh >= self.interval and ssh_open < self.most_open:
                        self._try_ssh(selector, open_, now)
                else:
                    if now - last_canary >= self.interval:
                        last_canary = now
                        self._start(selector, open_, True, CANARY_LIFE)  # refused: qemu does not forward yet
                    if (not self.counts.network_up and now - began >= FALLBACK_AFTER
                            and now - self._last_ssh >= FALLBACK_INTERVAL and not ssh_open):
                        self._try_ssh(selector, open_, now)
                due = (self._last_ssh if self._network_up else last_canary) + self.interval
                if self._network_up and sum(not a.canary for a in open_) >= self.most_open:
                    due = time.monotonic() + self.interval  # waiting for an answer: nothing to start
                for key, _ in selector.select(timeout=min(max(due - time.monotonic(), 0.005), self.interval)):
                    if self._answer(selector, open_, key.data):
                        return self.ready_at
                now = time.monotonic()
                for attempt in [a for a in open_ if now - a.started >= a.life]:
                    self._close(selector, open_, attempt)
                    if not attempt.canary:
                        self.counts.unanswered += 1
                        self._ssh_life *= 2
                        # its SYN was lost (or sshd is very slow): wait for the guest's network again
                        self._network_up = self.canary_address is None
            return None
        finally:
            for attempt in list(open_):
                self._close(selector, open_, attempt)
            selector.close()

    def _try_ssh(self, selector, open_: list[_Attempt], now: float) -> None:
        self._last_ssh = now
        if not self._start(selector, open_, False, self._ssh_life):
            self.counts.refused += 1

    def _saw_network(self) -> None:
        if not self._network_up:
            self._network_up, self._last_ssh = True, float("-inf")
            self.counts.network_up += 1
            self.counts.network_up_at = self.counts.network_up_at or time.monotonic()

    def _answer(self, selector, open_: list[_Attempt], attempt: _Attempt) -> bool:
        """Read what came on one attempt; True when it was the banner."""
        ended, data = self._read(attempt)
        if attempt.canary:
            if ended:
                self._close(selector, open_, attempt)
                self._saw_network()
            return False
        if data.startswith(b"SSH-"):
            self.ready_at = time.monotonic()
            self.counts.banner = 1
            self._close(selector, open_, attempt)
            self.counts.open_at_banner = sum(not a.canary for a in open_)
            return True
        if ended or len(data) >= 4:
            self.counts.refused += 1  # nothing listens yet (or it is not sshd)
            self._close(selector, open_, attempt)
        return False

    def _start(self, selector, open_: list[_Attempt], canary: bool, life: float) -> bool:
        """Open one attempt; False if the connection was refused (nothing listens on the host side)."""
        if canary:
            self.counts.canary += 1
        else:
            self.counts.attempts += 1
        try:
            sock = socket.create_connection(self.canary_address if canary else self.ssh, timeout=1)
        except OSError:
            return False
        sock.setblocking(False)
        attempt = _Attempt(sock, canary, time.monotonic(), life)
        open_.append(attempt)
        selector.register(sock, selectors.EVENT_READ, attempt)
        return True

    @staticmethod
    def _read(attempt: _Attempt) -> tuple[bool, bytes]:
        """(the peer closed or reset, the bytes so far)."""
        try:
            chunk = attempt.sock.recv(256)
        except BlockingIOError:
            return False, attempt.data
        except OSError:
            return True, attempt.data
        attempt.data += chunk
        return not chunk, attempt.data

    @staticmethod
    def _close(selector, open_: list[_Attempt], attempt: _Attempt) -> None:
        selector.unregister(attempt.sock)
        attempt.sock.close()
        open_.remove(attempt)
