"""The agent's HTTP client (standard library only): bounded time, bounded size, same-host redirects.

Every request has a timeout and a response size limit; a redirect to another host is refused;
errors name the URL. ``fetch`` retries with backoff inside a total time budget.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Mapping

LOG = logging.getLogger("cloudseed.http")

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
USER_AGENT = "cloudseed"


class FetchError(Exception):
    """A URL could not be fetched; ``status`` is the HTTP status when there was one."""

    def __init__(self, url: str, reason: str, status: int | None = None):
        self.url = url
        self.status = status
        super().__init__(f"{url}: {reason}")


@dataclass
class Response:
    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401 - urllib hook
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.scheme, old.hostname, old.port) != (new.scheme, new.hostname, new.port):
            raise FetchError(req.full_url, f"refused redirect to another host ({newurl})", code)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameHostRedirects())


def request(url: str, *, method: str = "GET", headers: Mapping[str, str] | None = None,
            data: bytes | None = None, timeout: float = 5.0,
            max_bytes: int = DEFAULT_MAX_BYTES) -> Response:
    """One HTTP request; FetchError on a network error, a non-2xx status or an oversized body."""
    all_headers = {"User-Agent": USER_AGENT, **(headers or {})}
    req = urllib.request.Request(url, data=data, headers=all_headers, method=method)
    deadline = time.monotonic() + timeout
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            chunks, size = [], 0
            while True:
                if time.monotonic() > deadline:
                    raise FetchError(url, f"response too slow (over {timeout:g}s)")
                chunk = resp.read(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(url, f"response larger than {max_bytes} bytes")
                chunks.append(chunk)
            return Response(url, resp.status, dict(resp.headers.items()), b"".join(chunks))
    except urllib.error.HTTPError as e:
        raise FetchError(url, f"HTTP {e.code} {e.reason}", e.code) from None
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, FetchError):
            raise reason from None
        raise FetchError(url, str(reason)) from None
    except (OSError, ValueError) as e:
        raise FetchError(url, str(e) or type(e).__name__) from None


def fetch(url: str, *, timeout: float = 5.0, retries: int = 2, backoff: float = 0.5,
          headers: Mapping[str, str] | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
          retry_on_404: bool = False) -> bytes:
    """GET ``url``'s body, retrying transient failures (5xx, network errors) with backoff."""
    if url.startswith("file://") or url.startswith("/"):
        path = urllib.parse.urlsplit(url).path if url.startswith("file://") else url
        try:
            with open(path, "rb") as f:
                return f.read(max_bytes + 1)[: max_bytes + 1]
        except OSError as e:
            raise FetchError(url, e.strerror or str(e)) from None
    attempt = 0
    while True:
        try:
            return request(url, timeout=timeout, headers=headers, max_bytes=max_bytes).body
        except FetchError as e:
            transient = e.status is None or e.status >= 500 or e.status == 429 or (
                e.status == 404 and retry_on_404)
            if attempt >= retries or not transient or "redirect" in str(e) or "larger" in str(e):
                raise
            LOG.info("retrying after %s", e)
            time.sleep(backoff * (2 ** attempt))
            attempt += 1
