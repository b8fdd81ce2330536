"""The admin API's timeline of an instance: ``/v1/instances/ID/events[/EVENT_ID]``.

``GET`` lists the instance's events (``registry/events.py``; each with ``phase``, as of now);
``POST`` schedules one: ``{"kind": "preempt", "not_before": "2026-11-24T21:00:00Z" | "+120" |
EPOCH, "not_after": ..., "duration_seconds": N (instead of not_after), "details": {...},
"event_id": "...", "state": "scheduled"}``; ``GET/PATCH/DELETE .../events/EVENT_ID`` show, change
(``state``, ``not_before``, ``not_after``, ``duration_seconds``, ``details``) or remove one. Bad
input is a 400 naming the field; an unknown instance or event 404; an event id in use 409.
"""

from __future__ import annotations

import json
import time
from typing import Any

from cloudseed.provider.registry.events import Event, EventError, parse_time
from cloudseed.provider.server.engine.http import Response

JSON = "application/json"
_FIELDS = ("kind", "not_before", "not_after", "duration_seconds", "details", "event_id", "state")


def _json(status: int, value: Any) -> Response:
    return Response(status, json.dumps(value, indent=1) + "\n", JSON)


def shown(event: Event, now: float) -> dict:
    return {**event.to_dict(), "phase": event.phase(now)}


def times(body: dict, start_default: Any = None) -> dict:
    """``not_before``/``not_after`` of a request body, ``duration_seconds`` turned into ``not_after``."""
    out: dict[str, Any] = {}
    now = time.time()
    if "not_before" in body or start_default is not None:
        out["not_before"] = parse_time(body.get("not_before", start_default), "not_before", now)
    if "duration_seconds" in body:
        if "not_after" in body:
            raise EventError("duration_seconds", "give not_after or duration_seconds, not both")
        duration = body["duration_seconds"]
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration <= 0:
            raise EventError("duration_seconds", "must be a positive number of seconds")
        if "not_before" not in out:
            raise EventError("duration_seconds", "needs not_before")
        out["not_after"] = out["not_before"] + duration
    elif "not_after" in body:
        out["not_after"] = parse_time(body["not_after"], "not_after", now) if body["not_after"] is not None else None
    return out


async def handle(app: Any, request: Any, instance_id: str, rest: list[str], body: Any) -> Response:
    """``rest``: the path after ``/v1/instances/ID/events``; ``body()`` reads the JSON body."""
    registry, cache = app.registry, app.cache
    method = request.method
    now = time.time()
    try:
        if not rest:
            if method in ("GET", "HEAD"):
                if await cache.run(registry.get, instance_id) is None:
                    return _error(404, f"no instance {instance_id}", "instance_id")
                events = await cache.run(registry.events, instance_id)
                return _json(200, {"events": [shown(e, now) for e in events]})
            if method == "POST":
                fields = body()
                for key in fields:
                    if key not in _FIELDS:
                        raise EventError(key, f"unknown field (known: {', '.join(_FIELDS)})")
                if "kind" not in fields:
                    raise EventError("kind", "is required")
                when = times(fields, start_default=now)
                event = await cache.run(lambda: registry.add_event(
                    instance_id, fields["kind"], when["not_before"], when.get("not_after"), fields.get("details"),
                    fields.get("event_id"), fields.get("state", "scheduled")))
                cache.invalidate([instance_id])
                return _json(201, shown(event, now))
            return _not_allowed("GET, HEAD, POST")
        if len(rest) != 1:
            return _error(404, f"no such endpoint {request.path}")
        event_id = rest[0]
        if method in ("GET", "HEAD"):
            event = await cache.run(registry.get_event, instance_id, event_id)
            if event is None:
                return _error(404, f"instance {instance_id} has no event {event_id}", "event_id")
            return _json(200, shown(event, now))
        if method == "PATCH":
            fields = body()
            for key in fields:
                if key not in ("state", "not_before", "not_after", "duration_seconds", "details"):
                    raise EventError(key, "cannot be changed (state, not_before, not_after, duration_seconds, "
                                          "details can)")
            changes = {k: v for k, v in fields.items() if k in ("state", "details")}
            if "duration_seconds" in fields and "not_before" not in fields:
                current = await cache.run(registry.get_event, instance_id, event_id)
                if current is None:
                    return _error(404, f"instance {instance_id} has no event {event_id}", "event_id")
                fields = {**fields, "not_before": current.not_before}
            changes.update(times(fields))
            event = await cache.run(lambda: registry.update_event(instance_id, event_id, **changes))
            cache.invalidate([instance_id])
            return _json(200, shown(event, now))
        if method == "DELETE":
            if not await cache.run(registry.delete_event, instance_id, event_id):
                return _error(404, f"instance {instance_id} has no event {event_id}", "event_id")
            cache.invalidate([instance_id])
            return Response(204, b"", JSON)
        return _not_allowed("GET, HEAD, PATCH, DELETE")
    except EventError as error:
        return _error(error.status, error.message, error.field)


def _error(status: int, message: str, field: str = "") -> Response:
    body: dict[str, Any] = {"error": message}
    if field:
        body["field"] = field
    return Response(status, json.dumps(body) + "\n", JSON)


def _not_allowed(allow: str) -> Response:
    return Response(405, json.dumps({"error": f"method not allowed; use {allow}"}) + "\n", JSON,
                    [("Allow", allow)])
