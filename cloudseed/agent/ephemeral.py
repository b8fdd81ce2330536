"""Temporary network for the local stage: a DHCP lease held only while a datasource is read.

``ephemeral_network(root, interface=None)`` picks the fallback NIC, brings it up, gets a DHCPv4
lease with a minimal client of our own (raw packet socket, so no address or port 68 is needed;
it understands option 121 classless static routes), adds the address, the classless routes and
a host route to the metadata address, and on exit removes exactly what it added. When the NIC
already has an IPv4 address nothing is changed. Interfaces are always the running machine's.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import random
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from cloudseed.core.root import TargetRoot, run_on_machine

if TYPE_CHECKING:
    from subprocess import CompletedProcess

LOG = logging.getLogger("cloudseed.ephemeral")

METADATA_ADDRESS = "169.254.169.254"
SYS_NET = "/sys/class/net"
ETH_P_IP = 0x0800
_MAGIC = b"\x63\x82\x53\x63"
_REQUESTED = bytes([1, 3, 6, 12, 15, 26, 28, 51, 54, 121])


class EphemeralError(Exception):
    """No temporary network could be set up; the message says which step failed and on which NIC."""


@dataclass
class Lease:
    interface: str
    address: str
    prefix: int
    server: str = ""
    routers: list[str] = field(default_factory=list)
    dns: list[str] = field(default_factory=list)
    broadcast: str = ""
    mtu: int | None = None
    lease_seconds: int = 0
    # option 121: (destination CIDR, gateway); gateway 0.0.0.0 means on-link
    classless_routes: list[tuple[str, str]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------- DHCP


def parse_classless_routes(data: bytes) -> list[tuple[str, str]]:
    """Option 121 (RFC 3442) as ``[(dest/prefix, gateway)]``; ValueError when malformed."""
    routes, i = [], 0
    while i < len(data):
        width = data[i]
        if width > 32:
            raise ValueError(f"option 121: prefix length {width} > 32")
        significant = (width + 7) // 8
        if i + 1 + significant + 4 > len(data):
            raise ValueError("option 121: truncated")
        dest = data[i + 1:i + 1 + significant] + bytes(4 - significant)
        gateway = data[i + 1 + significant:i + 5 + significant]
        routes.append((f"{socket.inet_ntoa(dest)}/{width}", socket.inet_ntoa(gateway)))
        i += 5 + significant
    return routes


def _options(data: bytes) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    i = 0
    while i < len(data):
        code = data[i]
        if code == 0:
            i += 1
            continue
        if code == 255 or i + 1 >= len(data):
            break
        length = data[i + 1]
        found[code] = found.get(code, b"") + data[i + 2:i + 2 + length]  # RFC 3396 concatenation
        i += 2 + length
    return found


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _frame(payload: bytes) -> bytes:
    """An IPv4/UDP packet 0.0.0.0:68 -> 255.255.255.255:67 around a DHCP payload."""
    udp = struct.pack("!HHHH", 68, 67, 8 + len(payload), 0) + payload
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0x10, 20 + len(udp), 0, 0, 64, socket.IPPROTO_UDP, 0,
                         b"\0\0\0\0", b"\xff\xff\xff\xff")
    header = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
    return header + udp


def _message(kind: int, xid: int, mac: bytes, extra: dict[int, bytes]) -> bytes:
    fixed = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 1, 1, 6, 0, xid, 0, 0x8000,
                        bytes(4), bytes(4), bytes(4), bytes(4), mac.ljust(16, b"\0"), b"", b"")
    opts = bytearray(_MAGIC)
    items = {53: bytes([kind]), 61: b"\x01" + mac, 55: _REQUESTED, **extra}
    for code, value in items.items():
        opts += bytes([code, len(value)]) + value
    opts.append(255)
    return fixed + bytes(opts).ljust(312 - 4, b"\0")


def _reply(packet: bytes, xid: int) -> tuple[int, bytes, dict[int, bytes]] | None:
    """(message type, yiaddr, options) when ``packet`` is a DHCP reply for ``xid``."""
    if len(packet) < 28 or packet[0] >> 4 != 4 or packet[9] != socket.IPPROTO_UDP:
        return None
    ihl = (packet[0] & 0x0F) * 4
    if len(packet) < ihl + 8 + 240 or struct.unpack("!H", packet[ihl + 2:ihl + 4])[0] != 68:
        return None
    dhcp = packet[ihl + 8:]
    if dhcp[0] != 2 or struct.unpack("!I", dhcp[4:8])[0] != xid or dhcp[236:240] != _MAGIC:
        return None
    opts = _options(dhcp[240:])
    kind = (opts.get(53) or b"\0")[0]   # an empty option 53 must not crash the client
    return kind, dhcp[16:20], opts


def _mac_of(interface: str) -> bytes:
    try:
        with open(f"{SYS_NET}/{interface}/address") as f:
            text = f.read().strip()
    except OSError as e:
        raise EphemeralError(f"{interface}: cannot read its MAC address ({e.strerror})") from None
    return bytes(int(part, 16) for part in text.split(":"))


def dhcp_lease(interface: str, timeout: float = 5.0) -> Lease:
    """DISCOVER/OFFER/REQUEST/ACK on ``interface`` within ``timeout`` seconds (EphemeralError else)."""
    mac = _mac_of(interface)
    deadline = time.monotonic() + timeout
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    except OSError as e:
        raise EphemeralError(f"{interface}: cannot open a packet socket for DHCP ({e.strerror})") from None
    with sock:
        sock.bind((interface, ETH_P_IP))
        broadcast = (interface, ETH_P_IP, 0, 0, b"\xff" * 6)

        def exchange(kind: int, extra: dict[int, bytes], want: tuple[int, ...]) -> tuple[int, bytes, dict]:
            xid = random.getrandbits(32)
            wait = 1.0
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EphemeralError(f"{interface}: no DHCP answer within {timeout:g}s")
                sock.sendto(_frame(_message(kind, xid, mac, extra)), broadcast)
                round_end = time.monotonic() + min(wait, left)
                while True:
                    left_round = round_end - time.monotonic()
                    if left_round <= 0:
                        break
                    sock.settimeout(left_round)
                    try:
                        packet = sock.recv(4096)
                    except socket.timeout:
                        break
                    reply = _reply(packet, xid)
                    if reply and reply[0] in want:
                        return reply
                wait = min(wait * 2, 4.0)

        _kind, offered, opts = exchange(1, {}, (2,))
        request_opts = {50: offered}
        if 54 in opts:
            request_opts[54] = opts[54]
        kind, address, opts = exchange(3, request_opts, (5, 6))
        if kind == 6:
            raise EphemeralError(f"{interface}: DHCP server refused the offered address (NAK)")
    return _lease_from(interface, address, opts)


def _ips(raw: bytes) -> list[str]:
    return [socket.inet_ntoa(raw[i:i + 4]) for i in range(0, len(raw) - len(raw) % 4, 4)]


def _lease_from(interface: str, address: bytes, opts: dict[int, bytes]) -> Lease:
    mask = opts.get(1)
    ip = socket.inet_ntoa(address)
    prefix = bin(int.from_bytes(mask, "big")).count("1") if mask and len(mask) == 4 else \
        (8 if ip.startswith("10.") else 16 if ip.startswith("172.") else 24)
    lease = Lease(interface, ip, prefix, server=(_ips(opts.get(54, b"")) or [""])[0],
                  routers=_ips(opts.get(3, b"")), dns=_ips(opts.get(6, b"")),
                  broadcast=(_ips(opts.get(28, b"")) or [""])[0])
    if 26 in opts and len(opts[26]) == 2:
        lease.mtu = struct.unpack("!H", opts[26])[0]
    if 51 in opts and len(opts[51]) == 4:
        lease.lease_seconds = struct.unpack("!I", opts[51])[0]
    if 121 in opts:
        try:
            lease.classless_routes = parse_classless_routes(opts[121])
        except ValueError as e:
            LOG.warning("%s: ignoring DHCP %s", interface, e)
    return lease


# ---------------------------------------------------------------------------------- interfaces


def _ip(*args: str, check: bool = True) -> CompletedProcess:
    proc = run_on_machine(["ip", *args], timeout=10)
    if check and proc.returncode != 0:
        raise EphemeralError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def _candidate_nics() -> list[str]:
    """Ethernet NICs of the running machine, physical ones with carrier first."""
    ranked = []
    for name in sorted(os.listdir(SYS_NET)) if os.path.isdir(SYS_NET) else []:
        base = f"{SYS_NET}/{name}"
        try:
            with open(f"{base}/type") as f:
                if f.read().strip() != "1":
                    continue
        except OSError:
            continue
        if name == "lo" or os.path.isdir(f"{base}/bridge") or os.path.isdir(f"{base}/bonding"):
            continue
        physical = os.path.exists(f"{base}/device")
        try:
            with open(f"{base}/carrier") as f:
                carrier = f.read().strip() == "1"
        except OSError:
            carrier = False
        ranked.append((not physical, not carrier, name))
    return [name for *_, name in sorted(ranked)]


def fallback_interface(root: TargetRoot) -> str | None:
    """The NIC the network model's fallback would configure, else the best Ethernet NIC."""
    try:
        from cloudseed.network.fallback import choose_fallback_nic  # type: ignore[import-not-found]

        chosen = choose_fallback_nic(root)
        if chosen:
            return str(chosen)
    except Exception as e:  # the network package is optional here; our own ranking still works
        LOG.debug("network fallback NIC chooser unavailable (%s)", e)
    nics = _candidate_nics()
    return nics[0] if nics else None


def _has_ipv4(interface: str) -> bool:
    proc = _ip("-4", "-o", "addr", "show", "dev", interface, "scope", "global", check=False)
    return bool(proc.stdout.strip())


def _link_is_up(interface: str) -> bool:
    proc = _ip("-o", "link", "show", "dev", interface, check=False)
    flags = proc.stdout.split("<", 1)[-1].split(">", 1)[0].split(",")
    return "UP" in flags


class _Changes:
    """What we did to the system, undone in reverse order."""

    def __init__(self) -> None:
        self.undo: list[list[str]] = []

    def run(self, do: list[str], undo: list[str]) -> bool:
        proc = _ip(*do, check=False)
        if proc.returncode != 0:
            if "File exists" in proc.stderr:
                LOG.debug("ip %s: already present, left alone", " ".join(do))
                return False
            raise EphemeralError(f"ip {' '.join(do)}: {proc.stderr.strip()}")
        self.undo.append(undo)
        return True

    def revert(self) -> None:
        while self.undo:
            args = self.undo.pop()
            proc = _ip(*args, check=False)
            if proc.returncode != 0:
                LOG.warning("cleaning up the temporary network: ip %s: %s", " ".join(args), proc.stderr.strip())


def _covered(address: str, routes: list[tuple[str, str]]) -> bool:
    ip = ipaddress.ip_address(address)
    return any(ip in ipaddress.ip_network(dest, strict=False) and not dest.endswith("/0") for dest, _ in routes)


def _apply(lease: Lease, changes: _Changes, target: str) -> None:
    dev = lease.interface
    cidr = f"{lease.address}/{lease.prefix}"
    add = ["-4", "addr", "add", cidr, "dev", dev]
    if lease.broadcast:
        add += ["broadcast", lease.broadcast]
    if lease.lease_seconds:
        add += ["valid_lft", str(lease.lease_seconds), "preferred_lft", str(lease.lease_seconds)]
    changes.run(add, ["-4", "addr", "del", cidr, "dev", dev])
    subnet = ipaddress.ip_network(cidr, strict=False)
    # RFC 3442: when option 121 is present, option 3 (routers) is ignored
    routes = list(lease.classless_routes) or [("0.0.0.0/0", r) for r in lease.routers[:1]]
    for dest, gateway in routes:
        if gateway == "0.0.0.0":
            changes.run(["-4", "route", "add", dest, "dev", dev], ["-4", "route", "del", dest, "dev", dev])
            continue
        if ipaddress.ip_address(gateway) not in subnet:  # a gateway outside the subnet needs a link route
            changes.run(["-4", "route", "add", f"{gateway}/32", "dev", dev],
                        ["-4", "route", "del", f"{gateway}/32", "dev", dev])
        if dest == "0.0.0.0/0" and not lease.classless_routes:
            continue  # plain option 3: only the host route below, never a default route of ours
        changes.run(["-4", "route", "add", dest, "via", gateway, "dev", dev],
                    ["-4", "route", "del", dest, "via", gateway, "dev", dev])
    if target and not _covered(target, lease.classless_routes):
        gateway = next((g for d, g in routes if d == "0.0.0.0/0" and g != "0.0.0.0"), "")
        if gateway:
            changes.run(["-4", "route", "add", f"{target}/32", "via", gateway, "dev", dev],
                        ["-4", "route", "del", f"{target}/32", "via", gateway, "dev", dev])
        else:
            changes.run(["-4", "route", "add", f"{target}/32", "dev", dev],
                        ["-4", "route", "del", f"{target}/32", "dev", dev])


@contextlib.contextmanager
def ephemeral_network(root: TargetRoot, interface: str | None = None, *, timeout: float = 5.0,
                      target: str = METADATA_ADDRESS) -> Iterator[Lease | None]:
    """Yield a ``Lease`` while a temporary DHCP configuration is in place (None: already configured).

    Raises EphemeralError (naming the NIC and the step) when no lease could be set up; on exit
    every address and route added is removed and a link we brought up is set down again.
    """
    nic = interface or fallback_interface(root)
    if not nic:
        raise EphemeralError("no network interface to get a temporary DHCP lease on")
    if _has_ipv4(nic):
        LOG.info("%s already has an IPv4 address; no temporary DHCP needed", nic)
        yield None
        return
    changes = _Changes()
    started = time.monotonic()
    try:
        if not _link_is_up(nic):
            changes.run(["link", "set", "dev", nic, "up"], ["link", "set", "dev", nic, "down"])
        lease = dhcp_lease(nic, timeout=timeout)
        _apply(lease, changes, target)
        LOG.info("temporary DHCP lease on %s: %s/%d (router %s, %d classless routes) in %.2fs", nic,
                 lease.address, lease.prefix, ",".join(lease.routers) or "none", len(lease.classless_routes),
                 time.monotonic() - started)
        yield lease
    finally:
        changes.revert()
