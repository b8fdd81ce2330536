"""Azure's scheduled events (``/metadata/scheduledevents``) from the instance's timeline
(``registry/events.py``: the events an operator scheduled, loaded with the instance).

Kinds ``reboot``, ``redeploy``, ``freeze``, ``preempt`` and ``terminate`` are Azure's ``Reboot``,
``Redeploy``, ``Freeze``, ``Preempt`` and ``Terminate``. An event shows from when it is scheduled
(a ``preempt`` from ``notice_seconds`` before it) as ``Scheduled`` with its ``NotBefore``, then
``Started`` once its time has come or the guest approved it, and goes once it is over. The
fields follow the api-version asked, as Azure's: ``Preempt`` from 2017-11-01, ``Terminate`` from
2019-01-01, ``Description`` from 2019-04-01, ``EventSource`` from 2019-08-01,
``DurationInSeconds`` from 2020-07-01.

``DocumentIncarnation`` grows with every change of the document and never goes down: it is the
sum, over the instance's events, of 4 x revision plus the phases each has entered (shown,
started, over: at most 3), plus what the instance's deleted events weighed (``retired``, 4 x
(revision + 1) each, kept by the registry). Time only adds phases; a change of an event adds 4
to its revision term, more than the phases it can take back (an event moved later is
``Scheduled`` again); a deletion adds more to ``retired`` than the event counted. Every server
of the registry answers the same number at the same moment.

``POST`` with ``{"StartRequests": [{"EventId": ...}]}`` approves events; the registry records
the approval (``acknowledge_event``) and the next read shows them ``Started``. An id that is not
one of the instance's events is a 400.
"""

from __future__ import annotations

import email.utils
import json
from typing import Any, Iterable

from cloudseed.provider.registry.events import RETIRED_WEIGHT
from cloudseed.provider.server.engine.http import Response

VERSIONS = ("2017-03-01", "2017-08-01", "2017-11-01", "2019-01-01", "2019-04-01", "2019-08-01", "2020-07-01")
TYPES = {"reboot": "Reboot", "redeploy": "Redeploy", "freeze": "Freeze", "preempt": "Preempt",
         "terminate": "Terminate"}
SINCE = {"Preempt": "2017-11-01", "Terminate": "2019-01-01"}
JSON = "application/json; charset=utf-8"
MAX_BODY = 16 * 1024


def _shown_from(event: Any) -> float:
    if event.kind == "preempt":
        return event.not_before - event.details.get("notice_seconds", 120)
    return event.created_at or event.not_before


def _started(event: Any, now: float) -> bool:
    return now >= event.not_before or event.acknowledged_at is not None


def incarnation(events: Iterable[Any], now: float, retired: int = 0) -> int:
    total = retired
    for event in events:
        if event.kind not in TYPES:
            continue
        total += RETIRED_WEIGHT * event.revision
        total += now >= _shown_from(event)
        total += _started(event, now)
        total += event.phase(now) == "over"
    return total


def document(record: Any, events: Iterable[Any], version: str, now: float, retired: int = 0) -> dict:
    events = [e for e in events if e.kind in TYPES]
    shown = []
    for event in events:
        kind = TYPES[event.kind]
        if version < SINCE.get(kind, "") or event.phase(now) == "over" or now < _shown_from(event):
            continue
        started = _started(event, now)
        item: dict[str, Any] = {
            "EventId": event.event_id, "EventStatus": "Started" if started else "Scheduled", "EventType": kind,
            "ResourceType": "VirtualMachine", "Resources": [record.name or record.hostname or record.instance_id],
            "NotBefore": "" if started else email.utils.formatdate(event.not_before, usegmt=True)}
        if version >= "2019-04-01":
            item["Description"] = event.details.get("description", "")
        if version >= "2019-08-01":
            item["EventSource"] = event.details.get("source", "Platform")
        if version >= "2020-07-01":
            item["DurationInSeconds"] = event.details.get("duration_seconds", -1)
        shown.append(item)
    return {"DocumentIncarnation": incarnation(events, now, retired), "Events": shown}


def answer(record: Any, events: Iterable[Any], version: str, now: float, retired: int = 0) -> Response:
    return Response(200, json.dumps(document(record, events, version, now, retired)), JSON)


def start_requests(body: bytes, events: Iterable[Any]) -> list[str] | Response:
    """The event ids a POST approves, or the 400 to answer."""
    def bad(message: str) -> Response:
        return Response(400, json.dumps({"error": f"Bad request. {message}"}), JSON)

    if len(body) > MAX_BODY:
        return bad(f"the body is over {MAX_BODY} bytes")
    try:
        requests = json.loads(body or b"{}").get("StartRequests")
    except (ValueError, AttributeError):
        return bad("the body must be JSON {\"StartRequests\": [{\"EventId\": ...}]}")
    if not isinstance(requests, list) or not all(isinstance(r, dict) and isinstance(r.get("EventId"), str)
                                                 for r in requests):
        return bad("StartRequests must be a list of {\"EventId\": ...}")
    known = {e.event_id for e in events if e.kind in TYPES}
    ids = [r["EventId"] for r in requests]
    unknown = [i for i in ids if i not in known]
    if unknown:
        return bad(f"no scheduled event {unknown[0][:64]!r} for this virtual machine")
    return ids
