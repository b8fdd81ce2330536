"""The timeline store (registry/events.py) on SQLite and a real PostgreSQL: events are validated,
kept across a reopen (a server restart), logged in the change feed, and go with their instance."""

from __future__ import annotations

import pytest

from cloudseed.provider.registry import InstanceRecord, RegistryError, open_registry
from cloudseed.provider.registry.events import Event, EventError, next_change, parse_time

T0 = 1_900_000_000.0  # 2030-03-17


def _instance(registry, instance_id="i-ev"):
    registry.add(InstanceRecord(instance_id=instance_id, hostname="ev"))


def test_events_are_stored_ordered_and_survive_a_reopen(db_url):
    with open_registry(db_url) as registry:
        _instance(registry)
        seq, _ = registry.changes_since(-1)
        late = registry.add_event("i-ev", "preempt", T0 + 600, details={"action": "stop"})
        early = registry.add_event("i-ev", "maintenance", T0, T0 + 3600, {"code": "instance-stop"}, "ev-1")
        assert registry.changes_since(seq)[1] == ["i-ev"]  # every server drops its cached copy
        assert early == Event("ev-1", "i-ev", "maintenance", T0, T0 + 3600, "scheduled",
                              {"code": "instance-stop", "description": "scheduled maintenance"},
                              early.created_at, 1, None)
        assert late.details == {"action": "stop", "notice_seconds": 120}  # defaults filled in
    with open_registry(db_url) as registry:  # a restart keeps them
        assert [e.event_id for e in registry.events("i-ev")] == ["ev-1", late.event_id]
        changed = registry.update_event("i-ev", "ev-1", state="canceled")
        assert changed.revision == 2 and changed.phase(T0) == "over"
        acked = registry.acknowledge_event("i-ev", late.event_id, T0 + 1)
        assert acked.acknowledged_at == T0 + 1 and acked.revision == 2
        assert registry.get_event("i-ev", late.event_id) == acked
        assert registry.acknowledge_event("i-ev", "nope") is None
        assert registry.delete_event("i-ev", "ev-1") and not registry.delete_event("i-ev", "ev-1")
        registry.delete("i-ev")  # the instance's events go with it
        assert registry.events("i-ev") == []


def test_deleted_events_weigh_in_retired_and_go_with_their_instance(db_url):
    """``timeline`` answers the events and what deleted ones weighed in one read; deleting the
    instance removes its per-instance settings rows (this weight, the OCI leaf keys), and only its."""
    with open_registry(db_url) as registry:
        for name in ("i-ret", "i-ret2", "i-ret-other"):
            _instance(registry, name)
        assert registry.timeline("i-ret") == ([], 0)
        first = registry.add_event("i-ret", "reboot", T0, event_id="r-1")
        registry.update_event("i-ret", "r-1", not_before=T0 + 60)  # revision 2
        second = registry.add_event("i-ret", "freeze", T0 + 120, event_id="f-1")
        events, retired = registry.timeline("i-ret")
        assert [e.event_id for e in events] == ["r-1", "f-1"] and retired == 0 and events[1] == second
        seq, _ = registry.changes_since(-1)
        assert registry.delete_event("i-ret", "r-1")
        assert registry.changes_since(seq)[1] == ["i-ret"]
        assert registry.timeline("i-ret") == ([second], 4 * (2 + 1))  # RETIRED_WEIGHT x (revision + 1)
        assert registry.delete_event("i-ret", "f-1") and not registry.delete_event("i-ret", "f-1")
        assert registry.timeline("i-ret") == ([], 12 + 4 * 2)
        assert first.revision == 1
        registry.add_event("i-ret2", "reboot", T0, event_id="r-2")
        registry.delete_event("i-ret2", "r-2")
        for name in ("i-ret", "i-ret2", "i-ret-other"):
            registry.shared_setting(f"oci_leaf_key/{name}/123", lambda: "key")
            registry.shared_setting(f"oci_leaf_key/{name}", lambda: "older key")
        registry.delete("i-ret")
        with registry._cursor() as cur:
            cur.execute("SELECT name FROM settings WHERE name LIKE 'events_retired/%' OR name LIKE 'oci_leaf_key/%'")
            left = sorted(row[0] for row in cur.fetchall())
        assert left == ["events_retired/i-ret2", "oci_leaf_key/i-ret-other", "oci_leaf_key/i-ret-other/123",
                        "oci_leaf_key/i-ret2", "oci_leaf_key/i-ret2/123"]
        _instance(registry, "i-ret")  # the same id again: a new instance, nothing carried over
        assert registry.timeline("i-ret") == ([], 0)


@pytest.mark.parametrize("kind, not_after, details, field", [
    ("explode", None, {}, "kind"),
    ("preempt", None, {"action": "reboot"}, "details.action"),
    ("preempt", None, {"colour": "red"}, "details.colour"),
    ("maintenance", None, {"code": "system-upgrade"}, "details.code"),
    ("lifecycle", None, {}, "details.state"),
    ("lifecycle", None, {"state": "Sleeping"}, "details.state"),
    ("fault", T0 + 60, {"path_prefix": "latest"}, "details.path_prefix"),
    ("fault", T0 + 60, {"path_prefix": "/latest", "status": 404}, "details.status"),
    ("fault", T0 + 60, {"path_prefix": "/latest"}, "details"),
    ("fault", None, {"path_prefix": "/latest", "status": 503}, "not_after"),
    ("rebalance", T0 - 1, {}, "not_after"),
    ("reboot", None, {"source": "Someone"}, "details.source"),
])
def test_bad_events_are_refused_naming_the_field(db_url, kind, not_after, details, field):
    with open_registry(db_url) as registry:
        _instance(registry)
        with pytest.raises(EventError) as raised:
            registry.add_event("i-ev", kind, T0, not_after, details)
        assert raised.value.field == field
        assert registry.events("i-ev") == []


def test_unknown_instance_duplicate_id_and_the_per_instance_limit(db_url):
    with open_registry(db_url) as registry:
        with pytest.raises(RegistryError) as missing:
            registry.add_event("i-none", "rebalance", T0)
        assert missing.value.status == 404
        _instance(registry)
        registry.add_event("i-ev", "rebalance", T0, event_id="same")
        with pytest.raises(RegistryError) as taken:
            registry.add_event("i-ev", "rebalance", T0, event_id="same")
        assert taken.value.status == 409
        for n in range(99):
            registry.add_event("i-ev", "rebalance", T0 + n)
        with pytest.raises(RegistryError) as full:
            registry.add_event("i-ev", "rebalance", T0)
        assert full.value.status == 409 and "limit" in str(full.value)


def test_phases_times_and_the_next_change():
    spot = Event("a", "i", "preempt", T0 + 300, None, details={"action": "terminate", "notice_seconds": 120})
    fault = Event("b", "i", "fault", T0 + 10, T0 + 70, details={"path_prefix": "/", "status": 503,
                                                                "delay_seconds": 0.0})
    assert [fault.phase(t) for t in (T0, T0 + 10, T0 + 69.9, T0 + 70)] == ["pending", "active", "active", "over"]
    assert next_change([spot, fault], T0) == T0 + 10
    assert next_change([spot, fault], T0 + 70) == T0 + 180  # the spot notice
    assert next_change([spot, fault], T0 + 300) is None
    assert parse_time("2030-03-17T17:46:40Z", "t") == T0
    assert parse_time("+60", "t", now=T0) == T0 + 60
    with pytest.raises(EventError):
        parse_time("tomorrow", "not_before")
