"""Oracle Cloud's instance metadata API: ``/opc/v2/{instance,vnics}/...`` and the ``/opc/v1/`` fallback.

v2 requires ``Authorization: Bearer Oracle`` (missing or different: 401, as OCI's IMDS), v1
requires nothing. ``instance/`` and ``vnics/`` are JSON documents
(``provider/instance_data/oracle.py``); a sub-path names a key (``instance/metadata/user_data``,
``vnics/0/privateIp``): JSON for objects and lists, text for strings and numbers. Answers are
rendered once per instance and path, kept in the instance's ``responses`` (never in ``routes``:
the bearer rule is checked on every request). ``identity/cert.pem``, ``key.pem`` and
``intermediate.pem`` are the instance principal's certificate, key and CA (``oci_identity.py``),
made off the event loop and never kept by path: they rotate.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from cloudseed.clouds.oracle import CLOUD
from cloudseed.provider.instance_data import oracle
from cloudseed.provider.server.apis._json_tree import list_index
from cloudseed.provider.server.engine.http import Response, text_error

_NOT_FOUND = text_error(404, "not found")
BEARER = (CLOUD.names["v2_header"].lower(), CLOUD.names["v2_value"])  # the wire contract: clouds/oracle.py
V2, V1 = CLOUD.versions
_UNAUTHORIZED = text_error(401, f"{CLOUD.names['v2_header']}: {BEARER[1]} is required for {CLOUD.base}/{V2}",
                           [("WWW-Authenticate", "Bearer")])


def handle(app: Any, request: Any, instance: Any) -> Any:
    parts = [p for p in request.path.split("/") if p]  # "opc", version, document, keys...
    if len(parts) < 2 or parts[1] not in CLOUD.versions:
        return _NOT_FOUND
    if parts[1] == V2 and request.headers.get(BEARER[0]) != BEARER[1]:
        return _UNAUTHORIZED
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    if len(parts) == 4 and parts[2] == "identity":
        if parts[3] not in IDENTITY_FILES:
            return _NOT_FOUND
        return _identity(app, instance.record, parts[3])
    key = "opc/" + "/".join(parts[2:])
    found = instance.responses.get(key)
    if found is None:
        found = render(instance.record, tuple(parts[2:]))
        if found is None:
            return _NOT_FOUND
        instance.remember(key, found)  # bounded (instance_cache.CachedInstance)
    return found


IDENTITY_FILES = ("cert.pem", "key.pem", "intermediate.pem")


async def _identity(app: Any, record: Any, name: str) -> Response:
    import asyncio

    def make() -> str:
        oci = app.credentials.oci  # the registry's CA: made or read on first use
        if name == "intermediate.pem":
            return oci.ca_pem
        cert, key = oci.leaf(record)
        return cert if name == "cert.pem" else key

    text = await asyncio.get_running_loop().run_in_executor(None, make)
    return Response(200, text, "application/x-pem-file")


def render(record: Any, parts: tuple) -> Optional[Response]:
    if not parts:
        return Response(200, "instance/\nvnics/\n")
    if parts[0] == "instance":
        node: Any = oracle.instance(record)
    elif parts[0] == "vnics":
        node = oracle.vnics(record)
    else:
        return None
    for part in parts[1:]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and list_index(part, len(node)):
            node = node[int(part)]
        else:
            return None
    if isinstance(node, (dict, list)):
        return Response(200, json.dumps(node, indent=2), "application/json")
    return Response(200, str(node), "text/plain")
