"""Azure's instance metadata service (``/metadata/instance``, ``/metadata/attested/document``) and,
for ``/machine`` and ``/?comp=versions``, its wire server (``_azure_wireserver.py``).

Rules as Azure's IMDS enforces them: a request without ``Metadata: true`` is a 400, as is one
carrying ``X-Forwarded-For`` or one without an ``api-version`` query parameter. ``/metadata/instance``
answers the whole document; ``/metadata/instance/compute/...`` and ``.../network/...`` walk
into it (``interface/0/macAddress``); ``?format=text`` answers a leaf as plain text (the default
for leaves is JSON, as for directories). ``/metadata/attested/document`` answers
``{"encoding": "pkcs7", "signature": ...}``: a PKCS#7 with the attested JSON inside (nonce, vmId,
subscriptionId, timeStamp...), signed in process (``azure_attested.py``: the registry's ECDSA key,
``cloudseed instances identity-certificate --azure``; or EC2's RSA key) and kept for the second
it was made in. ``/metadata/identity/oauth2/token`` answers managed-identity tokens
(``azure_identity.py``), ``/metadata/loadbalancer`` the public addresses in front of the VM,
``/metadata/scheduledevents`` the instance's timeline (``_azure_events.py``; GET, and POST to approve).

Rendered answers are kept per instance; a 404 is not, and a request target only when short.
"""

from __future__ import annotations

import json
from typing import Any, Union
from urllib.parse import parse_qsl

from cloudseed.clouds.azure import CLOUD
from cloudseed.clouds.azure import FIELDS as F
from cloudseed.provider.instance_data import azure
from cloudseed.provider.server.apis._json_tree import list_index
from cloudseed.provider.server.engine.http import Response

JSON = "application/json; charset=utf-8"
VERSIONS = ("2017-03-01", "2017-04-02", "2017-08-01", "2017-12-01", "2018-02-01", "2018-04-02",
            "2018-10-01", "2019-02-01", "2019-03-11", "2019-04-30", "2019-06-01", "2019-06-04",
            "2019-08-01", "2019-08-15", "2019-11-01", "2020-06-01", "2020-07-15", "2020-09-01",
            "2020-10-01", "2020-12-01", "2021-01-01", "2021-02-01", "2021-03-01", "2021-05-01",
            "2021-08-01", "2021-10-01", "2021-11-01", "2021-11-15", "2021-12-13")


def error(status: int, message: str) -> Response:
    return Response(status, json.dumps({"error": message}), JSON)


_NO_METADATA = error(400, "Bad request. Required metadata header not specified")
_FORWARDED = error(400, "Bad request. Requests carrying X-Forwarded-For are refused")
_NO_VERSION = error(400, "Bad request. api-version was not specified in the request. For more information "
                         "refer to aka.ms/azureimds")
_BAD_VERSION = error(400, "Bad request. api-version is invalid or was not specified in the request.")
_NOT_FOUND = error(404, "Not found")
MAX_KEPT_TARGET = 256  # longer request targets are answered, not remembered
_VERSIONS = Response(200, json.dumps({"apiVersions": list(VERSIONS)}), JSON)


METADATA = (CLOUD.names["metadata"].lower(), CLOUD.names["metadata_value"])  # the wire contract: clouds/azure.py
WIRE_SERVER = CLOUD.requests["goal_state"].path.rstrip("/")


def handle(app: Any, request: Any, instance: Any) -> Union[Response, Any]:
    if request.path.startswith(WIRE_SERVER) or request.path == "/":  # "/": ?comp=versions (routes.api_for)
        from cloudseed.provider.server.apis import _azure_wireserver as azure_wireserver

        return azure_wireserver.handle(app, request, instance)
    if request.path.rstrip("/") == "/metadata/identity/oauth2/token":
        return _identity(app, request, instance)  # its own rules and OAuth-style errors
    if request.headers.get(METADATA[0], "").lower() != METADATA[1]:
        return _NO_METADATA
    if "x-forwarded-for" in request.headers and not app._is_proxy(request.peer):
        return _FORWARDED
    seen = "azure?" + request.path + "?" + request.query  # the answer to this exact target, once rendered
    found = instance.responses.get(seen)
    if found is not None and (request.method == "GET" or request.method == "HEAD"):
        return found
    if request.path.rstrip("/") == "/metadata/versions":
        return _VERSIONS
    query = dict(parse_qsl(request.query or "", keep_blank_values=True))
    version = query.get("api-version")
    if not version:
        return _NO_VERSION
    if request.path.rstrip("/") == "/metadata/scheduledevents":
        return _scheduled_events(app, request, instance, version)
    if version not in VERSIONS:
        return _BAD_VERSION
    if request.path.rstrip("/") == "/metadata/attested/document":
        if request.method not in ("GET", "HEAD"):
            return error(405, "Method not allowed")
        return _attested(app, instance, query.get("nonce", ""))
    if request.method not in ("GET", "HEAD"):
        return error(405, "Method not allowed")
    parts = [p for p in request.path.split("/") if p][1:]
    if parts == ["loadbalancer"]:
        if version < "2020-10-01":
            return _BAD_VERSION
        return _load_balancer(instance)
    if not parts or parts[0] != "instance":
        return _NOT_FOUND
    fmt = query.get("format", "json")
    if fmt not in ("json", "text"):
        return error(400, "Bad request. Invalid format; use json or text")
    key = f"azure/{'/'.join(parts)}/{fmt}"
    found = instance.responses.get(key)
    if found is None:
        found = render(_tree(instance), parts[1:], fmt)
        if found.status != 200:
            return found  # not kept: any number of missing paths leaves memory as it was
        instance.responses[key] = found
    if len(instance.responses) < 1024 and len(seen) <= MAX_KEPT_TARGET:  # bounded: the queries are the client's
        instance.responses[seen] = found
    return found


def _identity(app: Any, request: Any, instance: Any) -> Response:
    from cloudseed.provider.server.credentials import azure_identity

    if request.headers.get(METADATA[0], "").lower() != METADATA[1]:
        return azure_identity.NO_METADATA
    if "x-forwarded-for" in request.headers and not app._is_proxy(request.peer):
        return azure_identity.oauth_error(400, "invalid_request", "Requests carrying X-Forwarded-For are refused")
    if request.method != "GET":
        return azure_identity.oauth_error(405, "invalid_request", "Method not allowed; use GET")
    query = dict(parse_qsl(request.query or "", keep_blank_values=True))
    version = query.get("api-version")
    if not version:
        return azure_identity.oauth_error(400, "invalid_request", "Required query variable 'api-version' is missing")
    if version not in VERSIONS or version < "2018-02-01":
        return azure_identity.oauth_error(400, "invalid_request", f"Invalid api-version {version[:40]!r}: "
                                                                  "use 2018-02-01 or later")
    return app.credentials.azure.answer(instance.record, query)


def _scheduled_events(app: Any, request: Any, instance: Any, version: str) -> Any:
    import time

    from cloudseed.provider.server.apis import _azure_events as azure_events

    if version not in azure_events.VERSIONS:
        return _BAD_VERSION
    events = getattr(instance, "events", ())  # the timeline (registry/events.py), loaded with the instance
    if request.method in ("GET", "HEAD"):
        return azure_events.answer(instance.record, events, version, time.time(), getattr(instance, "retired", 0))
    if request.method != "POST":
        return error(405, "Method not allowed")
    ids = azure_events.start_requests(request.body, events)
    if isinstance(ids, Response):
        return ids
    return _approve(app, instance.instance_id, ids)


async def _approve(app: Any, instance_id: str, ids: list) -> Response:
    def approve() -> None:
        for event_id in ids:
            app.registry.acknowledge_event(instance_id, event_id)

    await app.cache.run(approve)
    app.cache.invalidate([instance_id])
    return Response(200, b"", JSON)


def _load_balancer(instance: Any) -> Response:
    found = instance.responses.get("azure:loadbalancer")
    if found is None:
        addresses = instance.record.addresses
        private = next((a["address"] for a in addresses if not a.get("public") and ":" not in a["address"]), "")
        public = [{"frontendIpAddress": a["address"], F["private_ip"]: private}
                  for a in addresses if a.get("public")]
        body = {"loadbalancer": {"publicIpAddresses": public, "inboundRules": [], "outboundRules": []}}
        found = instance.responses["azure:loadbalancer"] = Response(200, json.dumps(body), JSON)
    return found


def render(tree: Any, path: list, fmt: str) -> Response:
    node = tree
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and list_index(part, len(node)):
            node = node[int(part)]
        else:
            return _NOT_FOUND
    if fmt == "text":
        if isinstance(node, (dict, list)):
            if not path:
                return error(400, "Bad request. Query parameter 'format=text' is not supported for this path")
            names = node.keys() if isinstance(node, dict) else (str(i) for i in range(len(node)))
            return Response(200, "\n".join(names), "text/plain; charset=utf-8")
        return Response(200, str(node), "text/plain; charset=utf-8")
    return Response(200, json.dumps(node), JSON)


def _attested(app: Any, instance: Any, nonce: str) -> Any:
    if nonce and not (len(nonce) <= 32 and nonce.isascii() and nonce.isalnum()):
        return error(400, "Bad request. nonce must be at most 32 letters and digits")
    return app.credentials.attested.answer(instance, _tree(instance)["compute"], nonce)


def _tree(instance: Any) -> Any:
    """The instance's IMDS document, built once per record."""
    tree = instance.trees.get("azure")
    if tree is None:
        tree = instance.trees["azure"] = azure.document(instance.record)
    return tree
