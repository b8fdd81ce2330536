"""Akamai's (Linode's) metadata API: ``PUT /v1/token``, then ``/v1/instance``, ``/v1/network``,
``/v1/ssh-keys`` and ``/v1/user-data`` with the ``Metadata-Token`` header.

Chosen for ``/v1...`` when the record has ``clouds.akamai`` (``routes.api_for``). The token
(``Metadata-Token-Expiry-Seconds``: 1 to 43200, default 3600) is the server's stateless,
instance-bound token (``imds_tokens.TokenIssuer``, scope ``akamai``): any server sharing the
registry accepts it, another instance presenting it gets 401, and no other API accepts it (an
Akamai token is not an EC2 token). A token asked for with an EC2 token (sent because the instance
requires IMDSv2 tokens) expires no later than that EC2 token; no EC2 token is needed here even
then (``MetadataApp.OWN_TOKENS``: this PUT-then-header protocol holds against SSRF as IMDSv2's
does). Answers are JSON with ``Accept: application/json``,
else Linode's plain text (``key.sub: value`` lines); user-data is base64 text either way. Every
data request carries a token, so these answers are rendered once per instance but never put on
the per-path cache of the hot path (which would skip the token check).
"""

from __future__ import annotations

import json
from typing import Any

from cloudseed.clouds.akamai import CLOUD
from cloudseed.provider.instance_data import akamai
from cloudseed.provider.server.engine.http import Response, text_error

SCOPE = "akamai"
PREFIX = CLOUD.base  # the wire contract: clouds/akamai.py
TOKEN_PATH = CLOUD.requests["token"].path
TOKEN_HEADER = CLOUD.names["token"]
EXPIRY_HEADER = CLOUD.names["expiry"]
MAX_EXPIRY = 43200
DEFAULT_EXPIRY = 3600
DOCUMENTS = {"instance": akamai.instance, "network": akamai.network, "ssh-keys": akamai.ssh_keys}


def handle(app: Any, request: Any, instance: Any) -> Any:
    path = request.path.rstrip("/")
    if path == TOKEN_PATH:
        return _token(app, request, instance)
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    name = path[len(PREFIX) + 1:] if path.startswith(PREFIX + "/") else ""
    if name not in DOCUMENTS and name != "user-data":
        return text_error(404, "not found")
    token = request.headers.get(TOKEN_HEADER.lower())
    if not token:
        return text_error(401, f"{TOKEN_HEADER} header required: PUT {TOKEN_PATH} first")
    from cloudseed.provider.server.imds_tokens import TokenError

    try:
        app.tokens.check(token, instance.record.instance_id, SCOPE)
    except TokenError as error:
        return text_error(401, str(error).replace("IMDSv2 token", TOKEN_HEADER))
    record = instance.record
    if name == "user-data":
        return _memo(instance, "ak/user-data", lambda: Response(200, akamai.user_data(record)))
    as_json = "application/json" in request.headers.get("accept", "")
    return _memo(instance, f"ak/{name}/{'json' if as_json else 'text'}",
                 lambda: _render(DOCUMENTS[name](record), as_json))


def _token(app: Any, request: Any, instance: Any) -> Response:
    if request.method != "PUT":
        return text_error(405, "method not allowed; use PUT", [("Allow", "PUT")])
    if request.headers.get("x-forwarded-for") is not None and request.client == request.peer:
        return text_error(403, "token requests carrying X-Forwarded-For are refused")
    raw = request.headers.get(EXPIRY_HEADER.lower())
    if raw is None:
        expiry = DEFAULT_EXPIRY
    else:
        raw = raw.strip()
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 6 or not 1 <= int(raw) <= MAX_EXPIRY:
            return text_error(400, f"{EXPIRY_HEADER} must be an integer from 1 to {MAX_EXPIRY}, "
                                   f"got {raw[:20]!r}")
        expiry = int(raw)
    from cloudseed.provider.server.imds_tokens import TOKEN_HEADER

    presented = request.headers.get(TOKEN_HEADER)  # valid (MetadataApp._route checked it): cap by it
    not_after = None
    if presented is not None:
        app.tokens.check(presented, instance.record.instance_id)
        not_after = app.tokens.expiry_of(presented)
    token = app.tokens.issue(instance.record.instance_id, expiry, SCOPE, not_after)
    if "application/json" in request.headers.get("accept", ""):
        return Response(200, json.dumps([token]), "application/json")
    return Response(200, token)


def _memo(instance: Any, key: str, render: Any) -> Response:
    found = instance.responses.get(key)
    if found is None:
        found = instance.remember(key, render())
    return found


def _render(doc: dict, as_json: bool) -> Response:
    if as_json:
        return Response(200, json.dumps(doc), "application/json")
    lines: list[str] = []
    _flatten(lines, "", doc)
    return Response(200, "".join(lines))


def _flatten(lines: list[str], prefix: str, value: Any) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(lines, f"{prefix}.{k}" if prefix else str(k), v)
    elif isinstance(value, list):
        if value and all(not isinstance(v, (dict, list)) for v in value):
            lines.append(f"{prefix}: {' '.join(str(v) for v in value)}\n")
        for index, item in enumerate(value):
            if isinstance(item, (dict, list)):
                _flatten(lines, f"{prefix}.{index}", item)
    elif value is not None:
        lines.append(f"{prefix}: {str(value).lower() if isinstance(value, bool) else value}\n")
