"""MAAS's metadata API: ``/MAAS/metadata/<version>/meta-data/<file>`` and ``.../user-data``, OAuth-signed.

Versions ``2012-03-01`` (the one cloud-init asks) and ``latest``; listings at ``/MAAS/metadata/``,
``/MAAS/metadata/<version>/`` and ``.../meta-data/``. Every request below a version must carry
``Authorization: OAuth`` (PLAINTEXT) with the consumer key, token key and secrets of the record's
``clouds.maas``, and a timestamp within 300 s of this server's clock (as MAAS); otherwise 401
naming what is wrong, with ``WWW-Authenticate`` and a ``Date`` header (from which a client corrects
its clock). A record without ``clouds.maas`` credentials has no MAAS API (404). Answers are never
remembered by path (the server's fast path would skip the signature check); files are rendered
once per instance.
"""

from __future__ import annotations

import email.utils
from typing import Any, Optional

from cloudseed.clouds.maas import CLOUD
from cloudseed.provider.instance_data import maas
from cloudseed.provider.server.engine.http import Response, text_error

PREFIX = CLOUD.prefixes[0]  # the wire contract: clouds/maas.py
VERSIONS = (*CLOUD.versions, "latest")


def handle(app: Any, request: Any, instance: Any) -> Any:
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    rest = request.path[len(PREFIX):] if request.path.startswith(PREFIX) else None
    if rest is None or not (rest == "" or rest.startswith("/")):
        return text_error(404, "not found")
    parts = tuple(p for p in rest.split("/") if p)
    if not parts:
        return Response(200, "".join(f"{v}\n" for v in VERSIONS))
    if parts[0] not in VERSIONS:
        return text_error(404, "not found")
    record = instance.record
    creds = maas.credentials(record)
    if creds is None:
        return text_error(404, f"instance {record.instance_id} has no MAAS credentials (clouds.maas)")
    refused = _check(request, creds)
    if refused is not None:
        return refused
    key = "maas/" + "/".join(parts[1:])
    found = instance.responses.get(key)
    if found is None:
        found = render(record, parts[1:])
        if found is None:
            return text_error(404, "not found")
        instance.remember(key, found)
    return found


def _check(request: Any, creds: dict[str, str]) -> Optional[Response]:
    from cloudseed.core.oauth import OAuthError, verify

    try:
        verify(request.headers.get("authorization"), creds["consumer_key"], creds["token_key"],
               creds["token_secret"], creds["consumer_secret"])
    except OAuthError as e:
        return text_error(401, f"Authorization Error: {e}",
                          [("WWW-Authenticate", 'OAuth realm="OAuth"'), ("Date", email.utils.formatdate(usegmt=True))])
    return None


def render(record: Any, parts: tuple) -> Optional[Response]:
    if parts == ():
        return Response(200, "meta-data\nuser-data\n")
    if parts == ("user-data",):
        return None if record.user_data is None else Response(200, record.user_data, "application/octet-stream")
    if parts[0] != "meta-data" or len(parts) > 2:
        return None
    if len(parts) == 1:
        names = [n for n in maas.META_DATA if maas.meta_data(record, n) is not None]
        return Response(200, "".join(f"{n}\n" for n in names))
    text = maas.meta_data(record, parts[1])
    return None if text is None else Response(200, text)
