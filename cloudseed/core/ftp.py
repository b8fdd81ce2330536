"""The agent's FTP client (standard library only) for NoCloud seeds served over FTP or FTPS.

``ftp://[user:password@]host[:port]/path`` and ``ftps://...`` (cloud-init 24.2). As ``core/http.py``:
a *total* deadline (every socket operation only gets the time left, so a server that trickles
cannot hold the boot), a size limit (the transfer stops past it), and errors as ``FetchError``
naming the URL (a missing file is status 404, as cloud-init maps FTP's 550). FTPS is explicit TLS
(``AUTH TLS``) with the server's certificate verified against the system's CAs and the data
channel protected (``PROT P``); a server without TLS is refused for ``ftps://``, never used in
the clear. The login is anonymous unless the URL names a user.
"""

from __future__ import annotations

import time
import urllib.parse

from cloudseed.core.fetch_error import FetchError


class _TooLarge(Exception):
    pass


def fetch_ftp(url: str, *, timeout: float = 5.0, max_bytes: int, max_wait: float | None = None) -> bytes:
    """The file ``url`` names, within ``max_wait`` seconds in total (``timeout`` without it)."""
    import ftplib
    import socket

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("ftp", "ftps") or not parts.hostname:
        raise FetchError(url, f"unsupported URL {url!r}", permanent=True)
    deadline = time.monotonic() + (max_wait if max_wait is not None else timeout)

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("out of time")
        return min(timeout, remaining)

    secure = parts.scheme == "ftps"
    if secure:
        import ssl

        client: ftplib.FTP = ftplib.FTP_TLS(context=ssl.create_default_context())
    else:
        client = ftplib.FTP()
    chunks: list[bytes] = []
    size = 0

    def keep(chunk: bytes) -> None:
        nonlocal size
        size += len(chunk)
        if size > max_bytes:
            raise _TooLarge()
        chunks.append(chunk)
        if client.sock is not None:
            client.sock.settimeout(left())

    try:
        client.connect(parts.hostname, parts.port or 21, timeout=left())
        if secure:
            try:
                client.auth()
            except ftplib.error_perm:
                raise FetchError(url, "the server does not offer TLS (use ftp:// to allow plain FTP)",
                                 permanent=True) from None
        client.sock.settimeout(left())
        client.login(urllib.parse.unquote(parts.username or "anonymous"),
                     urllib.parse.unquote(parts.password or ""))
        if secure:
            client.prot_p()
        client.sock.settimeout(left())
        client.retrbinary(f"RETR {urllib.parse.unquote(parts.path) or '/'}", keep)
    except FetchError:
        raise
    except _TooLarge:
        raise FetchError(url, f"file larger than the limit of {max_bytes} bytes", permanent=True) from None
    except ftplib.error_perm as e:
        code = str(e)[:3]
        status = 404 if code == "550" else 403 if code in ("530", "532") else None
        raise FetchError(url, f"FTP {str(e).strip()}", status, permanent=True) from None
    except (ftplib.Error, OSError, EOFError, ValueError) as e:
        reason = "timed out" if isinstance(e, (socket.timeout, TimeoutError)) else (str(e) or type(e).__name__)
        raise FetchError(url, reason) from None
    finally:
        try:
            client.close()
        except OSError:
            pass
    return b"".join(chunks)
