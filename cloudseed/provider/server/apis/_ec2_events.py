"""The instance's timeline (``registry/events.py``) on EC2's paths, at the time of each request.

``overlay(tree, events, version, now)`` is the ``meta-data/`` tree of ``version`` with the
timeline applied at ``now``:

* ``spot/instance-action`` (``{"action": ..., "time": ...}``, from 2018-03-28) and
  ``spot/termination-time``: from ``notice_seconds`` (default 120, as AWS's two-minute warning)
  before a ``preempt`` event's ``not_before``, which is the interruption time shown;
* ``events/maintenance/scheduled``: ``maintenance`` (its ``code``), ``reboot``
  (``instance-reboot``), ``redeploy`` (``system-maintenance``) and ``terminate``
  (``instance-retirement``) events that are scheduled and not over, ``State: active``; once over
  (past ``not_after``) or completed they move to ``history`` (``completed``), canceled ones
  there as ``canceled``; the record's static ``ec2.events`` stay where they are;
* ``events/recommendations/rebalance`` (``{"noticeTime": ...}``) from a ``rebalance`` event's
  ``not_before``;
* ``autoscaling/target-lifecycle-state``: the ``details.state`` of the latest ``lifecycle``
  event that has started (before any, the record's ``ec2.target_lifecycle_state``).

Only paths under these categories, and the ``meta-data/`` listing, depend on the time; the
service renders them per request for an instance that has a timeline (``ec2.render``).
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable

from cloudseed.provider.instance_data.ec2 import has, maintenance_document, maintenance_documents
from cloudseed.provider.registry.events import Event

CATEGORIES = ("spot", "events", "autoscaling")
MAINTENANCE_CODES = {"reboot": "instance-reboot", "redeploy": "system-maintenance",
                     "terminate": "instance-retirement"}


def iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def overlay(tree: dict, record: Any, events: Iterable[Event], version: str, now: float) -> dict:
    """A shallow copy of ``tree`` with the categories the timeline decides at ``now``."""
    events = list(events)
    out = dict(tree)
    spot = _spot(events, now)
    if spot is not None and has(version, "spot"):
        leaves: dict[str, Any] = {"termination-time": iso(spot.not_before)}
        if version >= "2018-03-28":
            leaves["instance-action"] = json.dumps({"action": spot.details["action"], "time": iso(spot.not_before)})
        out["spot"] = leaves
    if has(version, "events"):
        out["events"] = _events(record, events, version, now)
    state = _lifecycle(events, now)
    if state is not None and has(version, "autoscaling"):
        out["autoscaling"] = {"target-lifecycle-state": state}
    return out


def _spot(events: list[Event], now: float) -> Any:
    noticed = [e for e in events if e.kind == "preempt" and e.state == "scheduled"
               and now >= e.not_before - e.details.get("notice_seconds", 120)
               and (e.not_after is None or now < e.not_after)]
    return min(noticed, key=lambda e: e.not_before) if noticed else None


def _events(record: Any, events: list[Event], version: str, now: float) -> dict:
    scheduled, history = maintenance_documents(record.ec2.get("events", []))
    for event in events:
        code = event.details.get("code") if event.kind == "maintenance" else MAINTENANCE_CODES.get(event.kind)
        if code is None:
            continue
        over = event.phase(now) == "over"
        state = "canceled" if event.state == "canceled" else ("completed" if over else "active")
        doc = maintenance_document(code, event.details.get("description", "scheduled maintenance"),
                                   "instance-event-" + event.event_id.replace("-", "")[:17],
                                   iso(event.not_before), iso(event.not_after) if event.not_after else None, state)
        (history if state != "active" else scheduled).append(doc)
    out: dict[str, Any] = {"maintenance": {"scheduled": json.dumps(scheduled, indent=2),
                                           "history": json.dumps(history, indent=2)}}
    if has(version, "rebalance"):
        notices = [e.not_before for e in events if e.kind == "rebalance" and e.phase(now) == "active"]
        static = record.ec2.get("rebalance")
        if notices:
            out["recommendations"] = {"rebalance": json.dumps({"noticeTime": iso(min(notices))})}
        elif static:
            out["recommendations"] = {"rebalance": json.dumps({"noticeTime": static["notice_time"]})}
    return out


def _lifecycle(events: list[Event], now: float) -> Any:
    started = [e for e in events if e.kind == "lifecycle" and e.state == "scheduled" and e.not_before <= now]
    if not started:
        return None
    return max(started, key=lambda e: (e.not_before, e.created_at)).details["state"]
