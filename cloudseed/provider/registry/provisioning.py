"""Provisioning reports: what an instance's agent says about its own boot, and the state it implies.

Not the operator's timeline (``events.py``: spot interruptions, maintenance, faults scheduled *for*
an instance): these are reports *from* it, in cloud-init's reporting event format (what its
``webhook`` handler posts, and cloudseed's ``cloudseed`` handler too)::

    {"event_type": "start" | "finish", "name": "modules-final/config-scripts_user",
     "description": "...", "origin": "cloudinit", "timestamp": 1764200000.5,
     "result": "SUCCESS" | "WARN" | "FAIL", "duration": 0.031}        (result, duration: finish only)

cloudseed's agent adds ``boot_id`` (the kernel's boot id: which boot a report belongs to) and,
on a stage's finish, ``datasource``. Anything else an event carries (cloud-init's ``files``) is
dropped; strings are cut to ``MAX_NAME``/``MAX_DESCRIPTION`` characters.

Each instance has a provisioning state, derived from its reports as they arrive
(``advance``): ``pending`` (registered, nothing reported yet), ``provisioning`` (a boot
started), then ``done``, ``degraded`` (the final stage finished with warnings) or ``failed``
(any report with result ``FAIL``: at once, naming what failed and why), each with the time the
server received the report that caused it. A new boot (another ``boot_id``; without one, a new
``init-local`` start, or an ``init-network`` start after the boot had one or had ended) starts
again at ``provisioning``. The reports of an instance are kept in ``provisioning_reports`` (the
last ``MAX_REPORTS_KEPT``), the state in ``provisioning_state`` (schema version 4); neither
writes the change feed (reports are not instance data: no server's cache is dropped for them).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Optional

STATES = ("pending", "provisioning", "done", "degraded", "failed")
TERMINAL = ("done", "degraded", "failed")
RESULTS = ("SUCCESS", "WARN", "FAIL")
STAGES = ("init-local", "init-network", "modules-config", "modules-final")
MAX_NAME = 200
MAX_DESCRIPTION = 2000
MAX_ORIGIN = 64
MAX_BOOT_ID = 64
MAX_EVENTS_PER_POST = 200
MAX_REPORTS_KEPT = 2000      # per instance, oldest dropped first
MAX_PROBLEMS_KEPT = 20       # errors and warnings kept in the state, per boot
MAX_PROBLEM = 500
_FOUND = re.compile(r"found (?:local|network) data from (?:DataSource)?([A-Za-z0-9_]+)")


class ReportError(ValueError):
    """A report that cannot be taken: names the field (``events[3].timestamp``)."""

    def __init__(self, field: str, message: str, status: int = 400):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.status = status


def _text(value: Any, field: str, limit: int, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ReportError(field, f"must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise ReportError(field, "must not be empty")
    return value[:limit]


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
            float("inf"), float("-inf")):
        raise ReportError(field, f"must be a number, got {value!r}"[:200])
    return float(value)


def clean_event(raw: Any, where: str = "event") -> dict[str, Any]:
    """One report, checked and normalised (only the known fields kept); ``ReportError`` naming the field."""
    if not isinstance(raw, dict):
        raise ReportError(where, f"must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("event_type")
    if kind not in ("start", "finish"):
        raise ReportError(f"{where}.event_type", f"must be start or finish, got {kind!r}"[:200])
    out: dict[str, Any] = {
        "event_type": kind,
        "name": _text(raw.get("name"), f"{where}.name", MAX_NAME),
        "description": _text(raw.get("description", ""), f"{where}.description", MAX_DESCRIPTION, required=False),
        "origin": _text(raw.get("origin", "cloudinit"), f"{where}.origin", MAX_ORIGIN, required=False),
        "timestamp": _number(raw.get("timestamp"), f"{where}.timestamp"),
    }
    if kind == "finish":
        result = raw.get("result", "SUCCESS")
        if result not in RESULTS:
            raise ReportError(f"{where}.result", f"must be one of {', '.join(RESULTS)}, got {result!r}"[:200])
        out["result"] = result
        if raw.get("duration") is not None:
            duration = _number(raw["duration"], f"{where}.duration")
            if duration < 0:
                raise ReportError(f"{where}.duration", "must not be negative")
            out["duration"] = round(duration, 4)
    for key, limit in (("boot_id", MAX_BOOT_ID), ("datasource", MAX_NAME)):
        if raw.get(key) is not None:
            out[key] = _text(raw[key], f"{where}.{key}", limit)
    return out


def parse_post(body: bytes) -> list[dict[str, Any]]:
    """The events of one POST: one event object, ``{"events": [...]}`` or a JSON list."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise ReportError("(body)", f"is not JSON: {error}")
    if isinstance(data, dict) and "events" in data and "event_type" not in data:
        data = data["events"]
        where = "events"
    elif isinstance(data, list):
        where = "events"
    else:
        return [clean_event(data)]
    if not isinstance(data, list):
        raise ReportError(where, "must be a list of events")
    if not data:
        raise ReportError(where, "is empty")
    if len(data) > MAX_EVENTS_PER_POST:
        raise ReportError(where, f"{len(data)} events in one post; the limit is {MAX_EVENTS_PER_POST}", 413)
    return [clean_event(item, f"{where}[{i}]") for i, item in enumerate(data)]


def initial_state(instance_id: str, created_at: Optional[float]) -> dict[str, Any]:
    """The state of an instance nothing has been heard from."""
    return {"instance_id": instance_id, "state": "pending", "boot": 0, "boot_id": "",
            "times": {"pending": created_at} if created_at is not None else {}, "datasource": "",
            "failure": None, "errors": [], "warnings": [], "stages": [], "boot_started": None,
            "boot_finished": None, "boot_seconds": None, "last_report": None, "updated_at": None}


def _new_boot(state: dict[str, Any], event: dict[str, Any]) -> bool:
    if state["boot"] == 0:
        return True
    boot_id = event.get("boot_id")
    if boot_id and state["boot_id"]:
        return boot_id != state["boot_id"]
    if event["event_type"] != "start":
        return False
    if event["name"] == "init-local":
        return bool(state["stages"])
    if event["name"] == "init-network":
        return "init-network" in state["stages"] or state["state"] in TERMINAL
    return False


def _problem(event: dict[str, Any]) -> str:
    text = f"{event['name']}: {event['description']}" if event["description"] else event["name"]
    return text[:MAX_PROBLEM]


def advance(state: dict[str, Any], event: dict[str, Any], received: float) -> bool:
    """Apply one report to ``state`` (changed in place); True when it began a new boot."""
    new_boot = _new_boot(state, event)
    if new_boot:
        pending = state["times"].get("pending")
        state.update({"state": "provisioning", "boot": state["boot"] + 1, "boot_id": event.get("boot_id", ""),
                      "times": {**({"pending": pending} if pending is not None else {}), "provisioning": received},
                      "datasource": "", "failure": None, "errors": [], "warnings": [], "stages": [],
                      "boot_started": event["timestamp"], "boot_finished": None, "boot_seconds": None})
    elif event.get("boot_id") and not state["boot_id"]:
        state["boot_id"] = event["boot_id"]
    state["last_report"] = received
    name = event["name"]
    if event["event_type"] == "start" and name in STAGES and name not in state["stages"]:
        state["stages"].append(name)
    if event.get("datasource"):
        state["datasource"] = event["datasource"]
    elif not state["datasource"] and event["event_type"] == "finish":
        found = _FOUND.search(event["description"])
        if found:
            state["datasource"] = found.group(1)
    if event["event_type"] != "finish":
        return new_boot
    result = event["result"]
    if result == "FAIL":
        if len(state["errors"]) < MAX_PROBLEMS_KEPT:
            state["errors"].append(_problem(event))
        if state["state"] == "provisioning" or (state["state"] in ("done", "degraded") and state["failure"] is None):
            state["state"] = "failed"
            state["times"]["failed"] = received
            state["failure"] = {"name": name, "message": event["description"][:MAX_PROBLEM]}
    elif result == "WARN" and len(state["warnings"]) < MAX_PROBLEMS_KEPT:
        state["warnings"].append(_problem(event))
    if name == "modules-final":
        state["boot_finished"] = event["timestamp"]
        if state["boot_started"] is not None:
            state["boot_seconds"] = round(max(0.0, event["timestamp"] - state["boot_started"]), 3)
        if state["state"] == "provisioning":
            final = "degraded" if result == "WARN" or state["warnings"] else "done"
            state["state"] = final
            state["times"][final] = received
    return new_boot


def epoch_of(iso: str) -> Optional[float]:
    """``2026-11-24T21:00:00Z`` (the registry's created_at) as epoch seconds, or None."""
    import calendar

    try:
        return float(calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return None


class ProvisioningStore:
    """Registry methods for provisioning reports (mixed into ``SQLRegistry``; uses its ``_lock``,
    ``_transaction``, ``_cursor``, ``_sql``, ``serial_type`` and ``for_update``)."""

    for_update = ""  # PostgreSQL: " FOR UPDATE" (SQLite's writers are serialised anyway)

    def _provisioning_schema(self) -> list[str]:
        serial = self.serial_type  # type: ignore[attr-defined]
        return [
            f"""CREATE TABLE IF NOT EXISTS provisioning_reports (seq {serial}, instance_id TEXT NOT NULL,
                boot INTEGER NOT NULL, received_at DOUBLE PRECISION NOT NULL, event TEXT NOT NULL)""",
            "CREATE INDEX IF NOT EXISTS provisioning_reports_by_instance ON provisioning_reports (instance_id, seq)",
            """CREATE TABLE IF NOT EXISTS provisioning_state (instance_id TEXT PRIMARY KEY, state TEXT NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL, kept INTEGER NOT NULL, body TEXT NOT NULL)""",
            "CREATE INDEX IF NOT EXISTS provisioning_state_by_state ON provisioning_state (state)",
        ]

    def add_reports(self, instance_id: str, events: list[dict[str, Any]],
                    received: Optional[float] = None) -> tuple[dict[str, Any], int]:
        """Store an instance's reports (already ``clean_event``-ed) and advance its state.

        Returns (the new state, the sequence number of the last report stored)."""
        received = time.time() if received is None else received
        sql = self._sql  # type: ignore[attr-defined]
        with self._lock, self._transaction() as cur:  # type: ignore[attr-defined]
            cur.execute(sql("SELECT created_at FROM instances WHERE instance_id = ?"), (instance_id,))
            row = cur.fetchone()
            if row is None:
                raise ReportError("instance_id", f"no instance {instance_id}", 404)
            cur.execute(sql("INSERT INTO provisioning_state (instance_id, state, updated_at, kept, body) "
                            "VALUES (?, 'pending', ?, 0, ?) ON CONFLICT (instance_id) DO NOTHING"),
                        (instance_id, received, json.dumps(initial_state(instance_id, epoch_of(row[0])))))
            cur.execute(sql(f"SELECT kept, body FROM provisioning_state WHERE instance_id = ?{self.for_update}"),
                        (instance_id,))
            kept, body = cur.fetchone()
            state = json.loads(body)
            last = 0
            for event in events:
                advance(state, event, received)
                cur.execute(sql("INSERT INTO provisioning_reports (instance_id, boot, received_at, event) "
                                "VALUES (?, ?, ?, ?)"), (instance_id, state["boot"], received, json.dumps(event)))
                kept += 1
            cur.execute(sql("SELECT MAX(seq) FROM provisioning_reports WHERE instance_id = ?"), (instance_id,))
            last = int(cur.fetchone()[0] or 0)
            if kept > MAX_REPORTS_KEPT + MAX_REPORTS_KEPT // 10:  # prune now and then, not per report
                cur.execute(sql("DELETE FROM provisioning_reports WHERE instance_id = ? AND seq <= ?"),
                            (instance_id, last - MAX_REPORTS_KEPT))
                cur.execute(sql("SELECT COUNT(*) FROM provisioning_reports WHERE instance_id = ?"), (instance_id,))
                kept = int(cur.fetchone()[0])
            state["updated_at"] = received
            cur.execute(sql("UPDATE provisioning_state SET state = ?, updated_at = ?, kept = ?, body = ? "
                            "WHERE instance_id = ?"), (state["state"], received, kept, json.dumps(state), instance_id))
        return state, last

    def provisioning(self, instance_id: str) -> Optional[dict[str, Any]]:
        """The provisioning state of ``instance_id`` (``pending`` before any report), None if unknown."""
        sql = self._sql  # type: ignore[attr-defined]
        with self._cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(sql("SELECT i.created_at, p.body FROM instances i LEFT JOIN provisioning_state p "
                            "ON p.instance_id = i.instance_id WHERE i.instance_id = ?"), (instance_id,))
            row = cur.fetchone()
        if row is None:
            return None
        return json.loads(row[1]) if row[1] else initial_state(instance_id, epoch_of(row[0]))

    def provisioning_list(self, state: Optional[str] = None, limit: int = 1000, offset: int = 0,
                          contains: str = "") -> list[dict[str, Any]]:
        """Every instance's state (with its name and hostname), ordered by instance id; ``state``
        keeps one state, ``contains`` instances whose id, name or hostname contain that text."""
        where, params = [], []
        if state == "pending":
            where.append("(p.state IS NULL OR p.state = 'pending')")
        elif state:
            where.append("p.state = ?")
            params.append(state)
        if contains:
            where.append("(i.instance_id LIKE ? OR i.name LIKE ? OR i.hostname LIKE ?)")
            pattern = "%" + contains.replace("\\", "").replace("%", "").replace("_", "") + "%"
            params += [pattern] * 3
        query = ("SELECT i.instance_id, i.name, i.hostname, i.created_at, p.body FROM instances i "
                 "LEFT JOIN provisioning_state p ON p.instance_id = i.instance_id")
        if where:
            query += " WHERE " + " AND ".join(where)
        query += f" ORDER BY i.instance_id LIMIT {int(limit)} OFFSET {int(offset)}"
        with self._cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(self._sql(query), params)  # type: ignore[attr-defined]
            rows = cur.fetchall()
        out = []
        for instance_id, name, hostname, created, body in rows:
            entry = json.loads(body) if body else initial_state(instance_id, epoch_of(created))
            entry.update(name=name, hostname=hostname)
            out.append(entry)
        return out

    def provisioning_reports(self, instance_id: str, after: int = 0, boot: Optional[int] = None,
                             limit: int = MAX_REPORTS_KEPT) -> list[dict[str, Any]]:
        """An instance's reports after sequence number ``after`` (of boot ``boot`` when given), oldest
        first; each is the event with ``seq``, ``boot`` and ``received_at`` added."""
        query = "SELECT seq, boot, received_at, event FROM provisioning_reports WHERE instance_id = ? AND seq > ?"
        params: list[Any] = [instance_id, int(after)]
        if boot is not None:
            query += " AND boot = ?"
            params.append(int(boot))
        query += f" ORDER BY seq LIMIT {int(limit)}"
        with self._cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(self._sql(query), params)  # type: ignore[attr-defined]
            rows = cur.fetchall()
        return [{**json.loads(event), "seq": int(seq), "boot": int(b), "received_at": received}
                for seq, b, received, event in rows]
