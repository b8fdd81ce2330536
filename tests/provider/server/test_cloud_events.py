"""Azure's scheduled events and GCE's maintenance-event/preempted from the timeline, read by small clients
of each cloud's documented polling loop, against a real ``cloudseed serve``.

The operator schedules events through the admin API (``/v1/instances/ID/events``); the Azure
client polls ``/metadata/scheduledevents`` as Azure's documentation describes (act when
``DocumentIncarnation`` changes, approve what it has handled with ``StartRequests``), the GCE
client long-polls ``instance/maintenance-event`` and ``instance/preempted`` with
``wait_for_change``, as Google's documentation describes, and must wake when an event starts or
ends.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.provider.server.server_support import ServerProcess, http, new_address

AZ = {"Metadata": "true"}
GOOGLE = {"Metadata-Flavor": "Google"}
SE = "/metadata/scheduledevents?api-version="


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("events")
    proc = ServerProcess(str(tmp / "db"), str(tmp / "srv"), ["127.0.0.1:0"], config={"rate_limit": 0})
    yield proc
    proc.stop()


def schedule(server, instance_id: str, **event) -> dict:
    reply = server.admin("POST", f"/v1/instances/{instance_id}/events", event)
    assert reply.status == 201, reply.text
    return reply.json()


class AzurePoller:
    """Azure's documented loop: read, act on a new DocumentIncarnation, approve handled events."""

    def __init__(self, server, address: str, version: str = "2020-07-01"):
        self.server, self.address, self.version = server, address, version
        self.incarnation = None
        self.handled: list[str] = []

    def read(self) -> dict:
        reply = self.server.get(SE + self.version, self.address, headers=AZ)
        assert reply.status == 200, reply.text
        return reply.json()

    def poll(self) -> dict:
        document = self.read()
        if document["DocumentIncarnation"] != self.incarnation:
            self.incarnation = document["DocumentIncarnation"]
            ready = [e["EventId"] for e in document["Events"] if e["EventStatus"] == "Scheduled"]
            if ready:  # drained: tell Azure it may go ahead
                body = json.dumps({"StartRequests": [{"EventId": i} for i in ready]})
                reply = self.server.get(SE + self.version, self.address, method="POST", headers=AZ, body=body)
                assert reply.status == 200, reply.text
                self.handled += ready
        return document


def test_azure_scheduled_events_flow(server):
    address = new_address()
    server.add(instance_id="az-events-1", name="vm-events", hostname="vm-events",
               addresses=[{"address": address, "network": "default"}], clouds={"azure": {}})
    poller = AzurePoller(server, address)
    assert poller.poll() == {"DocumentIncarnation": 0, "Events": []}
    reboot = schedule(server, "az-events-1", kind="reboot", not_before="+900")
    first = poller.poll()
    (event,) = first["Events"]
    assert event["EventId"] == reboot["event_id"] and event["EventType"] == "Reboot"
    assert event["EventStatus"] == "Scheduled" and event["NotBefore"].endswith("GMT")
    assert event["Resources"] == ["vm-events"] and event["ResourceType"] == "VirtualMachine"
    assert event["EventSource"] == "Platform" and event["DurationInSeconds"] == -1 and event["Description"]
    assert poller.handled == [reboot["event_id"]]  # the loop approved it...
    second = poller.read()  # ...and the next read shows it started, in a new incarnation
    assert second["Events"][0]["EventStatus"] == "Started" and second["Events"][0]["NotBefore"] == ""
    assert second["DocumentIncarnation"] > first["DocumentIncarnation"]
    # older api-versions show fewer fields, and no event types they did not have
    old = AzurePoller(server, address, "2017-11-01").read()["Events"][0]
    assert set(old) == {"EventId", "EventStatus", "EventType", "ResourceType", "Resources", "NotBefore"}
    schedule(server, "az-events-1", kind="terminate", not_before="+600")
    schedule(server, "az-events-1", kind="preempt", not_before="+30")
    schedule(server, "az-events-1", kind="freeze", not_before="+1", duration_seconds=2)
    schedule(server, "az-events-1", kind="redeploy", not_before="+1200")
    types = {v: sorted(e["EventType"] for e in AzurePoller(server, address, v).read()["Events"])
             for v in ("2017-08-01", "2017-11-01", "2019-08-01")}
    assert types["2017-08-01"] == ["Freeze", "Reboot", "Redeploy"]
    assert types["2017-11-01"] == ["Freeze", "Preempt", "Reboot", "Redeploy"]
    assert types["2019-08-01"] == ["Freeze", "Preempt", "Reboot", "Redeploy", "Terminate"]
    before = poller.read()
    freeze = next(e for e in before["Events"] if e["EventType"] == "Freeze")
    assert freeze["DurationInSeconds"] == 9  # Azure's for a freeze (the event's details)
    time.sleep(3.2)  # the freeze started and ended
    after = poller.read()
    assert "Freeze" not in [e["EventType"] for e in after["Events"]]
    assert after["DocumentIncarnation"] > before["DocumentIncarnation"]


def test_azure_document_incarnation_never_goes_down(server):
    """Moving an event later, approving it and deleting events (the operator's) all move
    DocumentIncarnation up; before, a moved or deleted event could take it back down."""
    address = new_address()
    server.add(instance_id="az-events-2", hostname="vm-inc", addresses=[{"address": address, "network": "default"}],
               clouds={"azure": {}})
    poller = AzurePoller(server, address)
    seen = [poller.read()["DocumentIncarnation"]]

    def read(events: int) -> dict:
        document = poller.read()
        assert len(document["Events"]) == events, document
        assert document["DocumentIncarnation"] > seen[-1], (seen, document)
        seen.append(document["DocumentIncarnation"])
        return document

    preempt = schedule(server, "az-events-2", kind="preempt", not_before="+60")  # shown: within its notice
    reboot = schedule(server, "az-events-2", kind="reboot", not_before="+900")
    read(2)
    # later than its notice: not shown any more (the revision went up by one, the phases down by one)
    moved = server.admin("PATCH", f"/v1/instances/az-events-2/events/{preempt['event_id']}",
                         {"not_before": "+3600"})
    assert moved.status == 200, moved.text
    assert [e["EventType"] for e in read(1)["Events"]] == ["Reboot"]
    body = json.dumps({"StartRequests": [{"EventId": reboot["event_id"]}]})
    assert server.get(SE + "2020-07-01", address, method="POST", headers=AZ, body=body).status == 200
    assert read(1)["Events"][0]["EventStatus"] == "Started"
    for event in (reboot, preempt):  # deleted by the operator: gone, and the number still grows
        assert server.admin("DELETE", f"/v1/instances/az-events-2/events/{event['event_id']}").status == 204
        read(0)
    assert poller.read()["DocumentIncarnation"] == seen[-1]  # and stays while nothing changes


def long_poll(server, address: str, leaf: str, last_etag: str, timeout: int = 10):
    started = time.monotonic()
    reply = http(server.port, f"/computeMetadata/v1/instance/{leaf}?wait_for_change=true&last_etag={last_etag}"
                              f"&timeout_sec={timeout}", source=address, headers=GOOGLE)
    assert reply.status == 200
    return reply.text, reply.headers["etag"], time.monotonic() - started


def test_gce_maintenance_event_and_preempted_wake_their_watchers(server):
    address = new_address()
    server.add(instance_id="7770001", hostname="gce-events", addresses=[{"address": address, "network": "default"}],
               clouds={"gce": {"project_id": "p"}})
    now = http(server.port, "/computeMetadata/v1/instance/maintenance-event", source=address, headers=GOOGLE)
    assert now.text == "NONE"
    schedule(server, "7770001", kind="maintenance", not_before="+2", duration_seconds=2)
    value, etag, waited = long_poll(server, address, "maintenance-event", now.headers["etag"])
    assert value == "MIGRATE_ON_HOST_MAINTENANCE" and 1.0 < waited < 4.0
    value, _, waited = long_poll(server, address, "maintenance-event", etag)
    assert value == "NONE" and waited < 4.0  # woken again when it ended
    preempted = http(server.port, "/computeMetadata/v1/instance/preempted", source=address, headers=GOOGLE)
    assert preempted.text == "FALSE"
    schedule(server, "7770001", kind="preempt", not_before="+1")
    value, _, waited = long_poll(server, address, "preempted", preempted.headers["etag"])
    assert value == "TRUE" and waited < 4.0
    whole = http(server.port, "/computeMetadata/v1/instance/?recursive=true", source=address, headers=GOOGLE).json()
    assert whole["preempted"] == "TRUE"
