"""The PROXY protocol (versions 1 and 2), as a load balancer such as haproxy sends it: pure parsing.

A balancer that relays a client's TCP connection to the server opens its own connection, so the
server would see the balancer's address, not the instance's. With ``send-proxy`` (v1, one text
line) or ``send-proxy-v2`` (binary) the balancer first sends a header naming the client's
address and port; a listener configured for it (``proxy_protocol_listen``) reads that header
before any HTTP and identifies the instance by the address in it. Only configured balancer
addresses may send it (transport.py refuses everyone else on such a listener), since whoever
sends the header chooses the identity.

    parsed = parse(data)      # None: more bytes needed; ProxyProtocolError: not a valid header
    if parsed is not None:
        length, origin = parsed   # origin: (source, source_port) or None (LOCAL / UNKNOWN)

``origin`` None means the balancer speaks for itself (v2 ``LOCAL``, its health checks; v1
``UNKNOWN``): the connection's own endpoint is the client. IPv4-mapped IPv6 sources are given
as IPv4, as the server matches them. TLVs (v2) are skipped.
"""

from __future__ import annotations

import socket
from typing import Optional

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V1_PREFIX = b"PROXY "
V1_MAX = 107  # the longest v1 line, CRLF included
V2_MAX = 16 + 4096  # 16 fixed bytes and at most this much address and TLV data (haproxy sends < 300)

Origin = Optional[tuple[str, int]]


class ProxyProtocolError(Exception):
    """The bytes are not a PROXY protocol header this server accepts (the connection is closed)."""


def parse(data: bytes) -> Optional[tuple[int, Origin]]:
    """``(header length, origin)`` once ``data`` starts with a whole header; None while it may
    still become one; ``ProxyProtocolError`` as soon as it cannot."""
    if data[:1] == b"\r":
        return _parse_v2(data)
    if data[:1] == b"P":
        return _parse_v1(data)
    if not data:
        return None
    raise ProxyProtocolError("the connection did not start with a PROXY protocol header")


def _parse_v1(data: bytes) -> Optional[tuple[int, Origin]]:
    if not data.startswith(V1_PREFIX[:len(data)]):
        raise ProxyProtocolError("the connection did not start with a PROXY protocol header")
    end = data.find(b"\r\n", 0, V1_MAX)
    if end < 0:
        if len(data) >= V1_MAX or b"\n" in data:
            raise ProxyProtocolError(f"PROXY v1 line without CRLF in its first {V1_MAX} bytes")
        return None
    try:
        line = data[:end].decode("ascii")
    except UnicodeDecodeError:
        raise ProxyProtocolError("PROXY v1 line is not ASCII") from None
    fields = line.split(" ")
    if len(fields) >= 2 and fields[1] == "UNKNOWN":
        return end + 2, None  # the receiver ignores the rest of the line
    if len(fields) != 6 or fields[1] not in ("TCP4", "TCP6"):
        raise ProxyProtocolError(f"malformed PROXY v1 line {line[:V1_MAX]!r}")
    family = socket.AF_INET if fields[1] == "TCP4" else socket.AF_INET6
    source = _address(family, fields[2])
    _address(family, fields[3])
    return end + 2, (source, _port(fields[4]))


def _address(family: int, text: str) -> str:
    try:
        packed = socket.inet_pton(family, text)
    except (OSError, ValueError):
        raise ProxyProtocolError(f"PROXY v1 address {text!r} is not an IPv{4 if family == socket.AF_INET else 6} "
                                 "address") from None
    return _text(family, packed)  # inet_pton refuses leading zeroes, as the protocol does


def _port(text: str) -> int:
    if not text.isdigit() or len(text) > 5 or (len(text) > 1 and text[0] == "0") or int(text) > 65535:
        raise ProxyProtocolError(f"PROXY v1 port {text!r} is not 0-65535")
    return int(text)


def _parse_v2(data: bytes) -> Optional[tuple[int, Origin]]:
    known = min(len(data), 12)
    if data[:known] != V2_SIGNATURE[:known]:
        raise ProxyProtocolError("the connection did not start with a PROXY protocol header")
    if len(data) < 16:
        return None
    version, command = data[12] >> 4, data[12] & 0x0F
    if version != 2:
        raise ProxyProtocolError(f"PROXY protocol version {version} is not supported (1 and 2 are)")
    if command > 1:
        raise ProxyProtocolError(f"PROXY v2 command {command} is neither LOCAL (0) nor PROXY (1)")
    length = 16 + int.from_bytes(data[14:16], "big")
    if length > V2_MAX:
        raise ProxyProtocolError(f"PROXY v2 header of {length} bytes is longer than {V2_MAX}")
    if len(data) < length:
        return None
    if command == 0:  # LOCAL: the balancer's own connection (a health check)
        return length, None
    family, transport = data[13] >> 4, data[13] & 0x0F
    if transport != 1 and family in (1, 2):
        raise ProxyProtocolError("PROXY v2 header for a datagram connection on a TCP listener")
    if family == 1:  # AF_INET: 4 + 4 address bytes, 2 + 2 port bytes
        if length < 16 + 12:
            raise ProxyProtocolError("PROXY v2 IPv4 header shorter than its addresses")
        return length, (_text(socket.AF_INET, data[16:20]), int.from_bytes(data[24:26], "big"))
    if family == 2:  # AF_INET6: 16 + 16, 2 + 2
        if length < 16 + 36:
            raise ProxyProtocolError("PROXY v2 IPv6 header shorter than its addresses")
        return length, (_text(socket.AF_INET6, data[16:32]), int.from_bytes(data[48:50], "big"))
    if family == 0:  # UNSPEC: the receiver uses the connection's own endpoints
        return length, None
    raise ProxyProtocolError(f"PROXY v2 address family {family} (AF_UNIX) cannot name an instance")


def _text(family: int, packed: bytes) -> str:
    if family == socket.AF_INET6 and packed[:12] == b"\x00" * 10 + b"\xff\xff":
        return socket.inet_ntop(socket.AF_INET, packed[12:])
    return socket.inet_ntop(family, packed)


def encode_v2(source: str, source_port: int, destination: str, destination_port: int) -> bytes:
    """A PROXY v2 header (command PROXY, TCP) naming ``source``: what a balancer sends (tests, bench)."""
    if ":" in source:
        body = socket.inet_pton(socket.AF_INET6, source) + socket.inet_pton(socket.AF_INET6, destination)
        family = 0x21
    else:
        body = socket.inet_pton(socket.AF_INET, source) + socket.inet_pton(socket.AF_INET, destination)
        family = 0x11
    body += source_port.to_bytes(2, "big") + destination_port.to_bytes(2, "big")
    return V2_SIGNATURE + bytes((0x21, family)) + len(body).to_bytes(2, "big") + body


def encode_v1(source: str, source_port: int, destination: str, destination_port: int) -> bytes:
    """A PROXY v1 line naming ``source`` (tests, bench)."""
    family = "TCP6" if ":" in source else "TCP4"
    return f"PROXY {family} {source} {destination} {source_port} {destination_port}\r\n".encode("ascii")
