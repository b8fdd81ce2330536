"""A listener that speaks TLS (the OCI federation endpoint on 443): asyncio's TLS transport under a ``Connection``.

The metadata listeners use their own epoll transport (``transport.py``); a TLS listener carries
few requests, so it takes asyncio's: ``loop.create_server(..., ssl=context)`` does the
handshake (``Limits.head_timeout`` at most) and the record layer, and ``TlsTransport`` presents
that transport to a ``Connection`` as ``SocketTransport`` does (``write``, ``pending``,
pause/resume reading, ``close``, ``writable`` once everything is sent), so the HTTP rules,
limits and deadlines are the same. asyncio hands a connection over once its handshake is done;
one over the per-source or total cap is then closed (handshakes under way are bounded by the
handshake deadline alone: this is an endpoint for instances, not a public one).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, Optional

from cloudseed.provider.server.engine.connection import Connection, ConnectionTable, Limits
from cloudseed.provider.server.engine.http import Handler


class _Unsent:
    """``len()`` of it: bytes the TLS transport holds (what ``Connection`` reads as ``len(pending)``)."""

    __slots__ = ("transport",)

    def __init__(self, transport: Any):
        self.transport = transport

    def __len__(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0


class TlsTransport(asyncio.Protocol):
    """asyncio's protocol on one side, a ``Connection``'s transport on the other."""

    def __init__(self, connection: Connection, table: ConnectionTable, limits: Limits):
        self.connection = connection
        self.table = table
        self.limits = limits
        self.transport: Any = None
        self.peer = ""
        self.sock: Any = None  # Connection.peer_port asks it getpeername()
        self.pending = _Unsent(None)

    # -- asyncio's side ------------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.pending = _Unsent(transport)
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if peer else ""
        self.sock = transport.get_extra_info("socket")
        if self.table.refusal(self.peer[7:] if self.peer.startswith("::ffff:") else self.peer) is not None:
            transport.abort()  # over a cap: no 503 inside TLS for a client that has not shaken hands
            return
        # writable() means "all sent": resume_writing only once the buffer is empty
        transport.set_write_buffer_limits(high=self.limits.max_unsent, low=0)
        self.connection.connection_made(self)

    def data_received(self, data: bytes) -> None:
        self.connection.data_received(data)

    def eof_received(self) -> Optional[bool]:
        return False  # the client is done: close (TLS has no half-close here)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self.connection.transport is self:
            self.connection.connection_lost(exc)

    def pause_writing(self) -> None:
        pass  # Connection stops answering while len(pending) is over its limit

    def resume_writing(self) -> None:
        self.connection.writable()

    # -- the Connection's side -----------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)

    def pause_reading(self) -> None:
        if not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if not self.transport.is_closing():
            self.transport.resume_reading()

    def close(self) -> None:
        self.transport.close()

    def set_ttl(self, ttl: int) -> None:
        pass  # a hop limit is for answers to 169.254.169.254 (EC2's token PUT), not for TLS endpoints


class TlsServer:
    """What ``Listener.server`` is for a TLS listener: ``close`` stops accepting, ``release`` too."""

    def __init__(self, server: asyncio.AbstractServer):
        self.server = server

    def close(self) -> None:
        self.server.close()

    def release(self) -> None:
        self.server.close()


async def start_tls_listener(listener: Any, handler: Handler, table: ConnectionTable, limits: Limits,
                             context: ssl.SSLContext) -> None:
    from cloudseed.provider.server.engine.transport import listening_socket

    loop = asyncio.get_running_loop()
    sock = listening_socket(listener.host, listener.port)
    server = await loop.create_server(
        lambda: TlsTransport(Connection(handler, listener, table, limits), table, limits), sock=sock, ssl=context,
        ssl_handshake_timeout=limits.head_timeout)
    listener.server = TlsServer(server)
    if listener.port == 0:
        listener.port = sock.getsockname()[1]
