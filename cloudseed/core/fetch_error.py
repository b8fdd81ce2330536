"""``FetchError``: a URL that could not be fetched, whatever the scheme (HTTP, FTP, file).

Its own file so that ``core/http.py`` (which hands ``ftp://`` URLs to ``core/ftp.py``) and
``core/ftp.py`` both raise it without importing each other.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Mapping


class FetchError(Exception):
    """A URL could not be fetched; ``status`` is the HTTP status when there was one.

    ``permanent`` is True when repeating the request cannot help (refused redirect, oversized
    body, 4xx other than 408/429).
    """

    def __init__(self, url: str, reason: str, status: int | None = None, permanent: bool = False,
                 headers: Mapping[str, str] | None = None, body: bytes = b""):
        self.url = url
        self.status = status
        self.headers = dict(headers or {})  # the answer's headers when there was one (e.g. Date on 401)
        self.body = body  # the start of the answer's body (a server's explanation of a 4xx)
        self.reason = reason
        self.permanent = permanent
        super().__init__(f"{url}: {reason}")
