"""The admin listener's view of provisioning: JSON, a stream, and the fleet pages' routing.

JSON (bearer token, or the fleet's session cookie for reads)::

    GET /v1/provisioning?state=failed&q=web&limit=100&offset=0   every instance's state
    GET /v1/instances/ID/provisioning?boot=N&after=SEQ           one instance's state and reports
    GET /v1/instances/ID/provisioning/stream?after=SEQ           Server-Sent Events

The stream answers with the reports after ``after`` (or the ``Last-Event-ID`` header) as
``event: report`` (``id:`` the report's sequence number), then ``event: state`` (the instance's
state), as soon as there is at least one, or after ``wait`` seconds (default 15, at most 30) with
the state alone; then the response ends and the client reconnects after ``retry`` (250 ms) from
the last id it saw (an ``EventSource`` does that by itself). So a report reaches a watching page
within the registry poll (``POLL``, 0.2 s) and a reconnect, on any server of one registry, and no
connection is held open longer than ``wait``. The pages themselves are ``fleet_page.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Optional
from urllib.parse import parse_qsl, urlencode

from cloudseed.provider.registry.provisioning import STATES
from cloudseed.provider.server.engine.http import Response

JSON = "application/json"
POLL = 0.2
DEFAULT_WAIT = 15.0
MAX_WAIT = 30.0
RETRY_MS = 250
MAX_LIST = 1000


def _json(status: int, value: Any) -> Response:
    return Response(status, json.dumps(value, indent=1) + "\n", JSON, [("Cache-Control", "no-store")])


def _error(status: int, message: str, field: Optional[str] = None) -> Response:
    body: dict[str, Any] = {"error": message}
    if field:
        body["field"] = field
    return Response(status, json.dumps(body) + "\n", JSON)


def _int(query: dict[str, str], key: str, default: Optional[int]) -> Optional[int]:
    value = query.get(key)
    if value is None or value == "":
        return default
    if not (value.isascii() and value.isdigit()) or len(value) > 15:
        raise ValueError(key)
    return int(value)


def list_query(query: str) -> tuple[dict[str, Any], Optional[Response]]:
    """``state``, ``q``, ``limit``, ``offset`` of a fleet query, or the 400 naming the bad one."""
    fields = dict(parse_qsl(query, keep_blank_values=True))
    state = fields.get("state", "")
    if state and state not in STATES:
        return {}, _error(400, f"state must be one of {', '.join(STATES)}", "state")
    try:
        limit = min(_int(fields, "limit", 100) or 0, MAX_LIST)
        offset = _int(fields, "offset", 0) or 0
    except ValueError as bad:
        return {}, _error(400, "must be a non-negative integer", str(bad))
    return {"state": state or None, "contains": fields.get("q", "")[:100], "limit": limit, "offset": offset}, None


async def fleet_list(app: Any, request: Any) -> Response:
    if request.method not in ("GET", "HEAD"):
        return _error(405, "method not allowed; use GET, HEAD")
    options, refused = list_query(request.query)
    if refused is not None:
        return refused
    entries = await app.cache.run(lambda: app.registry.provisioning_list(**options))
    return _json(200, {"instances": entries, **{k: options[k] for k in ("limit", "offset")}})


async def handle_instance(app: Any, request: Any, instance_id: str, rest: list[str]) -> Response:
    """``/v1/instances/ID/provisioning[/stream]``."""
    if request.method not in ("GET", "HEAD"):
        return _error(405, "method not allowed; use GET, HEAD")
    fields = dict(parse_qsl(request.query, keep_blank_values=True))
    try:
        boot = _int(fields, "boot", None)
        after = _int(fields, "after", None)
        wait = _int(fields, "wait", None)
    except ValueError as bad:
        return _error(400, "must be a non-negative integer", str(bad))
    state = await app.cache.run(app.registry.provisioning, instance_id)
    if state is None:
        return _error(404, f"no instance {instance_id}", "instance_id")
    if not rest:
        reports = await app.cache.run(lambda: app.registry.provisioning_reports(
            instance_id, after or 0, boot if boot is not None else state["boot"]))
        return _json(200, {"instance_id": instance_id, "provisioning": state, "reports": reports})
    if rest != ["stream"]:
        return _error(404, f"no such endpoint {request.path}")
    last_id = request.headers.get("last-event-id", "")  # a reconnecting EventSource's place wins
    if last_id.isascii() and last_id.isdigit() and len(last_id) < 16:
        after = max(after or 0, int(last_id))
    return await stream(app, instance_id, after or 0, min(float(wait if wait is not None else DEFAULT_WAIT), MAX_WAIT))


async def stream(app: Any, instance_id: str, after: int, wait: float) -> Response:
    """One piece of the event stream: the reports after ``after`` once there are any (or none after
    ``wait`` seconds), then the state; the client reconnects for the next piece."""
    deadline = time.monotonic() + wait
    while True:
        reports = await app.cache.run(lambda: app.registry.provisioning_reports(instance_id, after, limit=500))
        if reports or time.monotonic() >= deadline:
            break
        await asyncio.sleep(POLL)
    state = await app.cache.run(app.registry.provisioning, instance_id)
    lines = [f"retry: {RETRY_MS}", ""]
    for report in reports:
        lines += [f"id: {report['seq']}", "event: report", f"data: {json.dumps(report)}", ""]
    if not reports and after:
        lines += [f"id: {after}"]  # keep the client's place
    lines += ["event: state", f"data: {json.dumps(state)}", "", ""]
    return Response(200, "\n".join(lines), "text/event-stream; charset=utf-8",
                    [("Cache-Control", "no-store"), ("X-Accel-Buffering", "no")])


async def fleet_route(app: Any, request: Any, path: str) -> Response:
    """``/fleet...``: the pages (``fleet_page.py``); unauthenticated browsers go to the sign-in form."""
    from cloudseed.provider.server.admin import fleet_page

    if path.startswith("/fleet/static/"):
        return fleet_page.static(path[len("/fleet/static/"):])
    if path == "/fleet/login":
        return fleet_page.login(request, app.token)
    if path == "/fleet/logout":
        return fleet_page.logout() if request.method == "POST" else _error(405, "method not allowed; use POST")
    if not app.reads_allowed(request):
        return Response(303, "", "text/plain", [("Location", "/fleet/login")])
    if request.method not in ("GET", "HEAD"):
        return _error(405, "method not allowed; use GET, HEAD")
    fields = dict(parse_qsl(request.query, keep_blank_values=True))
    if path == "/fleet":
        options, refused = list_query(request.query)
        if refused is not None:
            return refused
        entries = await app.cache.run(lambda: app.registry.provisioning_list(**options))
        if fields.get("part") == "rows":
            return fleet_page.fragment(fleet_page.fleet_rows(entries))
        kept = urlencode([(k, v) for k, v in (("state", options["state"] or ""), ("q", options["contains"])) if v])
        return fleet_page.fleet(entries, options, kept)
    if path.startswith("/fleet/instances/") and path.count("/") == 3:
        instance_id = path[len("/fleet/instances/"):]
        state = await app.cache.run(app.registry.provisioning, instance_id)
        if state is None:
            return _error(404, f"no instance {instance_id}", "instance_id")
        reports = await app.cache.run(lambda: app.registry.provisioning_reports(instance_id, 0, state["boot"]))
        if fields.get("part") == "live":
            return fleet_page.fragment(fleet_page.instance_live(state, reports))
        return fleet_page.instance(instance_id, state, reports)
    return _error(404, f"no such page {request.path}")
