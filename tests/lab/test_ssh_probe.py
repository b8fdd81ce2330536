"""The lab's SSH probe (``cloudseed/lab/machine/ssh_probe.py``) against real loopback servers.

Each server is a real listening socket on 127.0.0.1 behaving as the guest's side of qemu's
user-mode network does at each moment of a boot: a connection made before the guest has its
network is accepted on the host and then hears nothing (slirp lost its SYN, and would deliver it
to sshd seconds later); once the network is up a closed port ends a connection at once (EOF, the
guest's reset); once sshd listens it sends its banner after what sshd's fork and re-exec take.
The checks: the reading lies within the probe's stated error after the moment sshd listens, and
the connections that reached (or, through slirp, would later reach) sshd stay within the bound.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Optional

from cloudseed.lab.machine import ssh_probe
from cloudseed.lab.machine.ssh_probe import INTERVAL, SshProbe
from cloudseed.lab.machine.vm import free_port

ERROR = INTERVAL + 0.1  # the probe's stated reading error, and some room for a loaded test machine


class GuestPort:
    """A forwarded guest port on loopback: silent before ``network_at``, EOF until ``listen_at``
    (None: never), then ``SSH-2.0-...`` after ``banner_delay``; times from ``origin``."""

    def __init__(self, origin: float, network_at: float, listen_at: Optional[float] = None,
                 banner_delay: float = 0.0):
        self.origin, self.network_at, self.listen_at, self.banner_delay = origin, network_at, listen_at, banner_delay
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.address = self.server.getsockname()
        self.lost: list[float] = []  # accepted before the network: slirp would deliver these late
        self.reset: list[float] = []  # ended at once (nothing listening yet)
        self.served: list[float] = []  # reached "sshd"
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        held = []
        while not self._done.is_set():
            try:
                conn, _ = self.server.accept()
            except socket.timeout:
                continue
            at = time.monotonic() - self.origin
            if at < self.network_at:
                self.lost.append(at)
                held.append(conn)
            elif self.listen_at is None or at < self.listen_at:
                self.reset.append(at)
                conn.close()
            else:
                self.served.append(at)
                held.append(conn)
                threading.Timer(self.banner_delay, _send_banner, (conn,)).start()
        for conn in held:
            conn.close()

    def close(self) -> None:
        self._done.set()
        self._thread.join()
        self.server.close()


def _send_banner(conn: socket.socket) -> None:
    try:
        conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
    except OSError:
        pass  # the probe had already closed it


def probe_for(probe: SshProbe, seconds: float) -> Optional[float]:
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    try:
        return probe.run(stop)
    finally:
        timer.cancel()


def probe_guest(seconds: float, network_at: float, listen_at: Optional[float] = None, banner_delay: float = 0.0,
                sshd_network_at: Optional[float] = None) -> tuple[SshProbe, Optional[float], GuestPort, GuestPort]:
    """Probe a guest whose network comes up at ``network_at`` (port 22's own ``sshd_network_at``
    if given) and whose sshd listens from ``listen_at``; the reading is in seconds from the start."""
    origin = time.monotonic()
    canary = GuestPort(origin, network_at=network_at)
    sshd = GuestPort(origin, network_at=network_at if sshd_network_at is None else sshd_network_at,
                     listen_at=listen_at, banner_delay=banner_delay)
    try:
        probe = SshProbe(sshd.address, canary.address)
        ready = probe_for(probe, seconds)
    finally:
        canary.close()
        sshd.close()
    return probe, None if ready is None else ready - origin, canary, sshd


def test_sshd_that_starts_listening_late_is_read_within_the_bound():
    """(a) Connections to port 22 refused (loopback's reset) until a server listens at a known moment."""
    port = free_port()
    origin = time.monotonic()
    canary = GuestPort(origin, network_at=0.0)  # the guest's network is up from the start
    listening: list[float] = []
    later: list[object] = []  # connections after the banner: there should be none

    def listen_later() -> None:
        time.sleep(1.0)
        with socket.create_server(("127.0.0.1", port)) as server:
            server.settimeout(3)
            listening.append(time.monotonic() - origin)
            conn, _ = server.accept()
            conn.sendall(b"SSH-2.0-test\r\n")
            server.settimeout(1)
            try:
                later.append(server.accept())
            except socket.timeout:
                pass
            conn.close()

    server = threading.Thread(target=listen_later)
    server.start()
    try:
        probe = SshProbe(("127.0.0.1", port), canary.address)
        ready = probe_for(probe, 6)
    finally:
        server.join()
        canary.close()
    assert ready is not None
    assert 0 <= ready - origin - listening[0] <= ERROR
    assert later == []
    assert probe.counts.to_sshd == 1 and probe.counts.banner == 1
    assert probe.counts.attempts - probe.counts.refused == 1


def test_through_slirp_no_connection_is_lost_before_the_guest_has_its_network():
    """(b) What qemu's user-mode network looks like: the host's connect always succeeds; before the
    guest has its network nothing answers; then resets; sshd's banner comes 0.2 s after it accepts."""
    probe, ready, canary, sshd = probe_guest(6, network_at=1.0, listen_at=1.6, banner_delay=0.2)
    assert ready is not None
    assert 0 <= ready - (1.6 + 0.2) <= ERROR
    assert sshd.lost == []  # no connection to port 22 before the network: none reaches sshd late
    assert len(canary.lost) >= 3  # the canary took the lost SYNs (about 4 a second)
    assert len(sshd.served) == 1 and probe.counts.to_sshd == 1  # one sshd fork, no more
    assert len(sshd.reset) == probe.counts.refused >= 1
    assert probe.counts.network_up == 1


def test_guest_up_without_sshd_is_never_ready_and_costs_sshd_nothing():
    """(c) The guest's network is up and port 22 ends every connection at once (EOF): no reading,
    one connection per interval, none counted as reaching sshd."""
    probe, ready, _, sshd = probe_guest(1.5, network_at=0.0)
    assert ready is None
    assert probe.counts.to_sshd == 0 and probe.counts.refused == probe.counts.attempts == len(sshd.reset)
    assert 1.5 / INTERVAL - 2 <= probe.counts.attempts <= 1.5 / INTERVAL + 1


def test_an_unanswered_attempt_sends_the_probe_back_to_the_canary(monkeypatch):
    """The network answered the canary, then port 22 hears nothing (its SYN lost, or sshd very
    slow): the attempt is closed after its life, counted, and its life doubles; the bound holds."""
    monkeypatch.setattr(ssh_probe, "SSH_LIFE", 0.4)
    probe, ready, _, sshd = probe_guest(2.3, network_at=0.0, sshd_network_at=60.0)  # port 22's SYNs all lost
    assert ready is None
    # lives 0.4, 0.8, then 1.6 s: three attempts in 2.3 s, each after the canary answered again
    assert probe.counts.attempts == len(sshd.lost) == 3
    assert probe.counts.unanswered == 2 and probe.counts.network_up == 3
