"""HTTP/1.1 request framing and parsing, bytes in and parsed requests out, with no I/O.

llhttp (Node.js's parser, through ``httptools``) checks and parses every request head; this
module frames requests around it (a head ends at the first blank line, a body is exactly
``Content-Length`` bytes), enforces the limits, and turns what llhttp reports into a ``Head``.
Pure: the same head bytes always give the same ``Head``, so a head seen before (clients repeat
theirs) is looked up instead of parsed again, which changes nothing but the cost.

    parser = RequestParser(max_body=65536)
    parser.feed(data)
    while (item := parser.next()) is not None:   # WireError for a malformed request
        head, body = item

Refused (``WireError`` with the status to answer, after which the connection is closed): heads
over ``MAX_HEAD`` bytes (431), bodies over ``max_body`` (413, after reading up to
``MAX_DISCARD`` bytes of it away so the client sees the answer), chunked bodies (411), HTTP
versions other than 1.0 and 1.1 (505), targets not starting with ``/``, and anything llhttp
refuses (400, naming the problem).
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import unquote

from httptools import HttpParserError, HttpParserUpgrade, HttpRequestParser  # missing: the CLI says one line

MAX_HEAD = 16 * 1024
MAX_DISCARD = 64 * 1024 * 1024
MAX_CACHED_HEADS = 8192
MAX_CACHED_HEAD = 1024


class WireError(Exception):
    """A request that cannot be served; ``status`` is the HTTP status to answer before closing."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Head:
    """A parsed request head. ``headers``: names in lower case, repeated ones joined with ", ";
    ``path`` is percent-decoded. Shared by every request with the very same head bytes: read it,
    never change it."""

    __slots__ = ("method", "target", "version", "headers", "path", "query", "length", "keep_alive")

    def __init__(self, method: str, target: str, version: str, headers: dict[str, str], length: int,
                 keep_alive: bool):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        path, _, self.query = target.partition("?")
        self.path = unquote(path) if "%" in path else path
        self.length = length  # of the body
        self.keep_alive = keep_alive


# Parsed heads by their bytes (bounded; emptied when full). Only heads of requests without a
# body: they leave llhttp where it was, between two requests.
_HEADS: dict[bytes, Head] = {}


def parsed_head(raw: bytes) -> Optional[Head]:
    """The ``Head`` that ``raw`` parsed to, if ``raw`` is exactly one bodiless request head parsed
    before (and still remembered); else None."""
    return _HEADS.get(raw)


class _Collector:
    """llhttp's callbacks for one head: what it reported, in the order it reported it."""

    __slots__ = ("parser", "url", "headers", "keep_alive", "complete", "messages")

    def __init__(self) -> None:
        self.parser: Optional[HttpRequestParser] = None
        self.url = b""
        self.headers: dict[str, str] = {}
        self.keep_alive = False
        self.complete = False
        self.messages = 0

    def on_message_begin(self) -> None:
        self.messages += 1
        self.url = b""
        self.headers = {}
        self.complete = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        self.keep_alive = self.parser.should_keep_alive()  # only known here: llhttp resets it after

    def on_message_complete(self) -> None:
        self.complete = True


class RequestParser:
    """The requests of one connection, in order. ``feed`` bytes, then ``next`` until None."""

    __slots__ = ("data", "pos", "max_body", "_llhttp", "_collector", "_discard", "stopped", "_scanned")

    def __init__(self, max_body: int):
        self.data = b""  # received bytes; those before ``pos`` are already returned as requests
        self.pos = 0
        self.max_body = max_body
        self._llhttp: Optional[HttpRequestParser] = None  # made at the first head not seen before
        self._collector: Optional[_Collector] = None  # with it
        self._discard = 0  # bytes of an oversized body still to read away before answering 413
        self.stopped: Optional[WireError] = None  # raised once ``_discard`` is 0, and ever after
        self._scanned = 0  # where to go on looking for the end of the head

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as a request."""
        return len(self.data) - self.pos

    def feed(self, data: bytes) -> None:
        if self._discard:
            taken = min(len(data), self._discard)
            self._discard -= taken
            data = data[taken:]
            if not data:
                return
        if self.pos == len(self.data):  # the usual case: everything before was a whole request
            self.data, self.pos = data, 0
        else:  # one copy per read, never one per request
            self.data, self.pos = self.data[self.pos:] + data, 0

    def next(self) -> Optional[tuple[Head, bytes]]:
        """The next complete request (head, body), None until more bytes come, or WireError
        (then again on every later call: the connection must be closed)."""
        if self.stopped is not None:
            if self._discard:
                return None
            raise self.stopped
        data, pos = self.data, self.pos
        size = len(data)
        if pos == size:
            return None
        if pos == 0 and size <= MAX_CACHED_HEAD:  # one read holding exactly one head seen before:
            head = _HEADS.get(data)  # it frames as that head, so no need to look for its end
            if head is not None:
                self.pos = size
                self._scanned = 0  # the next head is looked for from its own start
                return head, b""
        end = data.find(b"\r\n\r\n", pos + self._scanned, pos + MAX_HEAD + 4)
        if end < 0:
            if size - pos > MAX_HEAD:
                return self._fail(431, f"request head larger than {MAX_HEAD} bytes")
            if data.find(b"\n\n", pos + self._scanned) >= 0:
                return self._fail(400, "malformed request head: lines must end with CRLF")
            self._scanned = max(0, size - pos - 3)  # a head arriving byte by byte is scanned once
            return None
        self._scanned = 0
        body_start = end + 4
        raw = data if pos == 0 and body_start == size else data[pos:body_start]
        head = _HEADS.get(raw)
        if head is not None:
            self.pos = body_start
            return head, b""
        head = self._parse(raw)
        if head.length == 0:
            self.pos = body_start
            if body_start - pos <= MAX_CACHED_HEAD:
                if len(_HEADS) >= MAX_CACHED_HEADS:
                    _HEADS.clear()
                _HEADS[raw] = head
            return head, b""
        if head.length > self.max_body:
            message = f"request body of {head.length} bytes exceeds the limit of {self.max_body}"
            unread = body_start + head.length - size
            if 0 < unread <= MAX_DISCARD:  # read the body away, so the client reads our answer
                self.data, self.pos = b"", 0
                self._discard = unread
                self.stopped = WireError(413, message)
                return None
            return self._fail(413, message)
        if size < body_start + head.length:
            return None  # the head is parsed again once the whole body is here
        self.pos = body_start + head.length
        return head, data[body_start:self.pos]

    def _parse(self, raw: bytes) -> Head:
        llhttp, collector = self._llhttp, self._collector
        if collector is None:
            collector = self._collector = _Collector()
        if llhttp is None:
            llhttp = self._llhttp = collector.parser = HttpRequestParser(collector)
        collector.messages = 0
        if raw.find(b"\n\n") >= 0:  # as when the head is not complete yet (``next``)
            self._fail(400, "malformed request head: lines must end with CRLF")
        upgrade = False
        line_end = raw.find(b"\r\n") + 2  # fed apart, so that an error names the part at fault
        try:
            llhttp.feed_data(raw[:line_end])
        except HttpParserError as error:
            line = raw[:line_end - 2].decode("latin-1")
            self._fail(400, f"malformed request line {line[:80]!r}: {error}")
        try:
            llhttp.feed_data(raw[line_end:])
        except HttpParserUpgrade:  # complete; "Upgrade" is ignored, and the connection closed after
            upgrade = True
        except HttpParserError as error:
            self._fail(400, f"malformed header line: {error}")
        if collector.messages != 1:
            self._fail(400, "malformed request head")
        version = llhttp.get_http_version()
        if version not in ("1.1", "1.0"):
            self._fail(505, f"HTTP/{version} is not supported; use HTTP/1.1")
        target = collector.url.decode("latin-1")
        if target[:1] != "/":
            self._fail(400, f"request target {target[:80]!r} must start with /")
        headers = collector.headers
        if "transfer-encoding" in headers:
            self._fail(411, "chunked request bodies are not supported; send Content-Length")
        raw_length = headers.get("content-length")
        length = int(raw_length) if raw_length else 0  # llhttp checked it is digits, and only one
        if length == 0 and not collector.complete:
            self._fail(400, "malformed request head")
        if length or upgrade or not collector.keep_alive:
            # it waits for the body, or holds the connection as closed: a new one parses the next
            # head, so a head is judged the same whether the one before came from _HEADS or not
            self._llhttp = None
        return Head(llhttp.get_method().decode("ascii"), target, f"HTTP/{version}", headers, length,
                    collector.keep_alive and not upgrade)

    def _fail(self, status: int, message: str) -> WireError:
        self.stopped = WireError(status, message)
        raise self.stopped
