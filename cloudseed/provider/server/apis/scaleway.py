"""Scaleway's instance metadata API: ``/conf``, ``/user_data/cloud-init``, ``/vendor_data/cloud-init``.

``/conf`` is the server document (``provider/instance_data/scaleway.py``): JSON with
``?format=json``, else Scaleway's shell form (``KEY=VALUE`` lines, nested keys joined with ``_``
and upper-cased). ``/user_data`` lists the user-data keys (``cloud-init`` when there is
user-data); ``/user_data/cloud-init`` and ``/vendor_data/cloud-init`` are the raw data, 404 when
there is none, and only for a client whose source port is privileged (< 1024, i.e. root on the
instance), as Scaleway's: other ports get 403. The port is the connection's
(``Connection.peer_port``), so these answers are never put on the hot path's per-path cache.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from cloudseed.clouds.scaleway import CLOUD
from cloudseed.provider.instance_data import scaleway
from cloudseed.provider.server.engine.http import Response, text_error

PRIVILEGED = int(CLOUD.names["privileged_below"])  # the wire contract: clouds/scaleway.py
CONF, USER_DATA, VENDOR_DATA = (CLOUD.requests[role].path for role in ("conf", "user_data", "vendor_data"))
KINDS = tuple(path.split("/")[1] for path in (USER_DATA, VENDOR_DATA))  # user_data, vendor_data


def handle(app: Any, request: Any, instance: Any) -> Any:
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    path = request.path.rstrip("/") or "/"
    record = instance.record
    if path == CONF:
        form = "json" if "format=json" in request.query.split("&") else "shell"
        return _memo(instance, "sw/conf/" + form, lambda: render_conf(record, form))
    kind, _, key = path[1:].partition("/")
    if kind not in KINDS or "/" in key:
        return text_error(404, "not found")
    port = request.connection.peer_port() if request.connection is not None else None
    if port is None or port >= PRIVILEGED:
        return text_error(403, f"{kind} is only served to a privileged source port (< {PRIVILEGED}); "
                               f"this request came from port {port if port is not None else 'unknown'}")
    data = record.user_data if kind == KINDS[0] else scaleway.vendor_data(record)
    if key == "":
        keys = ["cloud-init"] if data is not None else []
        if "format=json" in request.query.split("&"):
            return Response(200, json.dumps({kind: keys}), "application/json")
        return Response(200, "".join(f"{k}\n" for k in keys))
    if key != "cloud-init" or data is None:
        return text_error(404, f"no {kind} {key!r} for this server")
    return Response(200, data, "text/plain")


def _memo(instance: Any, key: str, render: Any) -> Response:
    """Rendered once per instance, but not remembered by path: the query decides the form."""
    found = instance.responses.get(key)
    if found is None:
        found = instance.remember(key, render())
    return found


def render_conf(record: Any, form: str) -> Optional[Response]:
    doc = scaleway.metadata(record)
    if form == "json":
        return Response(200, json.dumps(doc), "application/json")
    lines: list[str] = []
    _shell(lines, "", doc)
    return Response(200, "".join(lines))


def _shell(lines: list[str], prefix: str, value: Any) -> None:
    if isinstance(value, dict):
        if prefix:
            lines.append(f"{prefix}={' '.join(str(k).upper() for k in value)}\n")
        for k, v in value.items():
            _shell(lines, f"{prefix}_{k}".upper().lstrip("_"), v)
    elif isinstance(value, list):
        lines.append(f"{prefix}={len(value)}\n")
        for index, item in enumerate(value):
            _shell(lines, f"{prefix}_{index}", item)
    else:
        text = "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
        lines.append(f"{prefix}={_quote(text)}\n")


def _quote(text: str) -> str:
    if text and all(c.isalnum() or c in "-_.:/@+=" for c in text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"
