"""The agent's HTTP client (standard library only): bounded time, bounded size, same-host redirects.

Every request has a *total* deadline (a server that trickles one byte a second cannot hold the
boot: each socket operation only gets the time left), a response size limit, and refuses
redirects to another host. Errors are ``FetchError``s naming the URL. On top of ``request``:
``fetch`` retries transient failures with backoff inside a total budget, and ``first_answer``
asks several endpoints (IPv4 and IPv6) side by side and keeps the first good answer.
"""

from __future__ import annotations

import http.client
import logging
import queue
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from cloudseed.core.fetch_error import FetchError

LOG = logging.getLogger("cloudseed.http")
_TRACE = logging.DEBUG - 5   # cloudseed.agent.state.log.TRACE: every exchange, with status, size and time

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_REDIRECTS = 5
MAX_HEADER_BYTES = 64 * 1024
USER_AGENT = "cloudseed"
# how long first_answer still waits for another endpoint's success after one endpoint said no
REFUSAL_GRACE = 0.5


@dataclass
class Response:
    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        for key, value in self.headers.items():
            if key.lower() == "content-type":
                return value.split(";")[0].strip().lower()
        return ""


class _DeadlineSocket(socket.socket):
    """A socket whose every blocking call is bounded by the time left before a deadline."""

    deadline: float = 0.0
    url: str = ""

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("total deadline reached")
        self.settimeout(left)

    def recv_into(self, *args, **kwargs):  # type: ignore[override]
        self._arm()
        return super().recv_into(*args, **kwargs)

    def recv(self, *args, **kwargs):  # type: ignore[override]
        self._arm()
        return super().recv(*args, **kwargs)

    def sendall(self, *args, **kwargs):  # type: ignore[override]
        self._arm()
        return super().sendall(*args, **kwargs)


def _connect(host: str, port: int, deadline: float) -> socket.socket:
    """A connected ``_DeadlineSocket`` to ``host``; several addresses are tried in order."""
    last: Exception | None = None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise OSError(f"cannot resolve {host}: {e.strerror}") from None
    for family, socktype, proto, _name, address in infos:
        sock = _DeadlineSocket(family, socktype, proto)
        sock.deadline = deadline
        try:
            sock._arm()
            sock.connect(address)
            return sock
        except OSError as e:
            last = e
            sock.close()
    raise last or OSError(f"no address for {host}")


class _Connection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int | None, deadline: float):
        super().__init__(host, port)
        self._deadline = deadline

    def connect(self) -> None:
        self.sock = _connect(self.host, self.port, self._deadline)


class _TLSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int | None, deadline: float):
        super().__init__(host, port)
        self._deadline = deadline

    def connect(self) -> None:
        import ssl

        raw = _connect(self.host, self.port, self._deadline)
        context = ssl.create_default_context()
        self.sock = context.wrap_socket(raw, server_hostname=self.host)


def _describe(error: BaseException, timeout: float) -> str:
    if isinstance(error, (socket.timeout, TimeoutError)):
        return f"no complete answer within {timeout:g}s"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, http.client.HTTPException):
        return f"bad HTTP response ({type(error).__name__}: {error})"
    text = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return text


def _same_origin(a: urllib.parse.SplitResult, b: urllib.parse.SplitResult) -> bool:
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


def request(url: str, *, method: str = "GET", headers: Mapping[str, str] | None = None,
            data: bytes | None = None, timeout: float = 5.0,
            max_bytes: int = DEFAULT_MAX_BYTES) -> Response:
    """One HTTP exchange finished within ``timeout`` seconds in total (redirects included).

    FetchError on a network error, a non-2xx status, a redirect to another host, or a body
    larger than ``max_bytes`` (the rest is never read).
    """
    deadline = time.monotonic() + timeout
    all_headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **(headers or {})}
    current = url
    for _hop in range(MAX_REDIRECTS + 1):
        parts = urllib.parse.urlsplit(current)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise FetchError(url, f"unsupported URL {current!r}", permanent=True)
        cls = _TLSConnection if parts.scheme == "https" else _Connection
        port = parts.port or (443 if parts.scheme == "https" else 80)  # explicit: IPv6 literals
        conn = cls(parts.hostname, port, deadline)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            try:
                conn.request(method, path, body=data, headers=all_headers)
                resp = conn.getresponse()
                status = resp.status
                if status in (301, 302, 303, 307, 308):
                    location = resp.getheader("Location") or ""
                    target = urllib.parse.urljoin(current, location)
                    if not location or not _same_origin(parts, urllib.parse.urlsplit(target)):
                        raise FetchError(url, f"refused redirect to another host ({target or 'no Location'})",
                                         status, permanent=True)
                    current = target
                    if status == 303:
                        method, data = "GET", None
                    continue
                length = resp.getheader("Content-Length")
                if length and length.isdigit() and int(length) > max_bytes:
                    raise FetchError(url, f"response of {length} bytes is larger than the limit "
                                          f"of {max_bytes}", status, permanent=True)
                body = _read_body(url, resp, max_bytes, status)
            except FetchError:
                raise
            except (OSError, http.client.HTTPException, ValueError) as e:
                raise FetchError(url, _describe(e, timeout)) from None
        finally:
            conn.close()
        LOG.log(_TRACE, "%s %s -> %d (%d bytes, %.3fs)", method, current, status, len(body),
                timeout - (deadline - time.monotonic()))
        if not 200 <= status < 300:
            permanent = 400 <= status < 500 and status not in (408, 429)
            reason = (resp.reason or "").strip()
            raise FetchError(url, f"HTTP {status} {reason}".rstrip(), status, permanent=permanent,
                             headers=dict(resp.getheaders()), body=body[:1024])
        return Response(current, status, dict(resp.getheaders()), body)
    raise FetchError(url, f"more than {MAX_REDIRECTS} redirects", permanent=True)


def _read_body(url: str, resp: http.client.HTTPResponse, max_bytes: int, status: int) -> bytes:
    chunks, size = [], 0
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
        if not chunk:
            break
        size += len(chunk)
        if size > max_bytes:
            raise FetchError(url, f"response larger than the limit of {max_bytes} bytes", status,
                             permanent=True)
        chunks.append(chunk)
    length = resp.getheader("Content-Length")
    if length and length.isdigit() and size < int(length):
        raise FetchError(url, f"the connection closed after {size} of {length} bytes", status)
    return b"".join(chunks)


def fetch(url: str, *, timeout: float = 5.0, retries: int = 2, backoff: float = 0.5,
          headers: Mapping[str, str] | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
          retry_on_404: bool = False, max_wait: float | None = None) -> bytes:
    """GET ``url``'s body, retrying transient failures (5xx, 429, network errors) with backoff.

    ``max_wait`` bounds the whole call (all attempts and pauses); ``file://`` URLs and paths are
    read from disk with the same size limit; ``ftp://`` and ``ftps://`` go through ``core/ftp.py``
    (one attempt, bounded the same way).
    """
    if url.startswith("file://") or url.startswith("/"):
        return _read_file(url, max_bytes)
    if url.startswith(("ftp://", "ftps://")):
        from cloudseed.core.ftp import fetch_ftp

        return fetch_ftp(url, timeout=timeout, max_bytes=max_bytes, max_wait=max_wait)
    return fetch_response(url, timeout=timeout, retries=retries, backoff=backoff, headers=headers,
                          max_bytes=max_bytes, retry_on_404=retry_on_404, max_wait=max_wait).body


def fetch_response(url: str, *, method: str = "GET", timeout: float = 5.0, retries: int = 2,
                   backoff: float = 0.5, headers: Mapping[str, str] | None = None,
                   data: bytes | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                   retry_on_404: bool = False, max_wait: float | None = None) -> Response:
    """Like ``fetch`` but the whole ``Response`` (status, headers)."""
    budget_end = time.monotonic() + (max_wait if max_wait is not None else (timeout + backoff) * (retries + 1) * 2)
    attempt = 0
    while True:
        left = budget_end - time.monotonic()
        try:
            return request(url, method=method, headers=headers, data=data,
                           timeout=max(0.05, min(timeout, left)), max_bytes=max_bytes)
        except FetchError as e:
            transient = not e.permanent or (e.status == 404 and retry_on_404)
            pause = backoff * (2 ** attempt)
            if attempt >= retries or not transient or time.monotonic() + pause >= budget_end:
                LOG.log(logging.DEBUG if e.status == 404 else logging.WARNING, "%s", e)
                raise
            LOG.info("%s; retrying in %.2gs (attempt %d of %d)", e, pause, attempt + 2, retries + 1)
            time.sleep(pause)
            attempt += 1


def _read_file(url: str, max_bytes: int) -> bytes:
    path = urllib.parse.urlsplit(url).path if url.startswith("file://") else url
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise FetchError(url, e.strerror or str(e)) from None
    if len(data) > max_bytes:
        raise FetchError(url, f"file larger than the limit of {max_bytes} bytes", permanent=True)
    return data


def first_answer(urls: Sequence[str], *, method: str = "GET", headers: Mapping[str, str] | None = None,
                 headers_for: Callable[[str], Mapping[str, str]] | None = None,
                 timeout: float = 2.0, max_wait: float = 2.0, backoff: float = 0.25,
                 max_bytes: int = 1024 * 1024,
                 accept: Callable[[FetchError], bool] | None = None) -> tuple[str, Response | FetchError] | None:
    """Ask every URL side by side (e.g. the IPv4 and the IPv6 endpoint); the first answer wins.

    Each endpoint is retried with backoff while it fails transiently, until ``max_wait``.
    Returns ``(url, response)`` for the first success, or ``(url, error)`` for the first error
    ``accept`` declares final (an HTTP 403 meaning "disabled" is an answer too) when no other
    endpoint succeeds within ``REFUSAL_GRACE`` seconds after it; None when no endpoint answered.
    Losing attempts are abandoned (bounded by their own deadline).
    """
    if not urls:
        return None
    end = time.monotonic() + max_wait
    answers: queue.Queue = queue.Queue()
    stop = threading.Event()

    def worker(url: str) -> None:
        try:
            attempt = 0
            extra = dict(headers or {})
            while not stop.is_set():
                left = end - time.monotonic()
                if left <= 0:
                    return
                try:
                    if headers_for is not None:
                        extra.update(headers_for(url))
                    resp = request(url, method=method, headers=extra, timeout=min(timeout, left),
                                   max_bytes=max_bytes)
                    answers.put((url, resp))
                    return
                except FetchError as e:
                    if accept is not None and accept(e):
                        answers.put((url, e))
                        return
                    LOG.debug("%s (still waiting)", e)
                    if e.permanent:
                        return
                pause = min(backoff * (2 ** attempt), 1.0)
                attempt += 1
                if stop.wait(min(pause, max(0.0, end - time.monotonic()))):
                    return
        finally:
            answers.put(None)  # this endpoint is done

    threads = [threading.Thread(target=worker, args=(u,), daemon=True, name=f"http-race {u}") for u in urls]
    for thread in threads:
        thread.start()
    running = len(threads)
    refusal = None  # a final error: returned only when no endpoint succeeds within the grace time
    refusal_deadline = end
    try:
        while running:
            limit = end if refusal is None else min(end, refusal_deadline)
            left = limit - time.monotonic()
            if left <= 0:
                break
            try:
                item = answers.get(timeout=left)
            except queue.Empty:
                break
            if item is None:
                running -= 1
            elif isinstance(item[1], FetchError):
                if refusal is None:
                    refusal, refusal_deadline = item, time.monotonic() + REFUSAL_GRACE
            else:
                return item
        return refusal
    finally:
        stop.set()
