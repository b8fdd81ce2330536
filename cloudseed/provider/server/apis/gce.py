"""Google Compute Engine's metadata API (``/computeMetadata/v1/...``), as GCE's metadata server answers.

Rules as GCE enforces them: a request without ``Metadata-Flavor: Google`` is a 403, a request
carrying ``X-Forwarded-For`` (not from a trusted proxy) is a 403, and every answer carries
``Metadata-Flavor: Google``. A directory lists its entries (``name/`` for directories);
``?recursive=true`` answers a directory as one JSON document (camelCase keys); ``?alt=json``
answers a leaf as JSON, ``?alt=text`` a directory as ``path value`` lines. Every answer has an
``ETag``; ``?wait_for_change=true`` waits until the value's ETag differs from ``last_etag`` (or
from the current one when none is given), at most ``timeout_sec`` (default 60, at most 300)
seconds, polling the instance cache on the event loop: a waiting client holds no worker thread.

``GET /`` with ``Metadata-Flavor: Google`` answers GCE's root (``computeMetadata/``), as google-auth's
``ping()`` expects (without the header, ``/`` stays EC2's version list). Service accounts
(``instance/service-accounts/``) answer live ``token`` and ``identity`` leaves
(``gce_credentials.py``); ``universe/universe-domain`` is ``googleapis.com``. ``instance/maintenance-event``
and ``instance/preempted`` follow the instance's timeline (``registry/events.py``), and a
``wait_for_change`` on them wakes when an event starts or ends (it re-reads every quarter second).

The tree is ``provider/instance_data/gce.py``; answers are rendered once per instance and query,
kept in the instance's ``responses`` (never in ``routes``: the header rules are checked on
every request). Only found answers are kept, and a request target is remembered only when it
is short: a flood of distinct paths or queries leaves the cache as it was.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Any, Optional, Union
from urllib.parse import parse_qsl

from cloudseed.clouds.gce import CLOUD, KEPT_NAMES, PATH_NAMES
from cloudseed.provider.instance_data import gce
from cloudseed.provider.server.apis._json_tree import list_index
from cloudseed.provider.server.engine.http import Response
from cloudseed.provider.server.instance_cache import CachedInstance

PREFIX = CLOUD.names["prefix"]  # the wire contract is clouds/gce.py's
FLAVOR = (CLOUD.names["flavor"], CLOUD.names["flavor_value"])
_FLAVOR_ASKED = FLAVOR[0].lower()  # request headers arrive lower-cased
_VERSION = "/" + CLOUD.versions[0]
DEFAULT_WAIT = 60.0
MAX_WAIT = 300.0
POLL = 0.25
TEXT = "application/text"
JSON = "application/json"
MISSING = object()
MAX_KEPT_TARGET = 256  # longer request targets are answered, not remembered
MAX_AUDIENCE = 1024


def error(status: int, message: str) -> Response:
    return Response(status, message.rstrip("\n") + "\n", "text/html; charset=UTF-8", headers=[FLAVOR])


_NOT_FOUND = error(404, "Not Found")
_NO_FLAVOR = error(403, "Your client does not have permission to get URL from this server. "
                        f"Missing {FLAVOR[0]}:{FLAVOR[1]} header.")
ROOT = Response(200, "computeMetadata/\n", TEXT, headers=[FLAVOR])
_FORWARDED = error(403, "Your client does not have permission to get URL from this server. "
                        "Requests carrying X-Forwarded-For are refused.")


def flavored(request: Any) -> bool:
    """The request carries ``Metadata-Flavor: Google``, as GCE requires of every request."""
    return request.headers.get(_FLAVOR_ASKED) == FLAVOR[1]


def handle(app: Any, request: Any, instance: Any) -> Union[Response, Any]:
    """The answer to ``request`` (a Response, or an awaitable of one for ``wait_for_change``)."""
    if not flavored(request):
        return _NO_FLAVOR
    if "x-forwarded-for" in request.headers and not app._is_proxy(request.peer):
        return _FORWARDED
    if request.method not in ("GET", "HEAD"):
        return Response(405, "Method not allowed; use GET\n", headers=[FLAVOR, ("Allow", "GET, HEAD")])
    seen = "gce?" + request.path + "?" + request.query  # the answer to this exact target, once rendered
    # answers that move with time (an instance with events on its timeline) are not kept by target
    waits = "wait_for_change" in request.query or _timed(instance)
    if not waits:
        found = instance.responses.get(seen)
        if found is not None:
            return found
    answer = _answer(app, request, instance)
    if (not waits and answer.__class__ is Response and answer.status == 200 and len(seen) <= MAX_KEPT_TARGET
            and len(instance.responses) < 1024 and not request.path.endswith(_LIVE)):
        instance.responses[seen] = answer
    return answer


_LIVE = ("/token", "/identity")  # service accounts' leaves: made at each request, never kept


def _answer(app: Any, request: Any, instance: Any) -> Union[Response, Any]:
    rest = request.path[len(PREFIX):]
    if rest in ("", "/"):
        return _answer_text(instance, "root", "v1/\n")
    if not (rest == _VERSION or rest.startswith(_VERSION + "/")):
        return _NOT_FOUND
    path = tuple(p for p in rest[len(_VERSION):].split("/") if p)
    query = {k.lower(): v for k, v in parse_qsl(request.query or "", keep_blank_values=True)}
    recursive = query.get("recursive", "").lower() == "true"
    alt = query.get("alt", "").lower()
    if alt not in ("", "json", "text"):
        return error(400, f"alt={alt!r}: use json or text")
    if len(path) == 4 and path[:2] == ("instance", "service-accounts") and path[3] in ("token", "identity"):
        return _credential(app, instance, path[2], path[3], query)
    key = f"gce/{'/'.join(path)}/{int(recursive)}{alt}"
    answer = render_cached(instance, key, path, recursive, alt)
    if query.get("wait_for_change", "").lower() != "true":
        return answer
    try:
        timeout = min(MAX_WAIT, max(0.0, float(query.get("timeout_sec") or DEFAULT_WAIT)))
    except ValueError:
        return error(400, "timeout_sec must be a number of seconds")
    last = query.get("last_etag") or _etag(answer)
    if _etag(answer) != last:
        return answer
    return _wait(app, instance.instance_id, key, path, recursive, alt, last, timeout)


GCE_KINDS = {"maintenance": "MIGRATE_ON_HOST_MAINTENANCE", "redeploy": "MIGRATE_ON_HOST_MAINTENANCE",
             "freeze": "MIGRATE_ON_HOST_MAINTENANCE", "terminate": "TERMINATE_ON_HOST_MAINTENANCE", "preempt": ""}


def _timed(instance: Any) -> bool:
    return any(e.kind in GCE_KINDS for e in getattr(instance, "events", ()))


def event_state(instance: Any, now: float) -> tuple[str, str]:
    """``(maintenance-event, preempted)`` at ``now`` from the instance's timeline (``registry/events.py``):
    an active maintenance, redeploy or freeze is ``MIGRATE_ON_HOST_MAINTENANCE``, a terminate
    ``TERMINATE_ON_HOST_MAINTENANCE``, an active preempt makes ``preempted`` ``TRUE``."""
    maintenance, preempted = "NONE", "FALSE"
    for event in getattr(instance, "events", ()):
        kind = GCE_KINDS.get(event.kind)
        if kind is None or event.phase(now) != "active":
            continue
        if event.kind == "preempt":
            preempted = "TRUE"
        elif maintenance == "NONE" or kind.startswith("TERMINATE"):
            maintenance = kind
    return maintenance, preempted


def render_cached(instance: Any, key: str, path: tuple, recursive: bool, alt: str) -> Response:
    state = event_state(instance, time.time()) if _timed(instance) else ("NONE", "FALSE")
    if state != ("NONE", "FALSE"):
        key = f"{key}/{state[0]}/{state[1]}"
    found = instance.responses.get(key)
    if found is None:
        tree = instance.trees.get(("gce", state))
        if tree is None:
            tree = gce.tree(instance.record)
            tree["instance"]["maintenance-event"], tree["instance"]["preempted"] = state
            instance.trees[("gce", state)] = tree
        found = render(tree, path, recursive, alt)
        if found.status == 200:  # a 404 is not kept: any number of missing paths leaves memory as it was
            instance.responses[key] = found
    return found


def _credential(app: Any, instance: Any, name: str, leaf: str, query: dict) -> Response:
    """``service-accounts/NAME/token`` or ``.../identity``: made at each request, never kept."""
    account = next((a for a in gce.service_accounts(instance.record) if name == a["email"] or name in a["aliases"]),
                   None)
    if account is None:
        return _NOT_FOUND
    credentials = app.credentials
    if leaf == "token":
        scopes = [s for s in query.get("scopes", "").split(",") if s] or account["scopes"]
        return _json(credentials.gce.access_token(instance.instance_id, account["email"], scopes))
    audience = query.get("audience", "")
    if not audience:
        return error(400, "non-empty audience parameter required")
    if len(audience) > MAX_AUDIENCE:
        return error(400, f"audience is longer than {MAX_AUDIENCE} characters")
    form = query.get("format", "standard").lower()
    if form not in ("standard", "full"):
        return error(400, "format must be standard or full")
    licenses = query.get("licenses", "false").lower() == "true"
    token = credentials.gce.identity_token(credentials.key, instance.record, account["email"], audience,
                                           form == "full", licenses)
    return _text(token)


async def _wait(app: Any, instance_id: str, key: str, path: tuple, recursive: bool, alt: str, last: str,
                timeout: float) -> Response:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    answer: Optional[Response] = None
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        await asyncio.sleep(min(POLL, remaining))
        instance = app.cache.cached(instance_id)
        if instance is None:
            return _NOT_FOUND
        if not isinstance(instance, CachedInstance):
            instance = await app.cache.by_id(instance_id)
            if instance is None:
                return _NOT_FOUND
        answer = render_cached(instance, key, path, recursive, alt)
        if _etag(answer) != last:
            return answer
    if answer is None:
        instance = await app.cache.by_id(instance_id)
        if instance is None:
            return _NOT_FOUND
        answer = render_cached(instance, key, path, recursive, alt)
    return answer  # the timeout ran out: the current value, as GCE answers


def _etag(answer: Response) -> str:
    for name, value in answer.headers:
        if name == "ETag":
            return value
    return ""


# lists GCE answers as one JSON value, not as a directory of indexes: ``instance/tags`` is
# ``["http-server"]`` (clients json-parse it: gcp-metadata, Salt's grains), listed as ``tags``
JSON_LEAVES = frozenset({("instance", "tags")})


def render(tree: dict, path: tuple, recursive: bool, alt: str) -> Response:
    node: Any = tree
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and list_index(part, len(node)):
            node = node[int(part)]
        else:
            return _NOT_FOUND
    if path in JSON_LEAVES:
        return _json(node)
    directory = isinstance(node, (dict, list))
    in_attributes = PATH_NAMES["attributes"] in path[:-1] or (path and path[-1] in KEPT_NAMES)
    if directory and recursive:
        value = gce.as_json(node, bool(in_attributes))
        if alt == "text":
            return _text("".join(f"{k} {v}\n" for k, v in _flatten(value, "")))
        return _json(value)
    if directory:
        entries = node.items() if isinstance(node, dict) else enumerate(node)
        names = [f"{k}/" if isinstance(v, (dict, list)) and path + (k,) not in JSON_LEAVES else str(k)
                 for k, v in entries]
        if len(path) == 3 and path[:2] == ("instance", "service-accounts"):
            # leaves, as GCE lists them (aliases and scopes answer one per line), and the live ones
            names = sorted([n.rstrip("/") for n in names] + ["identity", "token"])
        if alt == "json":
            return _json(names)
        return _text("".join(f"{name}\n" for name in names))
    if alt == "json":
        return _json(node)
    return _text(str(node))


def _answer_text(instance: Any, key: str, body: str) -> Response:
    found = instance.responses.get("gce:" + key)
    if found is None:
        found = instance.responses["gce:" + key] = _text(body)
    return found


def _flatten(value: Any, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return [(prefix or "/", value)]
    out: list[tuple[str, Any]] = []
    for key, item in items:
        out.extend(_flatten(item, f"{prefix}/{key}"))
    return out


def _with_etag(body: bytes, content_type: str) -> Response:
    etag = hashlib.sha256(body).hexdigest()[:16]
    return Response(200, body, content_type, headers=[FLAVOR, ("ETag", etag)])


def _text(body: str) -> Response:
    return _with_etag(body.encode("utf-8"), TEXT)


def _json(value: Any) -> Response:
    return _with_etag(json.dumps(value, sort_keys=True).encode("utf-8"), JSON)
