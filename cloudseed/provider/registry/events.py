"""Events on a timeline: what an operator schedules for an instance, stored in the registry.

An event is something that happens to an instance at a time: a spot interruption, a scheduled
reboot, an Auto Scaling lifecycle change, a fault to rehearse against. Each cloud's API shows
the events of the asking instance in its own words, at the right time: nothing here knows a
path. Stored in the ``events`` table (SQLite and PostgreSQL alike, schema version 3); every write
logs a change for the instance, so every server of one registry drops its cached copy and sees
the new timeline within the change feed's delay, and a restart keeps them.

The read interface (what the metadata APIs use; ``InstanceCache`` loads an instance's events with
its record, as ``CachedInstance.events``, a tuple of ``Event`` ordered by ``not_before``)::

    Event.event_id        str, unique in the registry (a UUID unless the operator named it)
    Event.instance_id     str
    Event.kind            one of KINDS (below)
    Event.not_before      float, epoch seconds: when it starts (for ``preempt``: the interruption)
    Event.not_after       float | None: when it ends (None: it does not end by itself)
    Event.state           "scheduled" | "canceled" | "completed" (what the operator said)
    Event.details         dict, per kind (DETAILS below; validated, defaults filled in)
    Event.created_at      float, epoch seconds
    Event.revision        int, 1 at creation, +1 at every change (Azure's DocumentIncarnation
                          can be built from the revisions and the phases)
    Event.acknowledged_at float | None: when the guest acknowledged it (Azure StartRequests)
    Event.phase(now)      "pending" (before not_before), "active", "over" (after not_after,
                          or canceled/completed)
    next_change(events, now) -> float | None: the next moment any event's phase changes (a
                          long poll such as GCE's wait_for_change wakes then)
    timeline(instance_id) -> (events, retired): the events and ``retired``, read in one statement
                          (one moment): the sum over the instance's deleted events of
                          RETIRED_WEIGHT x (revision + 1), kept in the settings row
                          ``events_retired/<instance id>``, so that a number built from the
                          revisions and phases (Azure's DocumentIncarnation) can stay monotonic
                          when an operator deletes an event

Writes (registry methods, each validated, each logged in the change feed): ``add_event(instance_id,
kind, not_before, not_after=None, details=None, event_id=None)``, ``events(instance_id)``,
``get_event(instance_id, event_id)``, ``update_event(instance_id, event_id, state=..., not_before=...,
not_after=..., details=...)``, ``acknowledge_event(instance_id, event_id, when)`` and
``delete_event(instance_id, event_id)``; deleting an instance deletes its events
(and its ``events_retired`` row).

Kinds and which cloud shows what (the EC2 side is ``provider/server/apis/_ec2_events.py``; Azure's
scheduled events and GCE's ``maintenance-event``/``preempted`` read the same events):

============  =====================================================================================
kind          meaning; EC2 / Azure / GCE
============  =====================================================================================
preempt       spot interruption at ``not_before`` (notice ``notice_seconds`` before, default 120);
              EC2 ``spot/instance-action`` and ``termination-time``; Azure ``Preempt``; GCE
              ``preempted``
rebalance     EC2 ``events/recommendations/rebalance`` from ``not_before``
maintenance   EC2 ``events/maintenance/scheduled`` (then ``history``) with ``code``; GCE
              ``maintenance-event`` MIGRATE_ON_HOST_MAINTENANCE
reboot        Azure ``Reboot``; EC2 maintenance ``instance-reboot``
redeploy      Azure ``Redeploy``; EC2 maintenance ``system-maintenance``; GCE MIGRATE_ON_HOST_MAINTENANCE
freeze        Azure ``Freeze``; GCE MIGRATE_ON_HOST_MAINTENANCE
terminate     Azure ``Terminate``; EC2 maintenance ``instance-retirement``; GCE
              TERMINATE_ON_HOST_MAINTENANCE
lifecycle     EC2 ``autoscaling/target-lifecycle-state`` becomes ``details.state`` at ``not_before``
fault         any API: requests whose path starts with ``details.path_prefix`` answer
              ``details.status`` (5xx) and/or only after ``details.delay_seconds``, from
              ``not_before`` to ``not_after``
============  =====================================================================================
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from typing import Any, Iterable, Optional

from cloudseed.provider.registry.errors import RegistryError

STATES = ("scheduled", "canceled", "completed")
EC2_CODES = ("instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop")
SPOT_ACTIONS = ("terminate", "stop", "hibernate")
# Auto Scaling's target lifecycle states (its documentation's steady states)
LIFECYCLE_STATES = ("InService", "Terminated", "Detached", "Standby", "Warmed:Hibernated", "Warmed:Running",
                    "Warmed:Stopped", "Warmed:Terminated")
AZURE_SOURCES = ("Platform", "User")
MAX_EVENTS_PER_INSTANCE = 100
RETIRED_SETTING = "events_retired/"  # + instance id: what the instance's deleted events weighed
MAX_TIMELINES = 256  # timelines read in one statement (SQLite takes at most 500 SELECTs in a compound one)
RETIRED_WEIGHT = 4  # more than the phases (shown, started, over) an event can add beyond its revisions
MAX_DESCRIPTION = 255

# kind -> {detail: (type, default)}; a default of ... means required
DETAILS: dict[str, dict[str, tuple[type, Any]]] = {
    "preempt": {"action": (str, "terminate"), "notice_seconds": (int, 120)},
    "rebalance": {},
    "maintenance": {"code": (str, "system-reboot"), "description": (str, "scheduled maintenance")},
    "reboot": {"description": (str, "Virtual machine is going to be restarted"), "duration_seconds": (int, -1),
               "source": (str, "Platform")},
    "redeploy": {"description": (str, "Virtual machine is being moved to another host"), "duration_seconds": (int, -1),
                 "source": (str, "Platform")},
    "freeze": {"description": (str, "Virtual machine is being paused for a host update"), "duration_seconds": (int, 9),
               "source": (str, "Platform")},
    "terminate": {"description": (str, "Virtual machine is being deleted"), "duration_seconds": (int, -1),
                  "source": (str, "User")},
    "lifecycle": {"state": (str, ...)},
    "fault": {"path_prefix": (str, ...), "status": (int, 0), "delay_seconds": (float, 0.0)},
}
KINDS = tuple(DETAILS)


class EventError(ValueError):
    """An event that cannot be stored; ``field`` names where (``details.status``)."""

    def __init__(self, field: str, message: str, status: int = 400):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.status = status


@dataclasses.dataclass(frozen=True)
class Event:
    event_id: str
    instance_id: str
    kind: str
    not_before: float
    not_after: Optional[float] = None
    state: str = "scheduled"
    details: dict = dataclasses.field(default_factory=dict)
    created_at: float = 0.0
    revision: int = 1
    acknowledged_at: Optional[float] = None

    def phase(self, now: float) -> str:
        if self.state != "scheduled" or (self.not_after is not None and now >= self.not_after):
            return "over"
        return "active" if now >= self.not_before else "pending"

    def to_dict(self) -> dict:
        """JSON form (admin API, CLI): times as UTC text and as epoch seconds."""
        out = dataclasses.asdict(self)
        out["not_before_utc"] = utc(self.not_before)
        out["not_after_utc"] = utc(self.not_after) if self.not_after is not None else None
        return out


def next_change(events: Iterable[Event], now: float) -> Optional[float]:
    """The next moment after ``now`` at which some event's phase (or notice) changes."""
    moments = []
    for event in events:
        if event.state != "scheduled":
            continue
        moments.extend(t for t in (event.not_before, event.not_after) if t is not None)
        if event.kind == "preempt":
            moments.append(event.not_before - event.details.get("notice_seconds", 120))
    later = [t for t in moments if t > now]
    return min(later) if later else None


def utc(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def parse_time(value: Any, where: str, now: Optional[float] = None) -> float:
    """Epoch seconds from a number, ``2026-11-24T21:00:00Z`` or ``+SECONDS`` (from ``now``)."""
    if isinstance(value, bool) or value is None:
        raise EventError(where, "must be a time: 2026-11-24T21:00:00Z, +SECONDS or epoch seconds")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("+"):
            try:
                return (time.time() if now is None else now) + float(text[1:])
            except ValueError:
                pass
        else:
            import calendar

            try:
                return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
            except ValueError:
                pass
    raise EventError(where, f"{value!r} is not a time like 2026-11-24T21:00:00Z, +SECONDS or epoch seconds")


def validate(kind: Any, not_before: Any, not_after: Any, details: Any, state: Any = "scheduled",
             now: Optional[float] = None) -> tuple[str, float, Optional[float], dict, str]:
    """Checked and normalised fields of an event (defaults filled in); ``EventError`` naming the first bad one."""
    if kind not in DETAILS:
        raise EventError("kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    start = parse_time(not_before, "not_before", now)
    end = parse_time(not_after, "not_after", now) if not_after is not None else None
    if end is not None and end <= start:
        raise EventError("not_after", "must be later than not_before")
    if state not in STATES:
        raise EventError("state", f"{state!r} is not one of {', '.join(STATES)}")
    if details is None:
        details = {}
    if not isinstance(details, dict):
        raise EventError("details", "must be an object")
    spec = DETAILS[kind]
    clean: dict[str, Any] = {}
    for key in details:
        if key not in spec:
            raise EventError(f"details.{key}", f"unknown for a {kind} event (known: {', '.join(spec) or 'none'})")
    for key, (kind_type, default) in spec.items():
        value = details.get(key, default)
        if value is ...:
            raise EventError(f"details.{key}", f"is required for a {kind} event")
        if kind_type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, kind_type):
            raise EventError(f"details.{key}", f"must be {'a number' if kind_type is not str else 'a string'}")
        clean[key] = value
    _check_details(kind, clean, end)
    return kind, start, end, clean, state


def _check_details(kind: str, details: dict, end: Optional[float]) -> None:
    if kind == "preempt":
        _choice("details.action", details["action"], SPOT_ACTIONS)
        if not 0 <= details["notice_seconds"] <= 86400:
            raise EventError("details.notice_seconds", "must be 0-86400")
    elif kind == "maintenance":
        _choice("details.code", details["code"], EC2_CODES)
    elif kind == "lifecycle":
        _choice("details.state", details["state"], LIFECYCLE_STATES)
    elif kind == "fault":
        prefix = details["path_prefix"]
        if not prefix.startswith("/") or len(prefix) > 1024:
            raise EventError("details.path_prefix", "must be a path starting with '/' (at most 1,024 characters)")
        if details["status"] and not 500 <= details["status"] <= 599:
            raise EventError("details.status", "must be a 5xx status (or 0: answer normally, only late)")
        if not 0 <= details["delay_seconds"] <= 300:
            raise EventError("details.delay_seconds", "must be 0-300")
        if not details["status"] and not details["delay_seconds"]:
            raise EventError("details", "a fault needs a status (5xx), a delay_seconds, or both")
        if end is None:
            raise EventError("not_after", "a fault needs an end (not_after, or a duration)")
    if kind in ("reboot", "redeploy", "freeze", "terminate"):
        _choice("details.source", details["source"], AZURE_SOURCES)
        if details["duration_seconds"] < -1:
            raise EventError("details.duration_seconds", "must be -1 (unknown) or more")
    description = details.get("description")
    if description is not None and len(description) > MAX_DESCRIPTION:
        raise EventError("details.description", f"is longer than {MAX_DESCRIPTION} characters")


def _choice(where: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise EventError(where, f"{value!r} must be one of {', '.join(choices)}")


class EventStore:
    """The registry's event methods (mixed into ``SQLRegistry``; they use its connection, lock and
    change feed: ``_lock``, ``_transaction``, ``_cursor``, ``_sql``, ``_serialise_changes``,
    ``_log_change``, ``_notify``)."""

    _lock: Any

    _COLUMNS = "event_id, instance_id, kind, not_before, not_after, state, details, created_at, revision, " \
               "acknowledged_at"

    def _events_schema(self) -> list[str]:
        return [
            """CREATE TABLE IF NOT EXISTS events (event_id TEXT PRIMARY KEY, instance_id TEXT NOT NULL,
                kind TEXT NOT NULL, not_before DOUBLE PRECISION NOT NULL, not_after DOUBLE PRECISION,
                state TEXT NOT NULL, details TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
                revision INTEGER NOT NULL, acknowledged_at DOUBLE PRECISION)""",
            "CREATE INDEX IF NOT EXISTS events_by_instance ON events (instance_id)",
        ]

    def events(self, instance_id: str) -> list[Event]:
        """Every event of ``instance_id`` (any state), ordered by start time."""
        with self._cursor() as cur:
            cur.execute(self._sql(f"SELECT {self._COLUMNS} FROM events WHERE instance_id = ? "
                                  "ORDER BY not_before, event_id"), (instance_id,))
            return [_event(row) for row in cur.fetchall()]

    def timeline(self, instance_id: str) -> tuple[list[Event], int]:
        """``events(instance_id)`` and what its deleted events weighed (``retired``), in one statement."""
        with self._cursor() as cur:
            columns = ", ".join(f"e.{name.strip()}" for name in self._COLUMNS.split(","))
            cur.execute(self._sql(f"SELECT s.value, {columns} FROM (SELECT 1 AS one) AS one "
                                  "LEFT JOIN settings s ON s.name = ? LEFT JOIN events e ON e.instance_id = ? "
                                  "ORDER BY e.not_before, e.event_id"), (RETIRED_SETTING + instance_id, instance_id))
            rows = cur.fetchall()
        retired = int(rows[0][0]) if rows and rows[0][0] is not None else 0
        return [_event(row[1:]) for row in rows if row[1] is not None], retired

    def timelines(self, instance_ids: list[str]) -> dict[str, tuple[list[Event], int]]:
        """``timeline`` of many instances: id -> (events, retired). Each instance's events and
        retired weight still come from one statement (one moment), MAX_TIMELINES instances a statement."""
        columns = ", ".join(f"e.{name.strip()}" for name in self._COLUMNS.split(","))
        found: dict[str, tuple[list[Event], int]] = {}
        for start in range(0, len(instance_ids), MAX_TIMELINES):
            chunk = instance_ids[start:start + MAX_TIMELINES]
            # the ids as a table: a compound SELECT, which SQLite and PostgreSQL both read alike
            ids = " UNION ALL ".join(["SELECT CAST(? AS TEXT) AS id"] * len(chunk))
            with self._cursor() as cur:
                cur.execute(self._sql(f"SELECT i.id, s.value, {columns} FROM ({ids}) AS i LEFT JOIN settings s "
                                      "ON s.name = CAST(? AS TEXT) || i.id LEFT JOIN events e ON e.instance_id = i.id "
                                      "ORDER BY i.id, e.not_before, e.event_id"), [*chunk, RETIRED_SETTING])
                rows = cur.fetchall()
            for row in rows:
                events, _ = found.setdefault(row[0], ([], int(row[1]) if row[1] is not None else 0))
                if row[2] is not None:
                    events.append(_event(row[2:]))
        return found

    def get_event(self, instance_id: str, event_id: str) -> Optional[Event]:
        with self._cursor() as cur:
            cur.execute(self._sql(f"SELECT {self._COLUMNS} FROM events WHERE instance_id = ? AND event_id = ?"),
                        (instance_id, event_id))
            row = cur.fetchone()
        return _event(row) if row else None

    def add_event(self, instance_id: str, kind: str, not_before: Any, not_after: Any = None,
                  details: Optional[dict] = None, event_id: Optional[str] = None, state: str = "scheduled") -> Event:
        """Store a new event of an existing instance; ``EventError`` for bad fields, a
        ``RegistryError`` (404) for an unknown instance, (409) for an id in use."""
        kind, start, end, clean, state = validate(kind, not_before, not_after, details, state)
        event_id = event_id or str(uuid.uuid4())
        if not isinstance(event_id, str) or not 1 <= len(event_id) <= 128 or not all(
                c.isalnum() or c in "-_.:" for c in event_id):
            raise EventError("event_id", f"{event_id!r} must be 1-128 letters, digits, '-', '_', '.' or ':'")
        now = time.time()
        event = Event(event_id, instance_id, kind, start, end, state, clean, now, 1, None)
        with self._lock, self._transaction() as cur:
            self._serialise_changes(cur)
            cur.execute(self._sql("SELECT 1 FROM instances WHERE instance_id = ?"), (instance_id,))
            if cur.fetchone() is None:
                raise RegistryError(f"no instance {instance_id}", "instance_id", 404)
            cur.execute(self._sql("SELECT COUNT(*), SUM(CASE WHEN event_id = ? THEN 1 ELSE 0 END) FROM events "
                                  "WHERE instance_id = ?"), (event_id, instance_id))
            count, same = cur.fetchone()
            if same:
                raise RegistryError(f"event {event_id} already exists", "event_id", 409)
            if count >= MAX_EVENTS_PER_INSTANCE:
                raise RegistryError(f"instance {instance_id} has {count} events, the limit is "
                                    f"{MAX_EVENTS_PER_INSTANCE}: delete old ones first", "event_id", 409)
            cur.execute(self._sql(f"INSERT INTO events ({self._COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                        _row(event))
            self._log_change(cur, instance_id)
            self._notify(cur)
        return event

    def update_event(self, instance_id: str, event_id: str, **changes: Any) -> Event:
        """Change ``state``, ``not_before``, ``not_after`` or ``details`` (validated as a whole)."""
        for key in changes:
            if key not in ("state", "not_before", "not_after", "details"):
                raise EventError(key, "cannot be changed (state, not_before, not_after, details can)")
        with self._lock, self._transaction() as cur:
            self._serialise_changes(cur)
            current = self._locked_event(cur, instance_id, event_id)
            if current is None:
                raise RegistryError(f"instance {instance_id} has no event {event_id}", "event_id", 404)
            merged = {"not_before": current.not_before, "not_after": current.not_after,
                      "details": current.details, "state": current.state, **changes}
            kind, start, end, clean, state = validate(current.kind, merged["not_before"], merged["not_after"],
                                                      merged["details"], merged["state"])
            event = dataclasses.replace(current, not_before=start, not_after=end, details=clean, state=state,
                                        revision=current.revision + 1)
            self._rewrite(cur, event)
        return event

    def acknowledge_event(self, instance_id: str, event_id: str, when: Optional[float] = None) -> Optional[Event]:
        """Record that the guest acknowledged the event (Azure ``StartRequests``); None if unknown."""
        with self._lock, self._transaction() as cur:
            self._serialise_changes(cur)
            current = self._locked_event(cur, instance_id, event_id)
            if current is None:
                return None
            event = dataclasses.replace(current, acknowledged_at=time.time() if when is None else when,
                                        revision=current.revision + 1)
            self._rewrite(cur, event)
        return event

    def delete_event(self, instance_id: str, event_id: str) -> bool:
        """Remove the event; its weight (``RETIRED_WEIGHT`` x (revision + 1)) joins the instance's ``retired``."""
        with self._lock, self._transaction() as cur:
            self._serialise_changes(cur)  # every write waits here: the read-then-write below is safe
            current = self._locked_event(cur, instance_id, event_id)
            if current is None:
                return False
            cur.execute(self._sql("DELETE FROM events WHERE instance_id = ? AND event_id = ?"),
                        (instance_id, event_id))
            name = RETIRED_SETTING + instance_id
            cur.execute(self._sql("SELECT value FROM settings WHERE name = ?"), (name,))
            row = cur.fetchone()
            weight = str((int(row[0]) if row else 0) + RETIRED_WEIGHT * (current.revision + 1))
            if row:
                cur.execute(self._sql("UPDATE settings SET value = ? WHERE name = ?"), (weight, name))
            else:
                cur.execute(self._sql("INSERT INTO settings (name, value) VALUES (?, ?)"), (name, weight))
            self._log_change(cur, instance_id)
            self._notify(cur)
        return True

    def _locked_event(self, cur: Any, instance_id: str, event_id: str) -> Optional[Event]:
        cur.execute(self._sql(f"SELECT {self._COLUMNS} FROM events WHERE instance_id = ? AND event_id = ?"),
                    (instance_id, event_id))
        row = cur.fetchone()
        return _event(row) if row else None

    def _rewrite(self, cur: Any, event: Event) -> None:
        cur.execute(self._sql("UPDATE events SET not_before = ?, not_after = ?, state = ?, details = ?, "
                              "revision = ?, acknowledged_at = ? WHERE event_id = ?"),
                    (event.not_before, event.not_after, event.state, json.dumps(event.details, sort_keys=True),
                     event.revision, event.acknowledged_at, event.event_id))
        self._log_change(cur, event.instance_id)
        self._notify(cur)


def _row(event: Event) -> tuple:
    return (event.event_id, event.instance_id, event.kind, event.not_before, event.not_after, event.state,
            json.dumps(event.details, sort_keys=True), event.created_at, event.revision, event.acknowledged_at)


def _event(row: Any) -> Event:
    event_id, instance_id, kind, start, end, state, details, created, revision, acked = row
    return Event(event_id, instance_id, kind, float(start), float(end) if end is not None else None, state,
                 json.loads(details), float(created), int(revision), float(acked) if acked is not None else None)
