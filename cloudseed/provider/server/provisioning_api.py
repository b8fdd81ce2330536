"""``POST /cloudseed/v1/events`` on the metadata listeners: an instance reports its own boot.

The instance is identified like every other metadata request (its address, or a trusted proxy's
signed header; the IMDSv2 token rules apply first, in ``MetadataApp._routed``), and only ever
reports for itself. The body is one event in cloud-init's reporting format, a list of them, or
``{"events": [...]}`` (``registry/provisioning.py``): so cloud-init's own ``webhook`` handler
pointed here works, and cloudseed's ``cloudseed`` handler posts batches. Bounds: the body is at
most ``MAX_BODY`` bytes and ``MAX_EVENTS_PER_POST`` events, and each instance may report at most
``RATE`` events a second (bursts of ``BURST``) in this process; past that a 429 with
``Retry-After``. ``GET`` answers the instance's own provisioning state (what the platform has
recorded about it). Answers are JSON: ``{"accepted": N, "state": "provisioning"}``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from cloudseed.provider.registry.provisioning import ReportError, parse_post
from cloudseed.provider.server.engine.http import Response, text_error

PATH = "/cloudseed/v1/events"
STATE_PATH = "/cloudseed/v1/provisioning"
MAX_BODY = 64 * 1024
RATE = 50.0            # events per second and instance, in one server process
BURST = 1000.0         # a whole boot's events at once (about 2 per module and stage) fits
MAX_BUCKETS = 100_000
_buckets: dict[str, tuple[float, float]] = {}   # instance id -> (tokens left, when)


def _take(instance_id: str, count: int, now: float) -> float:
    """Seconds to wait before ``count`` more events are accepted (0: take them now)."""
    tokens, when = _buckets.get(instance_id, (BURST, now))
    tokens = min(BURST, tokens + (now - when) * RATE)
    if tokens < count:
        return max(0.1, (count - tokens) / RATE)
    if instance_id not in _buckets and len(_buckets) >= MAX_BUCKETS:
        _buckets.clear()  # bounded: forgetting spends nobody's budget
    _buckets[instance_id] = (tokens - count, now)
    return 0.0


def _json(status: int, value: Any, headers: Any = None) -> Response:
    return Response(status, json.dumps(value) + "\n", "application/json", headers)


def handle(app: Any, request: Any, instance: Any) -> Any:
    path = request.path.rstrip("/")
    instance_id = instance.record.instance_id
    if path == STATE_PATH:
        if request.method not in ("GET", "HEAD"):
            return text_error(405, "method not allowed; use GET, HEAD", [("Allow", "GET, HEAD")])
        return _own_state(app, instance_id)
    if path != PATH:
        return text_error(404, "not found")
    if request.method != "POST":
        return text_error(405, "method not allowed; use POST", [("Allow", "POST")])
    if len(request.body) > MAX_BODY:
        return text_error(413, f"report is {len(request.body)} bytes, the limit is {MAX_BODY}")
    content_type = request.headers.get("content-type", "application/json")
    if "json" not in content_type:
        return text_error(400, f"reports are JSON (Content-Type application/json), not {content_type}")
    try:
        events = parse_post(request.body)
    except ReportError as error:
        return _json(error.status, {"error": error.message, "field": error.field})
    wait = _take(instance_id, len(events), time.monotonic())
    if wait:
        seconds = str(int(wait) + 1)
        return _json(429, {"error": f"at most {RATE:g} events/s per instance (bursts of {BURST:g}); "
                                    f"retry after {seconds}s"}, [("Retry-After", seconds)])
    return _store(app, instance_id, events)


async def _store(app: Any, instance_id: str, events: list) -> Response:
    try:
        state, last = await app.cache.run(app.registry.add_reports, instance_id, events)
    except ReportError as error:
        return _json(error.status, {"error": error.message, "field": error.field})
    return _json(200, {"accepted": len(events), "state": state["state"], "seq": last})


async def _own_state(app: Any, instance_id: str) -> Response:
    state = await app.cache.run(app.registry.provisioning, instance_id)
    if state is None:
        return text_error(404, "no instance is registered for this address")
    return _json(200, {k: state[k] for k in ("state", "times", "boot", "failure", "datasource")})
