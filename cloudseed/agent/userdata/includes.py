"""Fetching what ``#include`` and ``#include-once`` name: URLs (http, https, file) and local paths.

Every fetch goes through the agent's one HTTP client (``cloudseed.core.http``, imported only when
a URL is fetched): a total deadline per attempt and for all attempts together, a size limit,
redirects only to the same host, retries for connection errors and server errors (never for
4xx). ``#include-once`` content is kept in a cache directory, one file per URL named by the MD5
of the URL (as cloud-init names them), written through the target root (0600, directory 0700),
so it is fetched only once per instance.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from cloudseed.core.root import TargetRoot

MAX_INCLUDE_BYTES = 64 * 1024 * 1024


class IncludeError(Exception):
    """An include that could not be fetched; the message names the URL and why."""


class IncludeCache:
    """Where ``#include-once`` content is kept: a directory inside a target root."""

    def __init__(self, root: TargetRoot, directory: str):
        self.root = root
        self.directory = directory.rstrip("/") or "/"

    @classmethod
    def of(cls, where: IncludeCache | str | None) -> IncludeCache | None:
        """A cache for ``where``: a cache already, a host directory, or None (no cache)."""
        if where is None or isinstance(where, IncludeCache):
            return where
        from cloudseed.core.root import TargetRoot

        return cls(TargetRoot("/"), str(where))

    def entry(self, url: str) -> str:
        return f"{self.directory}/{cache_file_name(url)}"

    def read(self, url: str) -> bytes | None:
        inner = self.entry(url)
        if not self.root.exists(inner):
            return None
        try:
            return self.root.read_bytes(inner)
        except OSError as e:
            raise IncludeError(f"cannot read cached include {inner} for {url}: {e.strerror or e}")

    def write(self, url: str, data: bytes) -> None:
        self.root.makedirs(self.directory, mode=0o700)
        self.root.write(self.entry(url), data, mode=0o600)


def cache_file_name(url: str) -> str:
    """The include-once cache entry for ``url`` (same naming as cloud-init's ``urlcache``)."""
    import hashlib  # here: its OpenSSL library costs every boot's preload ~25 ms of a TCG guest's CPU

    return hashlib.md5(url.encode("utf-8"), usedforsecurity=False).hexdigest()


def fetch(url: str, *, timeout: float, retries: int = 2, retry_delay: float = 0.5,
          max_bytes: int = MAX_INCLUDE_BYTES, root: TargetRoot | None = None) -> bytes:
    """The content at ``url``; raises ``IncludeError``.

    Each attempt ends within ``timeout`` seconds (a server trickling bytes cannot stretch it),
    all attempts and pauses within ``(timeout + retry_delay) * (retries + 1)``. With ``root``, a
    ``file://`` URL (or a path) names a file inside that target root and never one outside it
    (the agent reading ``--root DIR`` user-data must not hand the host's /etc/shadow to it).
    """
    if url.startswith("/"):
        url = "file://" + url
    lowered = url.lower()
    if not lowered.startswith(("http://", "https://", "file://")):
        raise IncludeError("cannot include a URL that is not http, https or file (the scheme is not supported)")
    if root is not None and lowered.startswith("file://"):
        return _read_in_root(root, url, max_bytes)
    from cloudseed.core.http import FetchError
    from cloudseed.core.http import fetch as http_fetch

    retries = max(0, retries)
    try:
        return http_fetch(url, timeout=timeout, retries=retries, backoff=retry_delay, max_bytes=max_bytes,
                          max_wait=(timeout + retry_delay) * (retries + 1))
    except FetchError as e:
        reason = e.reason
        if reason.startswith("no complete answer within"):
            reason = f"timed out ({reason})"
        if lowered.startswith("file://"):
            raise IncludeError(f"cannot read {url}: {reason}") from None
        raise IncludeError(f"fetching {url} failed: {reason}") from None


def _read_in_root(root: TargetRoot, url: str, max_bytes: int) -> bytes:
    """A ``file://`` include read through the target root (symlinks resolved inside it)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise IncludeError(f"cannot read {url}: a file URL must name a local path")
    path = unquote(parts.path)
    try:
        if root.stat(path).st_size > max_bytes:
            raise IncludeError(f"cannot read {url}: larger than {max_bytes // (1024 * 1024)} MiB")
        return root.read_bytes(path)
    except OSError as e:
        raise IncludeError(f"cannot read {url}: {e.strerror or e} (inside {root.top})") from None


def fetch_once(url: str, cache_dir: IncludeCache | str | None, *, timeout: float, retries: int = 2,
               problems: list[str] | None = None, root: TargetRoot | None = None) -> bytes:
    """Content for ``#include-once``: from the cache if present, else fetched and cached (mode 0600).

    A cache that cannot be written is reported in ``problems``; the fetched content is still used.
    """
    cache = IncludeCache.of(cache_dir)
    if cache is None:
        return fetch(url, timeout=timeout, retries=retries, root=root)
    cached = cache.read(url)
    if cached is not None:
        return cached
    data = fetch(url, timeout=timeout, retries=retries, root=root)
    from cloudseed.core.root import RootError

    try:
        cache.write(url, data)
    except (OSError, RootError) as e:
        if problems is not None:
            problems.append(f"cannot cache include-once content of {url} in {cache.entry(url)}: "
                            f"{getattr(e, 'strerror', None) or e}")
    return data
