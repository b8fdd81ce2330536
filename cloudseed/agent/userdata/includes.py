"""Fetching what ``#include`` and ``#include-once`` name: URLs (http, https, file) and local paths.

urllib (and the ``email`` package it pulls in) is imported only when a URL is fetched. Each
fetch has a timeout and a few retries for connection errors and server errors (never for
4xx). ``#include-once`` content is kept in a cache directory, one file per URL named by the
MD5 of the URL (as cloud-init names them), so it is fetched only once per instance.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time

MAX_INCLUDE_BYTES = 64 * 1024 * 1024


class IncludeError(Exception):
    """An include that could not be fetched; the message names the URL and why."""


def cache_file_name(url: str) -> str:
    """The include-once cache entry for ``url`` (same naming as cloud-init's ``urlcache``)."""
    return hashlib.md5(url.encode("utf-8"), usedforsecurity=False).hexdigest()


def fetch(url: str, *, timeout: float, retries: int = 2, retry_delay: float = 0.5,
          max_bytes: int = MAX_INCLUDE_BYTES) -> bytes:
    """The content at ``url``; raises ``IncludeError``."""
    if url.startswith("/"):
        url = "file://" + url
    if url.lower().startswith("file://"):
        path = url[len("file://"):]
        try:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as e:
            raise IncludeError(f"cannot read {url}: {e.strerror or e}")
        return _check_size(url, data, max_bytes)
    if not url.lower().startswith(("http://", "https://")):
        raise IncludeError(f"cannot include {url!r}: only http, https and file URLs are supported")
    import urllib.error
    import urllib.request

    attempt = 0
    while True:
        attempt += 1
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "cloudseed"})
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return _check_size(url, response.read(max_bytes + 1), max_bytes)
        except urllib.error.HTTPError as e:
            if e.code < 500 or attempt > retries:
                raise IncludeError(f"fetching {url} failed: HTTP {e.code} {e.reason}")
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError, OSError)) and "timed out" in str(reason):
                reason = f"timed out after {timeout:g}s"
            if attempt > retries:
                raise IncludeError(f"fetching {url} failed after {attempt} attempt(s): {reason}")
        time.sleep(retry_delay)


def fetch_once(url: str, cache_dir: str | None, *, timeout: float, retries: int = 2,
               problems: list[str] | None = None) -> bytes:
    """Content for ``#include-once``: from the cache if present, else fetched and cached (mode 0600).

    A cache that cannot be written is reported in ``problems``; the fetched content is still used.
    """
    if cache_dir is None:
        return fetch(url, timeout=timeout, retries=retries)
    path = os.path.join(cache_dir, cache_file_name(url))
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise IncludeError(f"cannot read cached include {path} for {url}: {e.strerror or e}")
    data = fetch(url, timeout=timeout, retries=retries)
    try:
        _write_private(path, data)
    except OSError as e:
        if problems is not None:
            problems.append(f"cannot cache include-once content of {url} in {path}: {e.strerror or e}")
    return data


def _check_size(url: str, data: bytes, max_bytes: int) -> bytes:
    if len(data) > max_bytes:
        raise IncludeError(f"content of {url} is larger than {max_bytes // (1024 * 1024)} MiB")
    return data


def _write_private(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, readable by the owner only."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".include-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
