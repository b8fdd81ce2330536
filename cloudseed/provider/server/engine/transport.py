"""Sockets for the server: listeners, accepted connections and one epoll set per listener.

asyncio's own accept path costs a Task, a Future and several callbacks per connection, and its
transports several layers per read; a boot storm opens a connection per request. Here a
listener and its accepted sockets share one epoll set that the asyncio loop watches: a ready
connection costs one dict lookup and a call. ``SocketTransport`` is what a ``Connection``
(connection.py) writes to: ``send`` at once, the rest kept in ``pending`` until EPOLLOUT, and
reading paused and resumed on the connection's word (backpressure).

New connections are first offered to the ``ConnectionTable`` (per-source and total caps); a
refused one gets its 503 and is closed at once. On a PROXY protocol listener (``Listener``
with ``balancers``) a connection from any other address is refused (403) before a byte of it
is read, since whoever sends the PROXY header chooses who the client is.
``raise_open_file_limit`` lifts the soft RLIMIT_NOFILE to the hard one at start, so that the
caps, not the default 1,024 descriptors, decide who is served.
"""

from __future__ import annotations

import _socket
import asyncio
import logging
import os
import resource
import select
import socket
from typing import Any, Callable, Optional

from cloudseed.provider.server.engine.connection import Connection, ConnectionTable, Limits, Networks, ProxiedConnection
from cloudseed.provider.server.engine.http import Handler, Request, Response, text_error

LOG = logging.getLogger("cloudseed.server")
_READ_EVENTS = select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR | select.EPOLLRDHUP
_WRITE_EVENTS = select.EPOLLOUT | select.EPOLLHUP | select.EPOLLERR
_HANGUP_EVENTS = select.EPOLLHUP | select.EPOLLERR
_DONTWAIT = socket.MSG_DONTWAIT


class Poller:
    """One epoll set for a listener and its connections, itself watched by the asyncio loop.

    A loop iteration accepts every waiting connection and reads every ready one in one
    callback; registering a connection is one ``epoll.register``, and closing its socket takes
    it out of the set (no ``unregister``). Level-triggered, like asyncio's selector.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.epoll = select.epoll()
        self.transports: dict[int, SocketTransport] = {}
        self.listener_fd = -1
        self.accept: Callable[[], None] = lambda: None
        loop.add_reader(self.epoll.fileno(), self._ready)

    def close(self) -> None:
        """Drop every connection still open and the epoll set itself."""
        for transport in list(self.transports.values()):
            transport.abort()
        if self.epoll.fileno() >= 0:
            self.loop.remove_reader(self.epoll.fileno())
            self.epoll.close()

    def listen(self, fd: int, accept: Callable[[], None]) -> None:
        """Call ``accept`` while the listening socket ``fd`` has connections waiting."""
        self.listener_fd, self.accept = fd, accept
        self.epoll.register(fd, select.EPOLLIN)

    def stop_listening(self) -> None:
        if self.listener_fd >= 0 and self.epoll.fileno() >= 0:
            try:
                self.epoll.unregister(self.listener_fd)
            except OSError:
                pass
        self.listener_fd = -1

    def add(self, transport: SocketTransport) -> None:
        self.transports[transport.fd] = transport
        self.epoll.register(transport.fd, select.EPOLLIN)

    def watch(self, transport: SocketTransport, read: bool, write: bool) -> None:
        self.epoll.modify(transport.fd, (select.EPOLLIN if read else 0) | (select.EPOLLOUT if write else 0))

    def remove(self, transport: SocketTransport) -> None:
        """Forget a connection whose socket is about to be closed (which leaves the epoll set)."""
        self.transports.pop(transport.fd, None)

    def _ready(self) -> None:
        transports = self.transports
        for fd, events in self.epoll.poll(0, 512):
            transport = transports.get(fd)
            if transport is None:
                if fd == self.listener_fd:
                    self.accept()
                continue
            try:
                if events & _READ_EVENTS and not transport.closing:
                    if transport.reading:
                        transport._read_ready()
                    elif events & _HANGUP_EVENTS and not transport.pending:  # gone while not read
                        transport.abort()
                if events & _WRITE_EVENTS and transport.pending and not transport.closed:
                    transport._write_ready()
            except Exception:  # one connection's failure must not stop the others
                LOG.exception("connection handling failed")
                transport.abort()


class SocketTransport:
    """A connected socket (left blocking: every call passes MSG_DONTWAIT, saving the two system
    calls of making it non-blocking): ``write``, pause/resume reading, ``close``, IP TTL.

    ``pending`` holds what the socket would not take yet. The protocol's ``connection_lost`` is
    called once, after the socket is closed; its ``writable`` each time ``pending`` has all gone
    out.
    """

    __slots__ = ("sock", "fd", "poller", "protocol", "peer", "pending", "reading", "closing", "closed")

    def __init__(self, poller: Poller, sock: Any, peer: str):
        self.poller = poller
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.protocol: Any = None
        self.pending = bytearray()  # unsent output (the socket's buffer was full)
        self.reading = True
        self.closing = False  # no more reads or writes; close once ``pending`` is sent
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closing:
            return
        if self.pending:
            self.pending += data
            return
        try:
            sent = self.sock.send(data, _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as error:
            self._lost(error)
            return
        if sent < len(data):
            self.pending += memoryview(data)[sent:]
            self._watch()

    def pause_reading(self) -> None:
        if self.reading and not self.closing:
            self.reading = False
            self._watch()

    def resume_reading(self) -> None:
        if not self.reading and not self.closing:
            self.reading = True
            self._watch()

    def set_ttl(self, ttl: int) -> None:
        if self.closing:
            return
        try:
            if self.sock.family == socket.AF_INET6:
                self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, ttl)
            else:
                self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
        except OSError:
            pass

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        if self.pending:
            self.reading = False
            self._watch()  # stop reading; finish writing, then close
        else:
            self._lost(None)

    def abort(self) -> None:
        self.closing = True
        self._lost(None)

    def _watch(self) -> None:
        if not self.closed:
            self.poller.watch(self, self.reading, bool(self.pending))

    def _read_ready(self) -> None:
        try:
            data = self.sock.recv(65536, _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        if data:
            self.protocol.data_received(data)
        else:  # the client closed its side: nothing more to read, nothing to answer
            self.closing = True
            self._lost(None)

    def _write_ready(self) -> None:
        try:
            sent = self.sock.send(self.pending, _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        del self.pending[:sent]
        if not self.pending:
            if self.closing:
                self._lost(None)
            else:
                self._watch()
                self.protocol.writable()

    def _lost(self, error: Optional[Exception]) -> None:
        if self.closed:
            return
        self.closed = self.closing = True
        self.poller.transports.pop(self.fd, None)  # closing the socket takes it out of the epoll set
        self.pending = bytearray()
        self.sock.close()
        self.protocol.connection_lost(error)


class SocketServer:
    """A listening socket whose connections get a SocketTransport and a protocol from ``factory``.

    Accepting is the cheapest CPython allows: ``_accept`` gives the new descriptor and address
    without a ``socket.socket`` (whose properties convert enums), the connection's socket object
    is the C-level ``_socket.socket``, TCP_NODELAY comes from the listening socket, and the new
    connection is read at once (in a storm its request is usually there already), saving a
    turn of the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, factory: Callable[[], Any],
                 table: ConnectionTable, balancers: tuple = ()):
        self.loop = loop
        self.poller = Poller(loop)  # one per listener
        self.sockets = [sock]
        self.factory = factory
        self.table = table
        self.balancers = Networks(balancers)  # a PROXY protocol listener admits only these
        self._family = int(sock.family)
        self.poller.listen(sock.fileno(), self._accept_ready)

    def close(self) -> None:
        """Stop accepting; open connections go on until ``release``."""
        self.poller.stop_listening()
        for sock in self.sockets:
            if sock.fileno() >= 0:
                sock.close()

    def release(self) -> None:
        self.close()
        self.poller.close()

    def _accept_ready(self) -> None:
        listening = self.sockets[0]
        accept = listening._accept
        poller = self.poller
        refusal = self.table.refusal if not self.balancers else self._refuse_non_balancer
        adopt = self._adopt
        for _ in range(256):
            try:
                fd, address = accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as error:  # out of file descriptors, ...: pause accepting for a second
                LOG.error("accept failed: %s; pausing for 1s", error)
                poller.stop_listening()
                self.loop.call_later(1.0, self._resume)
                return
            peer = address[0] if address else ""
            if peer[:7] == "::ffff:":
                peer = peer[7:]
            refused = refusal(peer)
            if refused is not None:
                refuse(fd, refused)
                continue
            adopt(fd, peer)

    def _adopt(self, fd: int, peer: str, read: bool = True) -> Any:
        """Serve the connection ``fd`` accepted from ``peer``: its transport and protocol (returned),
        and with ``read`` its first read at once (in a storm the request is usually here already)."""
        transport = SocketTransport(self.poller, _socket.socket(self._family, socket.SOCK_STREAM, 0, fd), peer)
        protocol = transport.protocol = self.factory()
        self.poller.add(transport)
        protocol.connection_made(transport)
        if read and transport.reading and not transport.closing:
            transport._read_ready()
        return protocol

    def _refuse_non_balancer(self, peer: str) -> Optional[bytes]:
        if peer in self.balancers:
            return self.table.refusal(peer)
        self.table.proxy_refused += 1
        LOG.info("refusing a connection from %s: not a balancer of this PROXY protocol listener", peer)
        return text_error(403, f"{peer} may not connect here: this listener takes connections only from its "
                               "load balancers (PROXY protocol)").encode(False)

    def _resume(self) -> None:
        sock = self.sockets[0]
        if sock.fileno() >= 0 and self.poller.epoll.fileno() >= 0:
            self.poller.listen(sock.fileno(), self._accept_ready)


class Listener:
    """A bound socket plus what the application needs to know about it (its network)."""

    def __init__(self, host: str, port: int, network: Optional[str], kind: str = "metadata",
                 balancers: tuple = ()):
        self.host = host
        self.port = port
        self.network = network
        self.kind = kind
        self.balancers = balancers  # not empty: a PROXY protocol listener for these balancer networks
        self.server: Optional[SocketServer] = None
        self.fast: Any = None  # fast_path.FastServer when C answers its cached requests
        self.on_response: Optional[Callable[[Request, Response], None]] = None

    def __repr__(self) -> str:
        suffix = f"={self.network}" if self.network else ""
        proxied = " (PROXY protocol)" if self.balancers else ""
        return f"{self.kind} {self.host}:{self.port}{suffix}{proxied}"


def refuse(fd: int, answer: bytes) -> None:
    """Send a refusal on a connection just accepted and close it (a fresh socket's buffer takes
    a short answer whole)."""
    try:
        os.write(fd, answer)
    except OSError:
        pass
    os.close(fd)


def listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A non-blocking TCP socket bound to ``host:port`` (an IP address) and listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(4096)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def start_listener(listener: Listener, handler: Handler, table: ConnectionTable, limits: Limits,
                         reuse_port: bool = False) -> None:
    loop = asyncio.get_running_loop()
    sock = listening_socket(listener.host, listener.port, reuse_port)
    kind = ProxiedConnection if listener.balancers else Connection
    listener.server = SocketServer(loop, sock, lambda: kind(handler, listener, table, limits), table,
                                   listener.balancers)
    if listener.port == 0:
        listener.port = sock.getsockname()[1]


def raise_open_file_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open", encoding="ascii") as handle:
                hard = int(handle.read())
        except (OSError, ValueError):
            hard = 1024 * 1024
    if soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
            soft = hard
        except (OSError, ValueError) as error:
            LOG.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, error)
    return soft
