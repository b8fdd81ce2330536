"""HTTP/1.1 connections: keep-alive, pipelining and backpressure, between a transport and a handler.

A ``Connection`` feeds received bytes to its ``RequestParser`` (wire.py), hands each request to
the application's handler and writes the answers in request order. It knows nothing of sockets:
the transport (transport.py) calls ``data_received``, ``writable`` and ``connection_lost``, is
told ``write``, ``pause_reading``, ``resume_reading``, ``close`` and ``set_ttl``, and its
``pending`` (the bytes the socket would not take yet) is read.

Bounds (``Limits``, from the server settings), so that no client can make the server hold
more than a fixed amount for it:

* at most ``max_pipelined`` requests are answered per turn; more waiting in the buffer are
  taken on the loop's next turn, so one pipelining client cannot starve the others;
* while more than ``max_unsent`` bytes of answers are unsent (the client does not read), no
  request is answered and the connection is not read: the client's bytes stay in the kernel;
* while a request waits for an answer (a handler awaiting the registry, or backpressure), at
  most ``max_buffered`` further bytes are read;
* a request must arrive whole within ``head_timeout`` seconds of its first byte (slowloris),
  and a connection with nothing to do is closed after ``idle_timeout`` (both checked by
  ``ConnectionTable.sweep`` twice a second, so to within half a second; no clock is read per
  request).

``ConnectionTable`` holds every connection of the server: it counts them per source address
(``max_per_source``, trusted proxies and balancers exempt, and ``max_connections`` in all),
closes the ones past their deadlines (``sweep``), and drains them on shutdown.

``ProxiedConnection`` is a connection from a load balancer on a PROXY protocol listener: its
first bytes are the balancer's header (proxy_protocol.py) naming the client, which becomes the
connection's ``peer`` (counted under that address from then on); then it is a ``Connection``.
A reply that would set the IP TTL (an IMDSv2 token's hop limit) cannot: the balancer, not this
socket, sends the packets the client gets; it carries ``Cloudseed-Hop-Limit: N`` instead, for
the balancer to apply (docs/metadata-server.md, "Deployment").
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from typing import Any, Callable, Optional

from cloudseed.provider.server.engine import proxy_protocol
from cloudseed.provider.server.engine.http import Handler, Request, Response, text_error
from cloudseed.provider.server.engine.wire import RequestParser, WireError

LOG = logging.getLogger("cloudseed.server")
Clock = Callable[[], float]
HOP_LIMIT_HEADER = "Cloudseed-Hop-Limit"  # the IP TTL a balancer should give this reply (PROXY listeners)


class Limits:
    """Per-connection bounds (see the module docstring); the settings' defaults."""

    __slots__ = ("max_body", "max_pipelined", "max_unsent", "max_buffered", "head_timeout", "idle_timeout")

    def __init__(self, max_body: int = 64 * 1024, max_pipelined: int = 32, max_unsent: int = 256 * 1024,
                 max_buffered: int = 64 * 1024, head_timeout: float = 10.0, idle_timeout: float = 60.0):
        self.max_body = max_body
        self.max_pipelined = max_pipelined
        self.max_unsent = max_unsent
        self.max_buffered = max_buffered
        self.head_timeout = head_timeout
        self.idle_timeout = idle_timeout


class Connection:
    """One client connection (the transport's protocol).

    A boot storm opens a connection per request, so making one is kept cheap: what most
    connections never change is a class attribute (an instance sets its own only when it
    changes), and the request parser is made with the first bytes."""

    # defaults, shadowed per connection only when they change
    parser: Optional[RequestParser] = None  # made at the first bytes
    transport: Any = None
    peer = ""
    busy = False  # a handler's awaitable is running: later requests wait
    closing = False
    scheduled = False  # more requests are buffered; answered on the loop's next turn
    reading = True
    # deadlines: counters here, the clock is read by ``check`` (twice a second), not per request
    activity = 0  # reads and drained writes
    answered = 0
    seen_activity = seen_answered = 0  # as ``check`` last saw them
    idle_since: Optional[float] = None  # set by the first ``check``
    partial_since: Optional[float] = None  # when ``check`` first saw this request unfinished
    balancer = ""  # the balancer's address when the client came through one (PROXY protocol)
    idle_limit: Optional[float] = None  # an idle deadline shorter than ``idle_timeout`` (``close_when_idle``)
    source_port: Optional[int] = None  # the client's port, when a PROXY header named it

    def __init__(self, handler: Handler, listener: Any, table: ConnectionTable, limits: Limits):
        self.handler = handler
        self.listener = listener
        self.on_response: Optional[Callable[[Request, Response], None]] = listener.on_response
        self.table = table
        self.limits = limits
        self.out: list[bytes] = []  # encoded answers not yet written
        self.done: list[tuple[Request, Response]] = []  # their requests, for on_response after the write
        # read on every request: kept on the instance (a read falling through to the class costs more)
        self.busy = self.closing = self.scheduled = False
        self.reading = True

    # -- called by the transport ---------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        peer = transport.peer
        self.peer = peer[7:] if peer.startswith("::ffff:") else peer
        self.table.add(self)

    def peer_port(self) -> Optional[int]:
        """The client's source port (asked of the socket when needed: Scaleway's user-data wants a
        privileged one), None when unknown."""
        if self.balancer:
            return self.source_port
        try:
            return int(self.transport.sock.getpeername()[1])
        except (AttributeError, OSError, IndexError, TypeError, ValueError):
            return None

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closing = True
        self.table.remove(self)

    def data_received(self, data: bytes) -> None:
        self.activity += 1
        parser = self.parser
        if parser is None:
            parser = self.parser = RequestParser(self.limits.max_body)
        parser.feed(data)
        if self.busy or self.scheduled:
            self._update_reading()
        else:
            self._process()

    def writable(self) -> None:
        """The transport sent everything it held: answer what waited for that."""
        self.activity += 1
        if not self.busy and not self.scheduled and not self.closing:
            self._process()
        else:
            self._update_reading()

    # -- called by the table ---------------------------------------------------------------------
    def check(self, now: float) -> Optional[str]:
        """Why this connection should be closed now, if it should (called about twice a second:
        the deadlines are kept to within one call)."""
        if self.activity != self.seen_activity or self.idle_since is None:
            self.seen_activity = self.activity
            self.idle_since = now
        if self.busy:
            return None
        if self.parser is not None and self.parser.buffered:  # part of a request, or requests waiting
            if self.partial_since is None or self.answered != self.seen_answered:
                self.partial_since = now
                self.seen_answered = self.answered
            elif now - self.partial_since > self.limits.head_timeout:
                return "request not completed in time"
        else:
            self.partial_since = None
        if now - self.idle_since > (self.idle_limit or self.limits.idle_timeout):
            return "idle"
        return None

    def close_when_idle(self, seconds: float) -> None:
        """Close this connection once it has been idle ``seconds`` (to within ``check``'s half second)
        instead of ``idle_timeout``: after an answer a client may leave unread on a connection it
        never uses again, expecting the server to close it, as a server that closes every
        connection does (EC2's IMDS)."""
        self.idle_limit = seconds

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    # -- the state machine -------------------------------------------------------------------------
    def _process(self) -> None:
        """Answer the buffered requests, in order, up to ``max_pipelined``; write the answers."""
        self.scheduled = False
        transport = self.transport
        if self.closing or len(transport.pending) > self.limits.max_unsent:
            self._update_reading()  # a client that does not read: wait for writable()
            return
        parser = self.parser
        out = self.out
        left = self.limits.max_pipelined
        while parser.pos != len(parser.data) or parser.stopped is not None:
            if not left:  # the rest on the loop's next turn: other connections go first
                self.scheduled = True
                asyncio.get_running_loop().call_soon(self._process)
                break
            try:
                item = parser.next()
            except WireError as error:
                self._send(text_error(error.status, f"bad request: {error}"), None, False)
                break
            if item is None:
                break
            left -= 1
            head = item[0]
            request = Request(head.method, head.target, head.version, head.headers, item[1], self.peer,
                              self.listener, head.path, head.query, self)
            try:
                result = self.handler(request)
            except Exception as error:  # a handler bug must not kill the connection
                result = _failure(error, request)
            if result.__class__ is Response:
                if result.ip_ttl is None and head.keep_alive:  # what ``_send`` does, without a call
                    out.append(result.encode(True, head.method == "HEAD"))  # type: ignore[union-attr]
                    self.done.append((request, result))  # type: ignore[arg-type]
                else:
                    self._send(result, request, head.keep_alive)  # type: ignore[arg-type]
                    if self.closing:
                        break
            else:
                self.busy = True
                task = asyncio.ensure_future(result)  # type: ignore[arg-type]
                task.add_done_callback(lambda t, r=request, k=head.keep_alive: self._finished(t, r, k))
                break
        if out:  # ``_flush``, without the cost of a call
            transport.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
            done = self.done
            on_response = self.on_response
            if on_response is not None:
                for request, result in done:
                    on_response(request, result)
            done.clear()
        self.answered += self.limits.max_pipelined - left
        if self.scheduled or self.busy or not self.reading or len(transport.pending) > self.limits.max_unsent:
            self._update_reading()

    def _finished(self, task: asyncio.Future, request: Request, keep_alive: bool) -> None:
        self.busy = False
        try:
            response = task.result()
        except Exception as error:
            response = _failure(error, request)
        if self.closing:
            return
        self._send(response, request, keep_alive)
        if self.out:
            self._flush()
        if not self.scheduled:
            self._process()

    def _update_reading(self) -> None:
        """Read while answers go out and little waits; stop while the client does not read."""
        transport = self.transport
        if self.closing or transport is None:
            return
        limits = self.limits
        blocked = len(transport.pending) > limits.max_unsent
        waiting = self.busy or self.scheduled or blocked
        want = not blocked and not (waiting and self.parser is not None and self.parser.buffered > limits.max_buffered)
        if want != self.reading:
            self.reading = want
            if want:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def _flush(self) -> None:
        out = self.out
        transport = self.transport
        if transport is not None:
            transport.write(out[0] if len(out) == 1 else b"".join(out))
        out.clear()
        done = self.done
        if done:
            on_response = self.on_response
            if on_response is not None:
                for request, response in done:
                    on_response(request, response)
            done.clear()

    def _send(self, response: Response, request: Optional[Request], keep_alive: bool) -> None:
        if response.ip_ttl is not None:
            if self.balancer:  # the balancer sends the client's packets: it is told the TTL to use
                response = Response(response.status, response.body, response.content_type,
                                    [*response.headers, (HOP_LIMIT_HEADER, str(response.ip_ttl))])
            else:
                if self.out:
                    self._flush()  # earlier answers leave with the old TTL
                if self.transport is not None:
                    self.transport.set_ttl(response.ip_ttl)
        if request is None:
            self.out.append(response.encode(keep_alive))
        else:
            self.out.append(response.encode(keep_alive, request.method == "HEAD"))
            self.done.append((request, response))
        if not keep_alive:
            self._flush()
            self.close()


class ProxiedConnection(Connection):
    """A connection from a balancer on a PROXY protocol listener: the header first, then HTTP."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # counted under the balancer's address until the header
        self.balancer = self.peer

    def data_received(self, data: bytes) -> None:
        self.activity += 1
        parser = self.parser
        if parser is None:
            parser = self.parser = RequestParser(self.limits.max_body)
        parser.feed(data)
        received = parser.data[parser.pos:] if parser.pos else parser.data
        try:
            parsed = proxy_protocol.parse(received)
        except proxy_protocol.ProxyProtocolError as error:
            self.table.proxy_refused += 1
            LOG.info("refusing a connection from balancer %s: %s", self.balancer, error)
            self._refuse(400, f"{error}; this listener expects the PROXY protocol (haproxy: send-proxy-v2)")
            return
        if parsed is None:
            return  # the header's deadline is the request's (head_timeout)
        length, origin = parsed
        self.__class__ = Connection  # from here on, HTTP
        if origin is not None:
            source, self.source_port = origin
            refused = self.table.move(self, source)
            if refused is not None:
                self.transport.write(refused)
                self.close()
                return
        parser.data, parser.pos = received[length:], 0
        if parser.data:
            self._process()

    def _refuse(self, status: int, message: str) -> None:
        self.closing = True
        transport = self.transport
        transport.write(text_error(status, message).encode(False))
        transport.close()


def _failure(error: Exception, request: Request) -> Response:
    """The answer when a handler raised: 503 with Retry-After for an error that says to retry
    (it has ``retry_after``: the registry is unavailable), else 500 and the traceback logged."""
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:
        return text_error(503, str(error), [("Retry-After", str(retry_after))])
    LOG.exception("handler failed for %s", request.path)
    return _INTERNAL_ERROR


_INTERNAL_ERROR = text_error(500, "internal error")
_REFUSED = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n" \
           b"Connection: close\r\nServer: cloudseed\r\n\r\n%s"


class ConnectionTable:
    """Every open connection: counts per source address, deadlines, shutdown."""

    def __init__(self, max_per_source: int = 64, max_connections: int = 10000, exempt: tuple = (),
                 clock: Clock = time.monotonic):
        self.max_per_source = max_per_source  # 0: no per-source cap
        self.max_connections = max_connections
        self.exempt = exempt  # ip_network objects (trusted proxies): no per-source cap
        self.clock = clock
        self.connections: set[Connection] = set()
        self.per_source: dict[str, int] = {}
        self.refused = 0
        self.expired = 0
        self.proxy_refused = 0  # PROXY protocol listeners: non-balancer clients and bad headers
        self._exempt_known = Networks(exempt)
        # connections held outside ``connections`` (fast_path.c, counted in ``per_source`` too):
        # its ``open``, ``sweep(now)`` and ``close_all()``
        self.elsewhere: Any = None

    def __len__(self) -> int:
        return len(self.connections) + (self.elsewhere.open if self.elsewhere is not None else 0)

    def refusal(self, peer: str) -> Optional[bytes]:
        """None to accept a new connection from ``peer``, else the answer to send before closing."""
        if len(self.connections) + (self.elsewhere.open if self.elsewhere is not None else 0) >= self.max_connections:
            reason = f"too many connections ({self.max_connections})"
        elif self.max_per_source and self.per_source.get(peer, 0) >= self.max_per_source \
                and not self._is_exempt(peer):
            reason = f"too many connections from {peer} (at most {self.max_per_source})"
        else:
            return None
        self.refused += 1
        body = f"{reason}; retry later\n".encode()
        return _REFUSED % (len(body), body)

    def add(self, connection: Connection) -> None:
        self.connections.add(connection)
        peer = connection.peer
        self.per_source[peer] = self.per_source.get(peer, 0) + 1

    def move(self, connection: Connection, peer: str) -> Optional[bytes]:
        """Count ``connection`` under ``peer`` from now on (a balancer named its client); None,
        or the answer to send before closing it when ``peer`` is over its cap."""
        if self.max_per_source and self.per_source.get(peer, 0) >= self.max_per_source \
                and not self._is_exempt(peer):
            self.refused += 1
            body = f"too many connections from {peer} (at most {self.max_per_source}); retry later\n".encode()
            return _REFUSED % (len(body), body)
        self.remove(connection)
        connection.peer = peer
        self.add(connection)
        return None

    def remove(self, connection: Connection) -> None:
        if connection in self.connections:
            self.connections.discard(connection)
            peer = connection.peer
            count = self.per_source.get(peer, 0) - 1
            if count > 0:
                self.per_source[peer] = count
            else:
                self.per_source.pop(peer, None)

    def sweep(self) -> None:
        """Close the connections past a deadline (called twice a second)."""
        now = self.clock()
        if self.elsewhere is not None:
            self.expired += self.elsewhere.sweep(now)
        for connection in list(self.connections):
            reason = connection.check(now)
            if reason is not None:
                self.expired += 1
                LOG.debug("closing connection from %s: %s", connection.peer, reason)
                connection.close()

    def busy(self) -> bool:
        return any(connection.busy for connection in self.connections)

    def close_all(self) -> None:
        if self.elsewhere is not None:
            self.elsewhere.close_all()
        for connection in list(self.connections):
            connection.close()

    def _is_exempt(self, peer: str) -> bool:
        return bool(self.exempt) and peer in self._exempt_known


class Networks:
    """Whether an address is in one of ``networks`` (ip_network objects), remembered per address
    (at most ``limit`` of them, so a scan of addresses cannot grow it without bound)."""

    def __init__(self, networks: tuple = (), limit: int = 10000):
        self.networks = tuple(networks)
        self.limit = limit
        self._known: dict[str, bool] = {}

    def __bool__(self) -> bool:
        return bool(self.networks)

    def __contains__(self, peer: object) -> bool:
        known = self._known.get(peer)  # type: ignore[call-overload]
        if known is None:
            try:
                address = ipaddress.ip_address(peer)  # type: ignore[arg-type]
                known = any(address in network for network in self.networks)
            except ValueError:
                known = False
            if len(self._known) < self.limit:
                self._known[peer] = known  # type: ignore[index]
        return known
