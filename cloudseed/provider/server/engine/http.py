"""The server's HTTP messages as the applications see them: ``Request``, ``Response``, ``Handler``.

The wire format is parsed in ``wire.py``, connections (keep-alive, pipelining, backpressure)
are run by ``connection.py`` over the sockets of ``transport.py``; the applications
(``metadata_app.py``, ``admin_app.py``) only take a Request and return a Response, or an
awaitable of one when they must wait (a registry read).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any, Awaitable, Callable, Optional, Union

REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
           411: "Length Required", 413: "Payload Too Large", 429: "Too Many Requests",
           431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
           503: "Service Unavailable", 505: "HTTP Version Not Supported"}
# (status, content type) -> a keep-alive head without extra headers up to Content-Length's value;
# most answers are such heads (every instance's first crawl encodes dozens): made once each
_HEAD_STARTS: dict[tuple[int, str], bytes] = {}
MAX_HEAD_STARTS = 64
_HEAD_END = b"\r\nServer: cloudseed\r\n\r\n"
# short 200 answers shared by every instance (``Response.shared``), started over when full
_SHARED: dict[tuple[Union[str, bytes], str], Response] = {}
MAX_SHARED = 4096
MAX_SHARED_BODY = 256  # characters or bytes


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
    def shared(cls, body: Union[bytes, str], content_type: str = "text/plain") -> Response:
        """The 200 answer ``body``: one Response for every caller when the body is short (many
        instances' answers are the same text: "default", "ami-...", a listing, ``{}``), so its
        encoding too is made once. Responses are never changed once made, so they may be shared."""
        key = (body, content_type)
        found = _SHARED.get(key)
        if found is None:
            found = cls(200, body, content_type)
            if len(body) <= MAX_SHARED_BODY:
                if len(_SHARED) >= MAX_SHARED:
                    _SHARED.clear()
                _SHARED[key] = found
        return found

    @classmethod
    def prebuilt(cls, status: int, body: bytes, content_type: str, head: bytes) -> Response:
        """A response whose keep-alive encoding is ``head + body`` (``head`` from an equal-length twin)."""
        response = cls(status, body, content_type)
        response._encoded = head + body
        return response

    def _head(self, keep_alive: bool) -> bytes:
        if keep_alive and not self.headers:  # the same bytes as below, from a start made once
            start = _HEAD_STARTS.get((self.status, self.content_type))
            if start is None:
                start = (f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Unknown')}\r\n"
                         f"Content-Type: {self.content_type}\r\nContent-Length: ").encode("latin-1")
                if len(_HEAD_STARTS) < MAX_HEAD_STARTS:
                    _HEAD_STARTS[(self.status, self.content_type)] = start
            return start + b"%d" % len(self.body) + _HEAD_END
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
    """One request. ``headers`` keys are lower case; ``path`` is percent-decoded.

    ``headers`` may be shared with other requests that had the very same head: read it, never
    change it.
    """

    __slots__ = ("method", "target", "path", "query", "version", "headers", "body", "peer", "listener",
                 "started", "instance_id", "client", "api", "connection")

    def __init__(self, method: str, target: str, version: str, headers: dict[str, str], body: bytes,
                 peer: str, listener: Any, path: str, query: str = "", connection: Any = None):
        self.method = method
        self.target = target
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
        self.api = ""  # the API that answered (routes.api_for), once routed (metrics)
        self.connection = connection  # the client connection (its peer_port() for Scaleway), when known


Handler = Callable[[Request], Union["Response", Awaitable["Response"]]]
