"""A minimal, fast HTTP/1.1 server on asyncio protocols: keep-alive, pipelining, strict limits.

Only what metadata clients need: request line, headers, a Content-Length body (no chunked
request bodies), HTTP/1.0 and 1.1 keep-alive rules. A handler returns a ``Response`` (fast path,
no task created) or an awaitable of one; responses on one connection go out in request order.
Malformed requests get a 400 naming the problem and the connection is closed.
"""

from __future__ import annotations

import asyncio
import select
import socket
from time import monotonic, perf_counter
from typing import Any, Awaitable, Callable, Optional, Union
from urllib.parse import unquote

MAX_HEAD = 16 * 1024
MAX_DISCARD = 64 * 1024 * 1024
IDLE_TIMEOUT = 60.0

REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
           411: "Length Required", 413: "Payload Too Large", 429: "Too Many Requests",
           431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
           503: "Service Unavailable", 505: "HTTP Version Not Supported"}


class Response:
    """Status, headers and body; the encoded head is computed once and may be cached."""

    __slots__ = ("status", "body", "content_type", "headers", "_encoded", "ip_ttl")

    def __init__(self, status: int, body: Union[bytes, str] = b"", content_type: str = "text/plain",
                 headers: Optional[list[tuple[str, str]]] = None, ip_ttl: Optional[int] = None):
        self.status = status
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.content_type = content_type
        self.headers = headers or []
        self._encoded: Optional[bytes] = None
        self.ip_ttl = ip_ttl  # set the reply socket's IP TTL first (IMDSv2 hop limit)

    def encode(self, keep_alive: bool, head_only: bool = False) -> bytes:
        if keep_alive and not head_only:
            encoded = self._encoded
            if encoded is None:
                encoded = self._encoded = self._head(True) + self.body
            return encoded
        head = self._head(keep_alive)
        return head if head_only else head + self.body

    def keep_alive_head(self) -> bytes:
        """The head of this response on a keep-alive connection (for responses built around it)."""
        return self._head(True)

    @classmethod
    def prebuilt(cls, status: int, body: bytes, content_type: str, head: bytes) -> Response:
        """A response whose keep-alive encoding is ``head + body`` (``head`` from an equal-length twin)."""
        response = cls(status, body, content_type)
        response._encoded = head + body
        return response

    def _head(self, keep_alive: bool) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Unknown')}",
                 f"Content-Type: {self.content_type}", f"Content-Length: {len(self.body)}",
                 "Server: cloudseed"]
        lines.extend(f"{name}: {value}" for name, value in self.headers)
        if not keep_alive:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def text_error(status: int, message: str, headers: Optional[list[tuple[str, str]]] = None) -> Response:
    return Response(status, message.rstrip("\n") + "\n", headers=headers)


class Request:
    """One parsed request. ``headers`` keys are lower case; ``path`` is percent-decoded.

    ``headers`` may be shared with other requests that had the very same head: read it, never
    change it.
    """

    __slots__ = ("method", "target", "path", "query", "version", "headers", "body", "peer", "listener",
                 "started", "instance_id", "client")

    def __init__(self, method: str, target: str, version: str, headers: dict[str, str], body: bytes,
                 peer: str, listener: Any, path: Optional[str] = None, query: str = ""):
        self.method = method
        self.target = target
        if path is None:
            path, _, query = target.partition("?")
            path = unquote(path) if "%" in path else path
        self.path = path
        self.query = query
        self.version = version
        self.headers = headers
        self.body = body
        self.peer = peer
        self.listener = listener
        self.started = perf_counter()
        self.instance_id = ""  # who asked, once identified (access log)
        self.client = peer  # the instance's address (X-Forwarded-For from a trusted proxy)


# Parsed request heads by their bytes: clients repeat the same few heads (cloud-init's crawl, a
# load generator), so a repeat costs a dict lookup instead of a parse. Bounded; emptied when full.
_HEADS: dict[bytes, tuple] = {}
MAX_CACHED_HEADS = 8192
MAX_CACHED_HEAD = 1024


def parse_head(head: bytes) -> tuple:
    """``head`` (up to and with the blank line) as (method, target, version, headers, path, query,
    has_body_headers, keep_alive), or BadRequest."""
    lines = head[:-4].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(400, f"malformed request line {lines[0][:80]!r}")
    method, target, version = parts
    if target[:1] != "/":
        raise BadRequest(400, f"request target {target[:80]!r} must start with /")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(400, f"malformed header line {line[:80]!r}")
        name = name.lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    path, _, query = target.partition("?")
    path = unquote(path) if "%" in path else path
    connection = headers.get("connection")
    if connection is None:
        keep_alive = version != "HTTP/1.0"
    else:
        connection = connection.lower()
        keep_alive = "keep-alive" in connection if version == "HTTP/1.0" else "close" not in connection
    return (method, target, version, headers, path, query,
            "content-length" in headers or "transfer-encoding" in headers, keep_alive)


Handler = Callable[[Request], Union[Response, Awaitable[Response]]]


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class HTTPProtocol(asyncio.Protocol):
    """One client connection.

    Responses to the requests of one ``data_received`` (pipelining) are written together, with
    one ``write``; ``on_response`` (metrics, access log) runs after that write.
    """

    def __init__(self, handler: Handler, listener: Any, connections: set, max_body: int):
        self.handler = handler
        self.listener = listener
        self.on_response = listener.on_response
        self.connections = connections
        self.max_body = max_body
        self.transport: Optional[asyncio.Transport] = None
        self.buffer = bytearray()
        self.peer = ""
        self.busy = False  # a handler task is running; hold further requests
        self.closing = False
        self.last_active = monotonic()
        self.discard_remaining = 0  # bytes of an oversized body still to swallow before answering 413
        self.discard_reply: Optional[Response] = None
        self.out: list[bytes] = []  # encoded responses not yet written
        self.done: list[tuple[Request, Response]] = []  # their requests, for on_response after the write
        self.keep_alive = True  # of the request last parsed

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else ""
        if self.peer.startswith("::ffff:"):
            self.peer = self.peer[7:]
        self.connections.add(self)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.connections.discard(self)
        self.closing = True

    def data_received(self, data: bytes) -> None:
        self.last_active = monotonic()
        if not self.buffer and not self.busy and not self.discard_remaining:
            # the usual case: exactly one whole request without a body, its head seen before
            parsed = _HEADS.get(data)
            if parsed is not None and not parsed[6] and parsed[7] and not self.closing:
                request = Request(parsed[0], parsed[1], parsed[2], parsed[3], b"", self.peer, self.listener,
                                  parsed[4], parsed[5])
                try:
                    result = self.handler(request)
                except Exception:  # a handler bug must not kill the connection loop silently
                    import logging

                    logging.getLogger("cloudseed.server").exception("handler failed for %s", request.path)
                    result = text_error(500, "internal error")
                if result.__class__ is Response and result.ip_ttl is None:  # type: ignore[union-attr]
                    if request.method == "HEAD":
                        self.transport.write(result.encode(True, True))  # type: ignore[union-attr]
                    else:
                        encoded = result._encoded  # type: ignore[union-attr]
                        self.transport.write(encoded if encoded is not None  # type: ignore[union-attr]
                                             else result.encode(True))  # type: ignore[union-attr]
                    if self.on_response is not None:
                        self.on_response(request, result)  # type: ignore[arg-type]
                elif result.__class__ is Response:
                    self._send(result, request, True)  # type: ignore[arg-type]
                    self._flush()
                else:
                    self.busy = True
                    task = asyncio.ensure_future(result)  # type: ignore[arg-type]
                    task.add_done_callback(lambda t, r=request: self._finished(t, r, True))
                return
        if self.discard_remaining:
            self.discard_remaining -= min(len(data), self.discard_remaining)
            if not self.discard_remaining and self.discard_reply is not None:
                self._send(self.discard_reply, None, keep_alive=False)
            return
        self.buffer += data
        if not self.busy:
            self._process()

    def idle_for(self, now: float) -> float:
        return 0.0 if self.busy else now - self.last_active

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def _process(self) -> None:
        try:
            while self.buffer and not self.closing:
                try:
                    request = self._parse()
                except BadRequest as error:
                    self._send(text_error(error.status, f"bad request: {error}"), None, keep_alive=False)
                    return
                if request is None:
                    return
                keep_alive = self.keep_alive
                try:
                    result = self.handler(request)
                except Exception:  # a handler bug must not kill the connection loop silently
                    import logging

                    logging.getLogger("cloudseed.server").exception("handler failed for %s", request.path)
                    result = text_error(500, "internal error")
                if result.__class__ is Response:
                    self._send(result, request, keep_alive)  # type: ignore[arg-type]
                else:
                    self.busy = True
                    task = asyncio.ensure_future(result)  # type: ignore[arg-type]
                    task.add_done_callback(lambda t, r=request, k=keep_alive: self._finished(t, r, k))
                    return
        finally:
            if self.out:
                self._flush()

    def _finished(self, task: asyncio.Future, request: Request, keep_alive: bool) -> None:
        self.busy = False
        try:
            response = task.result()
        except Exception:
            import logging

            logging.getLogger("cloudseed.server").exception("handler failed for %s", request.path)
            response = text_error(500, "internal error")
        self._send(response, request, keep_alive)
        self._process()

    def _flush(self) -> None:
        out = self.out
        transport = self.transport
        if transport is not None and not transport.is_closing():
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
            if self.out:
                self._flush()  # earlier responses leave with the old TTL
            self._set_ttl(response.ip_ttl)
        if request is None:
            self.out.append(response.encode(keep_alive))
        else:
            self.out.append(response.encode(keep_alive, request.method == "HEAD"))
            self.done.append((request, response))
        if not keep_alive:
            self._flush()
            self.closing = True
            if self.transport is not None:
                self.transport.close()

    def _set_ttl(self, ttl: int) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                if sock.family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, ttl)
                else:
                    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
            except OSError:
                pass

    def _parse(self) -> Optional[Request]:
        buffer = self.buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > MAX_HEAD:
                raise BadRequest(431, f"request head larger than {MAX_HEAD} bytes")
            return None
        if end > MAX_HEAD:
            raise BadRequest(431, f"request head larger than {MAX_HEAD} bytes")
        body_start = end + 4
        head = bytes(buffer[:body_start])
        parsed = _HEADS.get(head)
        if parsed is None:
            parsed = parse_head(head)
            if end <= MAX_CACHED_HEAD:
                if len(_HEADS) >= MAX_CACHED_HEADS:
                    _HEADS.clear()
                _HEADS[head] = parsed
        method, target, version, headers, path, query, has_body, self.keep_alive = parsed
        if not has_body:  # most requests
            if len(buffer) == body_start:
                buffer.clear()
            else:
                del buffer[:body_start]
            return Request(method, target, version, headers, b"", self.peer, self.listener, path, query)
        length = 0
        if "transfer-encoding" in headers:
            raise BadRequest(411, "chunked request bodies are not supported; send Content-Length")
        raw = headers["content-length"]
        if not raw.isdigit():
            raise BadRequest(400, f"Content-Length {raw[:20]!r} is not a number")
        length = int(raw)
        if length > self.max_body:
            message = f"request body of {length} bytes exceeds the limit of {self.max_body}"
            unread = body_start + length - len(buffer)
            if 0 < unread <= MAX_DISCARD:  # read the body away so the client sees our answer
                buffer.clear()
                self.discard_remaining = unread
                self.discard_reply = text_error(413, f"bad request: {message}")
                return None
            raise BadRequest(413, message)
        if len(buffer) < body_start + length:
            return None
        body = bytes(buffer[body_start:body_start + length])
        del buffer[:body_start + length]
        return Request(method, target, version, headers, body, self.peer, self.listener, path, query)


class Poller:
    """One epoll set for every client connection, itself watched by the asyncio loop.

    asyncio's ``add_reader`` costs a selector key and a handle per registration and a handle
    run per ready socket; here registering is one ``epoll.register`` and a loop iteration reads
    every ready connection in one callback. Level-triggered, like asyncio's selector.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.epoll = select.epoll()
        self.transports: dict[int, SocketTransport] = {}
        loop.add_reader(self.epoll.fileno(), self._ready)

    def close(self) -> None:
        """Drop every connection still open and the epoll set itself."""
        for transport in list(self.transports.values()):
            transport.abort()
        if self.epoll.fileno() >= 0:
            self.loop.remove_reader(self.epoll.fileno())
            self.epoll.close()

    def add(self, transport: SocketTransport) -> None:
        self.transports[transport.fd] = transport
        self.epoll.register(transport.fd, select.EPOLLIN)

    def watch(self, transport: SocketTransport, read: bool, write: bool) -> None:
        self.epoll.modify(transport.fd, (select.EPOLLIN if read else 0) | (select.EPOLLOUT if write else 0))

    def remove(self, transport: SocketTransport) -> None:
        if self.transports.pop(transport.fd, None) is not None:
            try:
                self.epoll.unregister(transport.fd)
            except OSError:
                pass

    def _ready(self) -> None:
        transports = self.transports
        for fd, events in self.epoll.poll(0, 512):
            transport = transports.get(fd)
            if transport is None:
                continue
            try:
                if events & _READ_EVENTS and not transport.closing:
                    transport._read_ready()
                if events & _WRITE_EVENTS and transport.pending and not transport.closed:
                    transport._write_ready()
            except Exception:  # one connection's failure must not stop the others
                import logging

                logging.getLogger("cloudseed.server").exception("connection handling failed")
                transport.abort()


_READ_EVENTS = select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR | select.EPOLLRDHUP
_WRITE_EVENTS = select.EPOLLOUT | select.EPOLLHUP | select.EPOLLERR


class SocketTransport:
    """The part of an asyncio transport HTTPProtocol uses, straight on a non-blocking socket.

    asyncio's own accept path costs a Task, a Future and several callbacks per connection and
    its transport several layers per read; a boot storm opens a connection per request, so this
    reads when the Poller says so and writes with ``send`` (waiting for EPOLLOUT only when the
    socket's buffer is full). ``connection_lost`` is called once, after the socket is closed.
    """

    __slots__ = ("sock", "fd", "poller", "protocol", "peer", "pending", "closing", "closed")

    def __init__(self, poller: Poller, sock: socket.socket, peer: Any):
        self.poller = poller
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.protocol: Any = None
        self.pending = bytearray()  # unsent output (the socket's buffer was full)
        self.closing = False  # no more reads or writes; close once ``pending`` is sent
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self.peer
        if name == "socket":
            return self.sock
        if name == "sockname":
            return self.sock.getsockname()
        return default

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        if self.closing:
            return
        if self.pending:
            self.pending += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as error:
            self._lost(error)
            return
        if sent < len(data):
            self.pending += memoryview(data)[sent:]
            self.poller.watch(self, True, True)

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        if self.pending:
            self.poller.watch(self, False, True)  # stop reading; finish writing, then close
        else:
            self._lost(None)

    def abort(self) -> None:
        self.closing = True
        self._lost(None)

    def _read_ready(self) -> None:
        try:
            data = self.sock.recv(65536)
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
            sent = self.sock.send(self.pending)
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
                self.poller.watch(self, True, False)

    def _lost(self, error: Optional[Exception]) -> None:
        if self.closed:
            return
        self.closed = self.closing = True
        self.poller.remove(self)
        self.pending.clear()
        self.sock.close()
        self.protocol.connection_lost(error)


class SocketServer:
    """A listening socket whose connections get a SocketTransport and a protocol from ``factory``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, factory: Callable[[], Any]):
        self.loop = loop
        self.poller = Poller(loop)  # one per listener
        self.sockets = [sock]
        self.factory = factory
        loop.add_reader(sock.fileno(), self._accept_ready)

    def close(self) -> None:
        """Stop accepting; open connections go on until ``release``."""
        for sock in self.sockets:
            if sock.fileno() >= 0:
                self.loop.remove_reader(sock.fileno())
                sock.close()

    def release(self) -> None:
        self.close()
        self.poller.close()

    def _accept_ready(self) -> None:
        sock = self.sockets[0]
        poller = self.poller
        for _ in range(256):
            try:
                conn, peer = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as error:  # out of file descriptors, ...: pause accepting for a second
                import logging

                logging.getLogger("cloudseed.server").error("accept failed: %s; pausing for 1s", error)
                self.loop.remove_reader(sock.fileno())
                self.loop.call_later(1.0, self._resume)
                return
            conn.setblocking(False)
            try:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            transport = SocketTransport(poller, conn, peer)
            protocol = transport.protocol = self.factory()
            poller.add(transport)
            protocol.connection_made(transport)

    def _resume(self) -> None:
        sock = self.sockets[0]
        if sock.fileno() >= 0:
            self.loop.add_reader(sock.fileno(), self._accept_ready)


class Listener:
    """A bound socket plus what the application needs to know about it (its network)."""

    def __init__(self, host: str, port: int, network: Optional[str], kind: str = "metadata"):
        self.host = host
        self.port = port
        self.network = network
        self.kind = kind
        self.server: Optional[SocketServer] = None
        self.on_response: Optional[Callable[[Request, Response], None]] = None

    def __repr__(self) -> str:
        suffix = f"={self.network}" if self.network else ""
        return f"{self.kind} {self.host}:{self.port}{suffix}"


def listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A non-blocking TCP socket bound to ``host:port`` (an IP address) and listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(4096)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def start_listener(listener: Listener, handler: Handler, connections: set, max_body: int,
                         reuse_port: bool = False) -> None:
    loop = asyncio.get_running_loop()
    sock = listening_socket(listener.host, listener.port, reuse_port)
    listener.server = SocketServer(loop, sock, lambda: HTTPProtocol(handler, listener, connections, max_body))
    if listener.port == 0:
        listener.port = sock.getsockname()[1]
