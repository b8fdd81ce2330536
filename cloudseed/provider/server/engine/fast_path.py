"""The fast path for new connections: the Python side of ``fast_path.c`` (the ``_fast_path``
extension, built by scripts/setup.sh; without it, or with ``fast_path: false``, every
connection takes the Python path and nothing here runs).

A boot storm opens a connection per request, and after an instance's first few requests most
of them ask for an answer already rendered. For those the C side accepts, reads, answers from
the instance's own ``routes`` (the Python cache: C holds a view, checked against the cache's
current instance on every request) and keeps the connection until the client closes it; it
hands every other connection to Python with the bytes it read (``FastServer.adopt``), where it
becomes an ordinary ``Connection``. What C may answer is exactly what the Python hot path
(``MetadataApp.handle``) would answer the same way:

* a peer is registered (``FastServer.offer``) only when Python itself answered it from its
  instance's routes, on a direct (not proxied) connection, with no IMDSv2 token sent or
  required, for an instance without timeline or faults (whose answers may change with time);
  a path that instance has not asked yet is routed by Python, called from C
  (``MetadataApp.remembered``), and C answers it when Python keeps the answer in routes;
* a request is C's only when it is ``GET <path> HTTP/1.1`` with a plain path (no ``%``, no
  query) and its header lines are byte for byte ones Python parsed and checked
  (``FastPath.learn``: keep-alive, no body, no token header);
* the rate limit takes its token from the peer's bucket in Python's ``RateLimiter`` (Python
  answers when the bucket is new or empty), the connection caps count C's connections
  (``ConnectionTable.per_source`` itself, and ``elsewhere``), and what C answered reaches
  ``/metrics`` and the access log when drained (twice a second, and before ``/metrics``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from operator import itemgetter
from typing import Any, Callable, Optional

from cloudseed.provider.server.engine.connection import Connection, ConnectionTable, Limits
from cloudseed.provider.server.engine.http import Handler, Response
from cloudseed.provider.server.engine.transport import Listener, SocketServer, listening_socket, refuse
from cloudseed.provider.server.engine.wire import parsed_head

try:
    from cloudseed.provider.server.engine import _fast_path  # type: ignore[attr-defined]
except ImportError:  # not built: the Python path serves every connection
    _fast_path = None

LOG = logging.getLogger("cloudseed.server")
MAX_PEERS = 1_000_000  # registered peers per listener; past it the table starts over


def available() -> bool:
    return _fast_path is not None


class FastPath:
    """What the fast listeners of one server share: the C side's state (``shared``), the drain
    of its counts into ``metrics`` and ``log``, and the header lines verified so far."""

    def __init__(self, loop: asyncio.AbstractEventLoop, table: ConnectionTable, idle_timeout: float, instances: dict,
                 limiter: Any, metrics: Any, bounds: tuple, log: Any, api_of: Callable[[str], str],
                 token_header: str):
        assert _fast_path is not None, "the _fast_path extension is not built (scripts/setup.sh)"
        self.loop = loop
        limited = limiter.rate > 0
        self.shared = _fast_path.Shared(table.per_source, table.connections, table.max_per_source,
                                        table.max_connections, idle_timeout, instances,
                                        limiter if limited else None, float(limiter.rate), float(limiter.burst),
                                        Response, tuple(float(b) for b in bounds), log.enabled)
        table.elsewhere = self.shared
        self.metrics = metrics
        self.log = log
        self.api_of = api_of
        self.token_header = token_header
        self.servers: dict[Any, FastServer] = {}  # C listener -> its server
        self._verified: set[bytes] = set()
        loop.add_reader(self.shared.fileno(), self._service)

    def close(self) -> None:
        """Close what C holds, count what it answered, stop watching."""
        self.shared.close_all()
        self.drain()
        self.loop.remove_reader(self.shared.fileno())

    def learn(self, head: bytes) -> None:
        """Let C answer requests with the header lines of ``head`` (one whole request head Python
        just answered from routes), if they are ones the Python hot path treats alike whatever
        the path: GET, HTTP/1.1, keep-alive, no body, no IMDSv2 token, a plain target."""
        parsed = parsed_head(head)
        if parsed is None or parsed.method != "GET" or parsed.version != "HTTP/1.1" or not parsed.keep_alive \
                or parsed.length or parsed.query or parsed.path != parsed.target or self.token_header in parsed.headers:
            return
        line = f"GET {parsed.target} HTTP/1.1\r\n".encode("latin-1")
        if head.startswith(line):
            lines = head[len(line):]
            if lines not in self._verified and self.shared.add_template(lines):
                self._verified.add(lines)

    def drain(self) -> None:
        """Add what C answered since the last drain to the metrics and the access log."""
        histogram, counts, seconds, answered, entries = self.shared.drain()
        if answered:
            metrics = self.metrics
            requests, api_of = metrics.requests, self.api_of
            for (path, status), count in counts.items():
                key = (api_of(path), status)
                requests[key] = requests.get(key, 0) + count
            for index, count in enumerate(histogram):
                metrics.histogram[index] += count
            metrics.latency_sum += seconds
            metrics.latency_count += answered
        if entries:
            pending = self.log.pending
            pending.extend(entries)
            pending.sort(key=itemgetter(0))  # in time order with the Python path's lines

    def _service(self) -> None:
        handoffs = self.shared.service()
        if handoffs:
            servers = self.servers
            for item in handoffs:
                server = servers.get(item[3])
                if server is not None:
                    server.adopt((item,))
                else:  # its listener is gone (shutting down)
                    os.close(item[0])


class FastServer(SocketServer):
    """A metadata listener whose new connections are accepted by C (``fast_path.c``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, factory: Callable[[], Any],
                 table: ConnectionTable, fast: FastPath, network: Optional[str]):
        super().__init__(loop, sock, factory, table)
        self.fast = fast
        self.network = network
        self.peers: dict[str, tuple] = {}  # peer -> (instance, its id, rate-limit bucket key, its routes, fill)
        self.native = _fast_path.Listener(fast.shared, sock.fileno(), self.peers)  # type: ignore[union-attr]
        fast.servers[self.native] = self

    def release(self) -> None:
        super().release()
        self.fast.servers.pop(self.native, None)

    def offer(self, request: Any, instance: Any, fill: Optional[Callable[[Any, str], Any]] = None) -> None:
        """Python answered ``request`` from ``instance``'s routes with no token sent or needed, on a
        direct connection, for an instance without timeline or faults (MetadataApp.handle): C may
        answer this peer's requests alike while the cache holds this instance. ``fill(instance,
        path)``: what C calls for a path not in routes yet (the answer Python's routing keeps for
        it, or None: Python's)."""
        peer = request.peer
        known = self.peers.get(peer)
        if known is None or known[0] is not instance:
            if len(self.peers) >= MAX_PEERS:
                self.peers.clear()
            self.peers[peer] = (instance, instance.instance_id, (self.network, peer), instance.routes, fill)
        connection = request.connection
        if connection is not None:
            head = connection.__dict__.pop("first_read", None)
            if head is not None:
                self.fast.learn(head)
            connection.hand_over = True  # to C once this answer is out (``answered``)

    def answered(self, request: Any) -> None:
        """After Python wrote an answer (the listener's ``on_response``): a connection whose answer
        came from routes goes to C once this turn of the loop is over (it may still be closed, or
        read), if nothing of it is left in Python then, so that its next requests are C's too."""
        connection = request.connection
        if connection is not None and connection.__dict__.pop("hand_over", False):
            self.loop.call_soon(self._hand_over, connection)

    def _hand_over(self, connection: Any) -> None:
        transport, parser = connection.transport, connection.parser
        if connection.__class__ is not Connection or connection.busy or connection.scheduled or connection.closing \
                or connection.out or not connection.reading or parser is None or parser.buffered \
                or parser.stopped is not None or transport.closing or transport.pending or not transport.reading:
            return
        fd = transport.fd
        self.poller.epoll.unregister(fd)
        self.poller.transports.pop(fd, None)
        connection.closing = transport.closing = transport.closed = True
        self.table.remove(connection)
        transport.sock.detach()
        self.native.hold(fd, connection.peer)  # type: ignore[union-attr]

    def _accept_ready(self) -> None:
        try:
            handoffs = self.native.accept()
        except OSError as error:  # out of file descriptors, ...: pause accepting for a second
            LOG.error("accept failed: %s; pausing for 1s", error)
            self.poller.stop_listening()
            self.loop.call_later(1.0, self._resume)
            return
        if handoffs:
            self.adopt(handoffs)

    def adopt(self, handoffs: Any) -> None:
        """Connections C leaves to Python: ``(fd, peer, data, _)``, data None when C checked neither
        the caps nor read, else the bytes it read (the connection within the caps)."""
        table = self.table
        for fd, peer, data, _ in handoffs:
            if data is None:
                refused = table.refusal(peer)
                if refused is not None:
                    refuse(fd, refused)
                else:
                    self._adopt(fd, peer)
                continue
            protocol = self._adopt(fd, peer, read=False)
            protocol.first_read = data  # its head, if C may answer its like (``offer``)
            protocol.data_received(data)


async def start_fast_listener(listener: Listener, handler: Handler, table: ConnectionTable, limits: Limits,
                              fast: FastPath, reuse_port: bool = False) -> None:
    """``transport.start_listener`` for a metadata listener (not PROXY protocol) with the C fast path."""
    loop = asyncio.get_running_loop()
    sock = listening_socket(listener.host, listener.port, reuse_port)
    server = FastServer(loop, sock, lambda: Connection(handler, listener, table, limits), table, fast,
                        listener.network)
    listener.server = listener.fast = server
    logged = listener.on_response

    def on_response(request: Any, response: Response) -> None:
        if logged is not None:
            logged(request, response)
        server.answered(request)

    listener.on_response = on_response
    if listener.port == 0:
        listener.port = sock.getsockname()[1]
