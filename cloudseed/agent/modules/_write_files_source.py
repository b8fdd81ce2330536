"""write_files ``source`` (cloud-init 24.3): an entry's content loaded from a URI.

``source: {uri, headers}``: ``http(s)://`` through the agent's one HTTP client (``core/http.py``:
a total deadline, three tries, at most the entry's size limit, no redirect to another host) with
the given headers; ``file://PATH`` (or a bare absolute path) is a regular file inside the target
root, read to the same limit (a link out of the root is re-rooted, a device or FIFO refused).
Any other scheme is refused. A failure is a ``SourceError``; the module then writes the entry's
``content`` instead, as cloud-init does.
"""

from __future__ import annotations

import os
import stat
import urllib.parse
from typing import Any

# one entry's fetch, all tries and pauses included
FETCH_BUDGET = 60.0


class SourceError(Exception):
    """The source could not be loaded (the message names the entry and the URI)."""


def load_source(root: Any, source: Any, where: str, limit: int) -> bytes:
    """The bytes ``source`` names, at most ``limit`` of them."""
    if not isinstance(source, dict) or not isinstance(source.get("uri"), str) or not source["uri"].strip():
        raise SourceError(f"{where}.source: expected a mapping with a uri")
    uri = source["uri"].strip()
    headers = source.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, (str, int, float)) for v in headers.values()):
        raise SourceError(f"{where}.source.headers: expected a mapping of header names to strings")
    if any("\n" in str(k) + str(v) or "\r" in str(k) + str(v) for k, v in headers.items()):
        raise SourceError(f"{where}.source.headers: a header may not contain a line break")
    scheme = urllib.parse.urlsplit(uri).scheme.lower()
    if scheme in ("http", "https"):
        from cloudseed.core.http import FetchError, fetch

        try:
            return fetch(uri, headers={str(k): str(v) for k, v in headers.items()}, timeout=10.0, retries=2,
                         backoff=1.0, max_bytes=limit, max_wait=FETCH_BUDGET)
        except FetchError as e:
            raise SourceError(f"{where}.source: {e}") from None
    if scheme == "file" or (not scheme and uri.startswith("/")):
        return _read_in_root(root, urllib.parse.unquote(urllib.parse.urlsplit(uri).path) if scheme else uri,
                             where, uri, limit)
    raise SourceError(f"{where}.source.uri: unsupported scheme {scheme or '(none)'!r} "
                      "(http, https or file)")


def _read_in_root(root: Any, inner: str, where: str, uri: str, limit: int) -> bytes:
    from cloudseed.core.root import RootError

    try:
        host = root.path(inner)   # resolved inside the root: a link pointing out is re-rooted
    except RootError as e:
        raise SourceError(f"{where}.source: {e}") from None
    try:
        info = os.stat(host)
        if not stat.S_ISREG(info.st_mode):
            raise SourceError(f"{where}.source: {uri} is not a regular file")
        with open(host, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise SourceError(f"{where}.source: {uri}: {e.strerror or e}") from None
    if len(data) > limit:
        raise SourceError(f"{where}.source: {uri} is larger than {limit // (1024 * 1024)} MiB")
    return data
