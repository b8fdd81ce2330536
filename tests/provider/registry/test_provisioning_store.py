"""Provisioning reports in the registry (SQLite and PostgreSQL): the state machine, bounds, upgrade."""

from __future__ import annotations

import sqlite3

import pytest

from cloudseed.provider.registry import InstanceRecord, open_registry
from cloudseed.provider.registry import provisioning as prov
from cloudseed.provider.registry.provisioning import ReportError, clean_event, parse_post


def start(name, ts, **extra):
    return clean_event({"event_type": "start", "name": name, "description": f"running {name}", "timestamp": ts,
                        **extra})


def finish(name, ts, result="SUCCESS", description="", **extra):
    return clean_event({"event_type": "finish", "name": name, "description": description or f"{name} done",
                        "timestamp": ts, "result": result, "duration": 0.5, **extra})


def boot(ts=1000.0, boot_id="b1", runcmd="SUCCESS", warn=False):
    events = [start("init-local", ts, boot_id=boot_id),
              finish("init-local", ts + 1, datasource="NoCloud", boot_id=boot_id),
              start("init-network", ts + 2, boot_id=boot_id),
              finish("init-network", ts + 3, "WARN" if warn else "SUCCESS", boot_id=boot_id),
              start("modules-config", ts + 4, boot_id=boot_id), finish("modules-config", ts + 5, boot_id=boot_id),
              start("modules-final", ts + 6, boot_id=boot_id),
              start("modules-final/config-scripts_user", ts + 6.1, boot_id=boot_id),
              finish("modules-final/config-scripts_user", ts + 6.5, runcmd,
                     "1 of 1 scripts failed: runcmd (exit 3)" if runcmd == "FAIL" else "", boot_id=boot_id),
              finish("modules-final", ts + 7, runcmd, boot_id=boot_id)]
    return events


@pytest.fixture
def registry(db_url):
    reg = open_registry(db_url)
    reg.add(InstanceRecord.from_dict({"instance_id": "i-prov", "addresses": ["10.9.0.5"]}))
    yield reg
    reg.close()


def test_pending_then_provisioning_then_done_with_the_time_of_each(registry):
    assert registry.provisioning("i-prov")["state"] == "pending"
    assert registry.provisioning("i-nobody") is None
    events = boot()
    state, _ = registry.add_reports("i-prov", events[:3], received=2000.0)
    assert state["state"] == "provisioning" and state["datasource"] == "NoCloud"
    state, last = registry.add_reports("i-prov", events[3:], received=2003.0)
    assert state["state"] == "done"
    assert state["times"]["provisioning"] == 2000.0 and state["times"]["done"] == 2003.0
    assert "pending" in state["times"]  # the record's creation
    assert state["boot_seconds"] == 7.0 and state["boot"] == 1
    assert registry.provisioning("i-prov") == state
    reports = registry.provisioning_reports("i-prov")
    assert [r["name"] for r in reports] == [e["name"] for e in events]
    assert reports[-1]["seq"] == last and registry.provisioning_reports("i-prov", after=last) == []


def test_a_failing_module_fails_the_instance_at_once_naming_it(registry):
    events = boot(runcmd="FAIL")
    state, _ = registry.add_reports("i-prov", events[:9], received=10.0)  # up to the module's finish
    assert state["state"] == "failed" and state["times"]["failed"] == 10.0
    assert state["failure"] == {"name": "modules-final/config-scripts_user",
                                "message": "1 of 1 scripts failed: runcmd (exit 3)"}
    state, _ = registry.add_reports("i-prov", events[9:], received=11.0)
    assert state["state"] == "failed" and state["failure"]["name"] == "modules-final/config-scripts_user"
    assert "done" not in state["times"]


def test_warnings_make_it_degraded_and_a_new_boot_starts_again(registry):
    state, _ = registry.add_reports("i-prov", boot(warn=True), received=1.0)
    assert state["state"] == "degraded" and state["warnings"] == ["init-network: init-network done"]
    state, _ = registry.add_reports("i-prov", boot(ts=5000.0, boot_id="b2")[:2], received=2.0)
    assert state["state"] == "provisioning" and state["boot"] == 2 and state["warnings"] == []
    assert len(registry.provisioning_reports("i-prov", boot=2)) == 2
    assert len(registry.provisioning_reports("i-prov", boot=1)) == 10


def test_cloud_init_webhook_events_without_boot_id_are_grouped_by_stage_starts(registry):
    plain = [{k: v for k, v in e.items() if k not in ("boot_id", "datasource")} for e in boot()]
    plain[1]["description"] = "found local data from DataSourceNoCloud"
    state, _ = registry.add_reports("i-prov", [clean_event(e) for e in plain])
    assert state["state"] == "done" and state["datasource"] == "NoCloud"
    state, _ = registry.add_reports("i-prov", [clean_event(plain[2])])  # init-network again: a reboot
    assert state["boot"] == 2 and state["state"] == "provisioning"


def test_reports_are_bounded_per_instance(registry, monkeypatch):
    monkeypatch.setattr(prov, "MAX_REPORTS_KEPT", 50)
    for i in range(12):
        registry.add_reports("i-prov", [start(f"modules-config/config-m{i}-{j}", float(j)) for j in range(10)])
    kept = registry.provisioning_reports("i-prov")
    assert 50 <= len(kept) <= 55 and kept[-1]["name"] == "modules-config/config-m11-9"


def test_unknown_instance_and_bad_events_are_refused_naming_the_field(registry):
    with pytest.raises(ReportError) as unknown:
        registry.add_reports("i-nobody", [start("init-local", 1.0)])
    assert unknown.value.status == 404
    with pytest.raises(ReportError) as bad:
        parse_post(b'{"events": [{"event_type": "start", "name": "x", "timestamp": 1}, '
                   b'{"event_type": "finish", "name": "y", "timestamp": 2, "result": "MAYBE"}]}')
    assert bad.value.field == "events[1].result"
    with pytest.raises(ReportError) as no_time:
        parse_post(b'{"event_type": "start", "name": "x", "timestamp": "soon"}')
    assert no_time.value.field == "event.timestamp"
    long = parse_post(b'{"event_type": "start", "name": "x", "timestamp": 1, "description": "' + b"a" * 9000
                      + b'", "files": [{"path": "/etc/shadow", "content": "x"}]}')
    assert len(long[0]["description"]) == prov.MAX_DESCRIPTION and "files" not in long[0]


def test_filtering_the_fleet_by_state_and_text(registry):
    registry.add(InstanceRecord.from_dict({"instance_id": "i-other", "name": "web-7", "addresses": ["10.9.0.6"]}))
    registry.add_reports("i-prov", boot(runcmd="FAIL"))
    assert [e["instance_id"] for e in registry.provisioning_list(state="failed")] == ["i-prov"]
    assert [e["instance_id"] for e in registry.provisioning_list(state="pending")] == ["i-other"]
    assert [e["instance_id"] for e in registry.provisioning_list(contains="web-")] == ["i-other"]
    registry.delete("i-prov")
    assert registry.provisioning("i-prov") is None and registry.provisioning_reports("i-prov") == []


def test_a_version_3_database_gains_the_provisioning_tables(tmp_path):
    path = str(tmp_path / "v3.db")
    open_registry(path).close()
    conn = sqlite3.connect(path)  # as a schema-3 release left it
    conn.executescript("DROP TABLE provisioning_reports; DROP TABLE provisioning_state; "
                       "DELETE FROM schema_version; INSERT INTO schema_version VALUES (3, 'then');")
    conn.close()
    with open_registry(path) as registry:
        assert registry.schema_version() == 4
        registry.add(InstanceRecord.from_dict({"instance_id": "i-up", "addresses": ["10.9.1.5"]}))
        assert registry.add_reports("i-up", boot())[0]["state"] == "done"


def test_the_instances_command_shows_the_fleet_and_one_timeline(tmp_path):
    import json
    import subprocess
    import sys

    path = str(tmp_path / "cli.db")
    with open_registry(path) as registry:
        registry.add(InstanceRecord.from_dict({"instance_id": "i-cli", "addresses": ["10.9.2.5"]}))
        registry.add(InstanceRecord.from_dict({"instance_id": "i-quiet", "addresses": ["10.9.2.6"]}))
        registry.add_reports("i-cli", boot(runcmd="FAIL"))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", path, "provisioning", *args],
                              capture_output=True, text=True, timeout=60)

    fleet = cli()
    assert fleet.returncode == 0 and "i-cli" in fleet.stdout and "i-quiet" in fleet.stdout
    assert "failed" in fleet.stdout and "runcmd (exit 3)" in fleet.stdout
    assert "i-cli" not in cli("--state", "pending").stdout
    one = cli("i-cli")
    assert one.returncode == 1  # failed
    assert "fail    modules-final/config-scripts_user" in one.stdout and "datasource NoCloud" in one.stdout
    shown = json.loads(cli("i-cli", "--json").stdout)
    assert shown["provisioning"]["state"] == "failed" and len(shown["reports"]) == 10
    assert cli("i-nobody").returncode == 1
